"""Java's TLS details for one client: hostname verification, cipher suites, TLS version pins.

Why apart from :mod:`mm2py.librdkafka.settings`: each of the three needs its own reading (cipher names,
:mod:`mm2py.librdkafka.cipher_names`; version pins, :mod:`mm2py.librdkafka.tls_versions`), and what each path can
honour differs; this is where a translation learns it, so both paths get the same answer.
"""

from __future__ import annotations

from mm2py.librdkafka.cipher_names import read_cipher_suites
from mm2py.librdkafka.jaas import SettingsSink
from mm2py.librdkafka.tls_versions import PIN_KEY, read_version_pin

TLS_DETAIL_KEYS = (
    "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites",
    "ssl.enabled.protocols",
    "ssl.protocol",
)


def translate_tls_details(sink: SettingsSink) -> None:
    """Put what the TLS detail keys of ``sink.java`` mean into ``sink``, or report why they cannot carry over."""
    java = sink.java
    key = "ssl.endpoint.identification.algorithm"
    if key in java:
        algorithm = java[key].lower()
        if algorithm in ("", "https"):
            sink.put(key, algorithm or "none", key)
        else:
            sink.error(key, "not an algorithm librdkafka knows", '"" (none) or https')
    if java.get("ssl.cipher.suites"):
        _cipher_suites(sink, java["ssl.cipher.suites"])
    pin = read_version_pin(java)
    if pin.error is not None:
        sink.error(*pin.error)
    for version in pin.dropped:
        sink.warn("ssl.enabled.protocols", f"lists {version}, which mm2py's clients never offer (OpenSSL 3 neither)")
    if pin.pinned is not None:
        source = "ssl.enabled.protocols" if "ssl.enabled.protocols" in java else "ssl.protocol"
        sink.put(PIN_KEY, pin.pinned, source)


def _cipher_suites(sink: SettingsSink, value: str) -> None:
    suites = read_cipher_suites(value)
    if suites.unknown:
        sink.error(
            "ssl.cipher.suites",
            f"names cipher suites mm2py does not know: {', '.join(suites.unknown)}",
            "Java (IANA) names of TLS 1.2 suites with certificate authentication, TLS 1.3 suite names, "
            "OpenSSL cipher names",
        )
    if suites.tls13:
        sink.warn(
            "ssl.cipher.suites",
            "lists TLS 1.3 suites, which librdkafka cannot restrict: OpenSSL's TLS 1.3 defaults apply",
        )
    if suites.openssl:
        sink.put("ssl.cipher.suites", ":".join(suites.openssl), "ssl.cipher.suites")

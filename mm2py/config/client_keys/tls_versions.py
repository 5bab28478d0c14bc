"""TLS version pins (Java's ``ssl.enabled.protocols`` and ``ssl.protocol``) read into the one version a client
offers at least.

Why a module: MM2 users pin TLS 1.3 to meet a security rule, and a pin that is silently dropped lets a client
talk TLS 1.2 to a broker that still offers it. The batch path (Python's ``ssl``) pins exactly; librdkafka has no
such setting, so what it can honour and how the driver checks a pin is :mod:`mm2py.librdkafka.tls_versions`. A pin
that keeps TLS 1.3 *out* (TLSv1.2 only) cannot be honoured by librdkafka at all, and is refused here, when the file
is read. The pin reaches the clients as ``TlsSettings.minimum_version``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SUPPORTED = ("TLSv1.2", "TLSv1.3")
_TOO_OLD = ("TLSv1", "TLSv1.1")
_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class VersionPin:
    """What ``ssl.enabled.protocols``/``ssl.protocol`` ask for: the pinned version (None: no pin), or a problem."""

    pinned: str | None = None
    error: tuple[str, str, str] | None = None  # key, reason, allowed
    dropped: tuple[str, ...] = ()  # versions listed that no mm2py client offers


def read_version_pin(java: Mapping[str, str]) -> VersionPin:
    """The pin that Java's two keys make together (Java: ``ssl.protocol=TLSv1.2`` keeps TLS 1.3 out)."""
    enabled = [v.strip() for v in java.get("ssl.enabled.protocols", ",".join(SUPPORTED)).split(",") if v.strip()]
    protocol = java.get("ssl.protocol", "TLSv1.3").strip()
    unknown = [v for v in enabled if v not in (*SUPPORTED, *_TOO_OLD)]
    if unknown:
        return VersionPin(
            error=("ssl.enabled.protocols", f"{', '.join(unknown)}: not a TLS version", "TLSv1.2, TLSv1.3")
        )
    if protocol not in _PROTOCOLS:
        return VersionPin(error=("ssl.protocol", "not a TLS protocol mm2py's clients offer", ", ".join(_PROTOCOLS)))
    versions = [v for v in SUPPORTED if v in enabled and not (protocol == "TLSv1.2" and v == "TLSv1.3")]
    dropped = tuple(v for v in enabled if v in _TOO_OLD)
    if not versions:
        key = "ssl.protocol" if protocol == "TLSv1.2" and "TLSv1.3" in enabled else "ssl.enabled.protocols"
        return VersionPin(
            error=(key, "leaves no TLS version mm2py's clients offer", "TLSv1.2, TLSv1.3"), dropped=dropped
        )
    if versions == ["TLSv1.2"]:
        reason = (
            "keeps TLS 1.3 out, which librdkafka (mm2py's admin clients and record path) has no setting for, "
            "so the pin cannot be honoured"
        )
        key = "ssl.protocol" if protocol == "TLSv1.2" else "ssl.enabled.protocols"
        return VersionPin(error=(key, reason, "TLSv1.3, or TLSv1.2,TLSv1.3 (no pin)"), dropped=dropped)
    return VersionPin(pinned="TLSv1.3" if versions == ["TLSv1.3"] else None, dropped=dropped)

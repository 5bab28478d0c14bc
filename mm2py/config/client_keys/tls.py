"""A TLS client's material and checks: Java key and trust stores (or PEM, or librdkafka's own keys), hostname
verification, cipher suites and version pins, read into the typed :class:`~mm2py.client_settings.TlsSettings`.

Java key and trust stores (JKS, JCEKS, PKCS12) are read here, with their passwords, into PEM text
(:mod:`mm2py.config.client_keys.keystores`): OpenSSL cannot read JKS, and no converted copy of a private key is left
on disk. A store that is missing or that its password does not open is an error naming the key to fix.
"""

from __future__ import annotations

from mm2py.client_settings import TlsSettings
from mm2py.config.client_keys.cipher_names import read_cipher_suites
from mm2py.config.client_keys.key_reading import KeyReading
from mm2py.config.client_keys.keystores import STORE_TYPES, KeyStoreError
from mm2py.config.client_keys.keystores import read_keystore as read_key_store
from mm2py.config.client_keys.keystores import read_truststore as read_trust_store
from mm2py.config.client_keys.tls_versions import read_version_pin

# Where a pinned version is kept while reading (librdkafka has no property for it).
MINIMUM_VERSION = "mm2py.ssl.minimum.version"


def _store_type(declared: str, location: str) -> str:
    if declared:
        return declared.upper()
    # Java's default store type is JKS; since Java 9 that type also opens PKCS12 files, hence the extension.
    return "PKCS12" if location.lower().endswith((".p12", ".pfx")) else "JKS"


def read_keystore(reading: KeyReading) -> None:
    """The client certificate and key: a Java key store, PEM (a file or inline), or librdkafka's own keys."""
    java = reading.java
    location, declared = java.get("ssl.keystore.location", ""), java.get("ssl.keystore.type", "")
    key_password, password = java.get("ssl.key.password", ""), java.get("ssl.keystore.password", "")
    if java.get("ssl.keystore.key") or java.get("ssl.keystore.certificate.chain"):
        if declared.upper() not in ("", "PEM") or location:
            reading.error(
                "ssl.keystore.key",
                "an inline PEM key, which needs ssl.keystore.type=PEM and no ssl.keystore.location",
            )
        elif not (java.get("ssl.keystore.key") and java.get("ssl.keystore.certificate.chain")):
            reading.error("ssl.keystore.key", "needs ssl.keystore.certificate.chain, and the other way round")
        else:
            reading.put("ssl.key.pem", java["ssl.keystore.key"], "ssl.keystore.key")
            reading.put(
                "ssl.certificate.pem",
                java["ssl.keystore.certificate.chain"],
                "ssl.keystore.certificate.chain",
            )
            if key_password:
                reading.put("ssl.key.password", key_password, "ssl.key.password")
        return
    store_type = _store_type(declared, location)
    if not location:
        if key_password and ("ssl.key.location" in java or "ssl.key.pem" in java):
            reading.put("ssl.key.password", key_password, "ssl.key.password")  # librdkafka's own key names
    elif store_type == "PEM":  # one file with the private key and the certificate chain
        reading.put("ssl.key.location", location, "ssl.keystore.location")
        reading.put("ssl.certificate.location", location, "ssl.keystore.location")
        if key_password:
            reading.put("ssl.key.password", key_password, "ssl.key.password")
    elif store_type not in STORE_TYPES:
        reading.error(
            "ssl.keystore.type",
            f"a {store_type} keystore, which mm2py cannot read",
            ", ".join((*STORE_TYPES, "PEM")),
        )
    else:
        try:
            certificate = read_key_store(location, store_type, password, key_password or None)
        except KeyStoreError as problem:
            reading.error(problem.key, f"{problem.reason} ({_role_of(store_type, declared, 'keystore')})")
            return
        # In memory: the key reaches librdkafka (and the batch path) without a file or a password.
        reading.put("ssl.key.pem", certificate.key_pem, "ssl.keystore.location")
        reading.put("ssl.certificate.pem", certificate.chain_pem, "ssl.keystore.location")


def read_truststore(reading: KeyReading) -> None:
    """Whom the client trusts: a Java trust store, PEM (a file or inline certificates)."""
    java = reading.java
    location, declared = java.get("ssl.truststore.location", ""), java.get("ssl.truststore.type", "")
    certificates = java.get("ssl.truststore.certificates", "")
    store_type = "PEM" if certificates and not declared else _store_type(declared, location)
    if store_type == "PEM" and java.get("ssl.truststore.password"):
        reading.warn("ssl.truststore.password", "not used by a PEM truststore, dropped")
    if certificates:
        if store_type != "PEM" or location:
            reading.error(
                "ssl.truststore.certificates",
                "inline PEM certificates, which need ssl.truststore.type=PEM and no ssl.truststore.location",
            )
        else:
            reading.put("ssl.ca.pem", certificates, "ssl.truststore.certificates")
    elif not location:
        return
    elif store_type == "PEM":
        reading.put("ssl.ca.location", location, "ssl.truststore.location")
    elif store_type not in STORE_TYPES:
        reading.error(
            "ssl.truststore.type",
            f"a {store_type} truststore, which mm2py cannot read",
            ", ".join((*STORE_TYPES, "PEM")),
        )
    else:
        try:
            bundle = read_trust_store(location, store_type, java.get("ssl.truststore.password") or None)
        except KeyStoreError as problem:
            reading.error(problem.key, f"{problem.reason} ({_role_of(store_type, declared, 'truststore')})")
            return
        reading.put("ssl.ca.pem", bundle, "ssl.truststore.location")


def _role_of(store_type: str, declared: str, role: str) -> str:
    origin = "" if declared else (", by its file name" if store_type == "PKCS12" else ", Java's default type")
    return f"a {store_type} {role}{origin}"


def read_tls_details(reading: KeyReading) -> None:
    """Hostname verification, cipher suites and version pins, or why they cannot carry over."""
    java = reading.java
    key = "ssl.endpoint.identification.algorithm"
    if key in java:
        algorithm = java[key].lower()
        if algorithm in ("", "https"):
            reading.put(key, algorithm or "none", key)
        else:
            reading.error(key, "not an algorithm librdkafka knows", '"" (none) or https')
            reading.put(key, algorithm, key)  # kept, so the typed settings say it cannot be used
    if java.get("ssl.cipher.suites"):
        _cipher_suites(reading, java["ssl.cipher.suites"])
    pin = read_version_pin(java)
    if pin.error is not None:
        reading.error(*pin.error)
    for version in pin.dropped:
        reading.warn("ssl.enabled.protocols", f"lists {version}, which mm2py's clients never offer (OpenSSL 3 neither)")
    if pin.pinned is not None:
        source = "ssl.enabled.protocols" if "ssl.enabled.protocols" in java else "ssl.protocol"
        reading.put(MINIMUM_VERSION, pin.pinned, source)


def _cipher_suites(reading: KeyReading, value: str) -> None:
    suites = read_cipher_suites(value)
    if suites.unknown:
        reading.error(
            "ssl.cipher.suites",
            f"names cipher suites mm2py does not know: {', '.join(suites.unknown)}",
            "Java (IANA) names of TLS 1.2 suites with certificate authentication, TLS 1.3 suite names, "
            "OpenSSL cipher names",
        )
    if suites.tls13:
        reading.warn(
            "ssl.cipher.suites",
            "lists TLS 1.3 suites, which librdkafka cannot restrict: OpenSSL's TLS 1.3 defaults apply",
        )
    if suites.openssl:
        reading.put("ssl.cipher.suites", ":".join(suites.openssl), "ssl.cipher.suites")


def typed_tls(reading: KeyReading) -> TlsSettings:
    """The TLS settings that what was read makes; a value that cannot be used becomes a problem."""
    get = reading.get
    algorithm = (get("ssl.endpoint.identification.algorithm") or "https").lower()
    if algorithm not in ("https", "none"):
        reading.problem("ssl.endpoint.identification.algorithm", "not an algorithm librdkafka knows", "https, none")
        algorithm = "https"
    if bool(get("ssl.certificate.pem")) != bool(get("ssl.key.pem")):
        reading.problem("ssl.key.pem", "an inline client key needs ssl.certificate.pem too, and the other way round")
    elif get("ssl.key.location") and not get("ssl.certificate.location") and not get("ssl.key.pem"):
        reading.problem("ssl.key.location", "a client key needs ssl.certificate.location too")
    return TlsSettings(
        ca_location=get("ssl.ca.location") or None,
        ca_pem=get("ssl.ca.pem") or None,
        certificate_location=get("ssl.certificate.location") or None,
        key_location=get("ssl.key.location") or None,
        certificate_pem=get("ssl.certificate.pem") or None,
        key_pem=get("ssl.key.pem") or None,
        key_password=get("ssl.key.password") or None,
        endpoint_identification=algorithm,
        verify_certificates=(get("enable.ssl.certificate.verification") or "true").lower() != "false",
        cipher_suites=get("ssl.cipher.suites") or None,
        crl_location=get("ssl.crl.location") or None,
        minimum_version=get(MINIMUM_VERSION) or "TLSv1.2",
    )

"""Java key and trust stores (JKS, JCEKS, PKCS12) read into PEM text, in memory, for mm2py's clients.

Why: MM2 users point ``ssl.truststore.location`` and ``ssl.keystore.location`` at the stores their Java
clients use, and librdkafka (OpenSSL) cannot read JKS at all. Asking users to convert their stores with
keytool means a second copy of their key material on disk, kept in step by hand. Instead reading a client's TLS
keys (:mod:`mm2py.config.client_keys.tls`) calls this module, and the clients get PEM text in the typed settings
(librdkafka through its in-memory ``ssl.ca.pem``, ``ssl.certificate.pem`` and ``ssl.key.pem``): the private key
leaves the store only as an unencrypted PEM string in process memory, never as a file.

JKS and JCEKS are read with ``pyjks``, PKCS12 with ``cryptography``; both are imported only when a store is
actually read. The passwords mean what they mean to Kafka's Java client: ``ssl.truststore.password`` checks
a truststore's integrity (Java skips the check when it is unset), ``ssl.keystore.password`` opens a keystore
and ``ssl.key.password`` its key (Kafka falls back to the store password when it is unset).

Errors are :class:`KeyStoreError`, naming the setting at fault and a reason that never contains a password
or key material.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Store types this module reads; Java's PEM type needs no reading (librdkafka takes PEM files directly).
STORE_TYPES = ("JKS", "JCEKS", "PKCS12")
_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")


class KeyStoreError(Exception):
    """A store cannot be used; ``key`` is the Java setting to fix (location or password)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class ClientCertificate:
    """A keystore's private key and certificate chain, as PEM text; the key is never printed."""

    key_pem: str = field(repr=False)
    chain_pem: str


def read_truststore(location: str, store_type: str, password: str | None) -> str:
    """Every trusted certificate of the store at ``location``, as concatenated PEM (a CA bundle)."""
    data = _read(location, "ssl.truststore.location")
    if _is_pkcs12(data, store_type):
        bundle = _pkcs12(data, password, "ssl.truststore")
        certificates = [bundle.cert.certificate] if bundle.cert is not None else []
        certificates += [extra.certificate for extra in bundle.additional_certs]
        pems = [_cert_pem(cert) for cert in certificates]
    else:
        store = _jks(data, password, "ssl.truststore")
        pems = [ssl.DER_cert_to_PEM_cert(entry.cert) for entry in store.certs.values()]
        # Java trusts the certificate chains of key entries too (a keystore used as a truststore).
        pems += [ssl.DER_cert_to_PEM_cert(der) for entry in store.private_keys.values() for _, der in entry.cert_chain]
    if not pems:
        raise KeyStoreError("ssl.truststore.location", f"the {store_type} truststore holds no certificates")
    return "".join(pems)


def read_keystore(location: str, store_type: str, password: str, key_password: str | None) -> ClientCertificate:
    """The one private key of the store at ``location`` with its certificate chain, as PEM."""
    data = _read(location, "ssl.keystore.location")
    if _is_pkcs12(data, store_type):
        bundle = _pkcs12(data, password or None, "ssl.keystore")
        if bundle.key is None or bundle.cert is None:
            raise KeyStoreError("ssl.keystore.location", "the PKCS12 keystore holds no private key with a certificate")
        certificates = [bundle.cert.certificate, *(extra.certificate for extra in bundle.additional_certs)]
        return ClientCertificate(_key_pem(bundle.key), "".join(_cert_pem(cert) for cert in certificates))
    store = _jks(data, password or None, "ssl.keystore")
    if len(store.private_keys) != 1:
        aliases = ", ".join(sorted(store.private_keys)) or "none"
        raise KeyStoreError(
            "ssl.keystore.location",
            f"the {store_type} keystore holds {len(store.private_keys)} "
            f"private keys (aliases: {aliases}); a client presents exactly one",
        )
    entry = next(iter(store.private_keys.values()))
    import jks

    try:
        entry.decrypt(key_password or password)
    except jks.DecryptionFailureException:
        key = "ssl.key.password" if key_password else "ssl.keystore.password"
        raise KeyStoreError(
            key, f"does not decrypt the private key of the {store_type} keystore (a wrong password?)"
        ) from None
    except jks.UnexpectedAlgorithmException as exc:
        raise KeyStoreError(
            "ssl.keystore.location", f"the private key is protected by an unknown algorithm: {exc}"
        ) from None
    from cryptography.hazmat.primitives.serialization import load_der_private_key

    private_key = load_der_private_key(entry.pkey_pkcs8, password=None)
    chain = "".join(ssl.DER_cert_to_PEM_cert(der) for _, der in entry.cert_chain)
    return ClientCertificate(_key_pem(private_key), chain)


def _read(location: str, key: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except FileNotFoundError:
        raise KeyStoreError(key, "no such file") from None
    except OSError as exc:
        raise KeyStoreError(key, f"cannot be read: {exc.strerror or exc}") from None


def _is_pkcs12(data: bytes, store_type: str) -> bool:
    """Java's JKS and JCEKS types also open PKCS12 files (``keystore.type.compat``), so the bytes decide."""
    return store_type == "PKCS12" or data[:4] not in _JKS_MAGIC


def _jks(data: bytes, password: str | None, prefix: str) -> Any:
    import jks

    try:
        # Keys are decrypted separately, with ssl.key.password; the store password only checks integrity here.
        return jks.KeyStore.loads(data, password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise KeyStoreError(
            f"{prefix}.password", "does not match the store's integrity check (a wrong password?)"
        ) from None
    except (jks.BadKeystoreFormatException, jks.KeystoreException) as exc:
        reason = str(exc).split(";")[0]
        raise KeyStoreError(f"{prefix}.location", f"not a readable JKS or JCEKS store ({reason})") from None


def _pkcs12(data: bytes, password: str | None, prefix: str) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise KeyStoreError(
            f"{prefix}.password", "does not open the PKCS12 store (a wrong password, or not a PKCS12 file)"
        ) from None


def _cert_pem(certificate: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return str(certificate.public_bytes(Encoding.PEM).decode("ascii"))


def _key_pem(key: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return str(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode("ascii"))

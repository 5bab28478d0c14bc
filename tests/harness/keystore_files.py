"""Java key and trust stores for tests, written without a JVM: JKS with pyjks, PKCS12 with cryptography.

Why: unit tests must run without Java, yet the store reader has to be tested on real store files, not on
mocks (pyjks cannot write JCEKS, so that type is untested). The real-Kafka tests use keytool-made stores
as well (tests/real_kafka_security.py), so both writers are covered.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import jks
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Identity:
    """A self-signed EC certificate and its key."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_der(self) -> bytes:
        return self.cert.public_bytes(Encoding.DER)

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(Encoding.PEM).decode()

    @property
    def key_pkcs8_der(self) -> bytes:
        return self.key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())


def identity(name: str) -> Identity:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .sign(key, hashes.SHA256())
    )
    return Identity(name, key, cert)


def jks_truststore(path: Path, password: str, *certs: Identity) -> Path:
    entries = [jks.TrustedCertEntry.new(c.name, c.cert_der) for c in certs]
    jks.KeyStore.new("jks", entries).save(str(path), password)
    return path


def jks_keystore(path: Path, store_password: str, key_password: str, *owners: Identity) -> Path:
    entries = []
    for owner in owners:
        entry = jks.PrivateKeyEntry.new(owner.name, [owner.cert_der], owner.key_pkcs8_der, "pkcs8")
        entry.encrypt(key_password)
        entries.append(entry)
    jks.KeyStore.new("jks", entries).save(str(path), store_password)
    return path


def pkcs12_truststore(path: Path, password: str, *certs: Identity) -> Path:
    cas = [pkcs12.PKCS12Certificate(c.cert, c.name.encode()) for c in certs]
    path.write_bytes(pkcs12.serialize_java_truststore(cas, BestAvailableEncryption(password.encode())))
    return path


def pkcs12_keystore(path: Path, password: str, owner: Identity) -> Path:
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            owner.name.encode(), owner.key, owner.cert, None, BestAvailableEncryption(password.encode())
        )
    )
    return path

"""Credentials and TLS stores for the real-Kafka test clusters (``real_kafka.KafkaCluster``).

Why its own module: listeners differ only in these settings, and the broker side (JAAS, keystores,
SCRAM users written at format time) must agree with the client side (librdkafka settings, and Java client
settings for MirrorMaker 2 started by later tests). Keeping both halves here makes that agreement visible.

Listener names equal their security protocols. Inter-broker traffic and the KRaft quorum stay on
PLAINTEXT, so a SASL or TLS listener only ever serves clients. Passwords are random per cluster and are
never put into messages or logs; they live only in the cluster's temp directory and in this object.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat
from cryptography.hazmat.primitives.serialization import pkcs12 as pkcs12_format

CLIENT_LISTENERS = ("SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
USERS = ("admin", "alice")  # both exist for every mechanism; no authorizer, so both may do anything
CLIENT_CERT_CN = "mm2py-client"  # the principal User:CN=mm2py-client of a client that presents the keystore
# An authorizer that knows every user the harness connects as: PLAINTEXT (the harness's own admin calls, the
# inter-broker and KRaft traffic) is User:ANONYMOUS, so it must stay a super user; alice is not one.
ACL_BROKER_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:admin;User:ANONYMOUS;User:CN={CLIENT_CERT_CN}",
}
# A listener that offers no TLS 1.3: what a client pinned to TLSv1.3 must refuse.
TLS12_ONLY_LISTENER = {"listener.name.sasl_ssl.ssl.enabled.protocols": "TLSv1.2"}
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _sasl(listener: str) -> bool:
    return listener.startswith("SASL_")


def _tls(listener: str) -> bool:
    return listener in ("SSL", "SASL_SSL")


class Security:
    """Users and TLS material of one cluster; the JKS stores are made by keytool on first need."""

    def __init__(self, directory: Path, java: Path) -> None:
        self.directory = directory
        self.keytool = java.parent / "keytool"
        self.passwords = {user: secrets.token_urlsafe(12) for user in USERS}
        self._store_password = secrets.token_urlsafe(12)
        self._key_password = secrets.token_urlsafe(12)

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.keystore.jks"

    @property
    def truststore(self) -> Path:
        return self.directory / "client.truststore.jks"

    @property
    def ca_pem(self) -> Path:
        """The broker's self-signed certificate, the trust anchor for librdkafka (``ssl.ca.location``)."""
        return self.directory / "broker-cert.pem"

    @property
    def client_keystore(self) -> Path:
        """A JKS keystore with the client's own key (its key password differs from the store password)."""
        return self.directory / "client.keystore.jks"

    @property
    def broker_truststore(self) -> Path:
        return self.directory / "broker.truststore.jks"

    def mutual_tls_settings(self) -> dict[str, str]:
        """server.properties entries that make the SSL listener demand a client certificate (mTLS)."""
        self._make_stores()
        self._make_client_store()
        prefix = "listener.name.ssl."
        return {
            f"{prefix}ssl.client.auth": "required",
            f"{prefix}ssl.truststore.type": "JKS",
            f"{prefix}ssl.truststore.location": str(self.broker_truststore),
            f"{prefix}ssl.truststore.password": self._store_password,
        }

    def java_keystore_settings(self) -> dict[str, str]:
        """Java client settings that present the client keystore, as an MM2 user writes them."""
        return {
            "ssl.keystore.location": str(self.client_keystore),
            "ssl.keystore.password": self._store_password,
            "ssl.key.password": self._key_password,
        }

    def client_keystore_settings(self, store_type: str) -> dict[str, str]:
        """Java client settings that present the client's key from a ``JKS``, ``PKCS12`` or ``PEM`` keystore: the
        same key and certificate each time, converted from the JKS store on first need."""
        if store_type == "JKS":
            return {"ssl.keystore.type": "JKS", **self.java_keystore_settings()}
        pkcs12 = self.directory / "client.keystore.p12"
        if not pkcs12.is_file():
            self._keytool(
                *("-importkeystore", "-noprompt", "-srckeystore", str(self.client_keystore), "-srcstoretype", "JKS"),
                *("-srcstorepass", self._store_password, "-srckeypass", self._key_password, "-srcalias", "client"),
                *("-destkeystore", str(pkcs12), "-deststoretype", "PKCS12", "-deststorepass", self._store_password),
                *("-destkeypass", self._store_password),
            )
        if store_type == "PKCS12":
            return {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(pkcs12),
                "ssl.keystore.password": self._store_password,
            }
        pem = self.directory / "client.keystore.pem"
        if not pem.is_file():
            key, certificate, _ = pkcs12_format.load_key_and_certificates(
                pkcs12.read_bytes(), self._store_password.encode()
            )
            assert key is not None and certificate is not None
            sealed = key.private_bytes(
                Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(self._key_password.encode())
            )
            pem.write_bytes(sealed + certificate.public_bytes(Encoding.PEM))
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem), "ssl.key.password": self._key_password}

    def broker_settings(self, listeners: Iterable[str]) -> dict[str, str]:
        """server.properties entries for the SASL and TLS listeners among ``listeners``."""
        listeners = list(listeners)
        settings: dict[str, str] = {}
        sasl_listeners = [name for name in listeners if _sasl(name)]
        if sasl_listeners:
            settings["sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
            plain_users = " ".join(f'user_{user}="{password}"' for user, password in self.passwords.items())
            for name in sasl_listeners:
                prefix = f"listener.name.{name.lower()}"
                settings[f"{prefix}.plain.sasl.jaas.config"] = f"{_PLAIN_MODULE} required {plain_users};"
                for scram in SCRAM_MECHANISMS:
                    settings[f"{prefix}.{scram.lower()}.sasl.jaas.config"] = f"{_SCRAM_MODULE} required;"
        if any(_tls(name) for name in listeners):
            self._make_stores()
            settings.update(
                {
                    "ssl.keystore.type": "JKS",
                    "ssl.keystore.location": str(self.keystore),
                    "ssl.keystore.password": self._store_password,
                    "ssl.key.password": self._store_password,
                    "ssl.client.auth": "none",
                }
            )
        return settings

    def format_args(self, listeners: Iterable[str]) -> list[str]:
        """StorageTool ``format`` arguments that create the SCRAM users in the bootstrap metadata."""
        if not any(_sasl(name) for name in listeners):
            return []
        args: list[str] = []
        for user, password in self.passwords.items():
            for scram in SCRAM_MECHANISMS:
                args += ["--add-scram", f"{scram}=[name={user},password={password}]"]
        return args

    def client_settings(self, listener: str, user: str = "admin", mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """librdkafka settings to connect to ``listener`` as ``user``."""
        if listener == "PLAINTEXT":
            return {}
        settings = {"security.protocol": listener}
        if _sasl(listener):
            settings.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": self.passwords[user]})
        if _tls(listener):
            settings["ssl.ca.location"] = str(self.ca_pem)
        return settings

    def java_client_settings(
        self, listener: str, user: str = "admin", mechanism: str = "SCRAM-SHA-512"
    ) -> dict[str, str]:
        """The same connection for a Java client (e.g. MirrorMaker 2 in dedicated mode)."""
        if listener == "PLAINTEXT":
            return {}
        settings = {"security.protocol": listener}
        if _sasl(listener):
            module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
            settings.update(
                {
                    "sasl.mechanism": mechanism,
                    "sasl.jaas.config": f'{module} required username="{user}" password="{self.passwords[user]}";',
                }
            )
        if _tls(listener):
            settings.update(
                {
                    "ssl.truststore.type": "JKS",
                    "ssl.truststore.location": str(self.truststore),
                    "ssl.truststore.password": self._store_password,
                }
            )
        return settings

    def _make_stores(self) -> None:
        """Broker keystore (self-signed, SAN 127.0.0.1 and localhost), its PEM, and a Java truststore."""
        if self.keystore.is_file():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        password = self._store_password
        # An EC key: keytool makes it in a fraction of the time an RSA key takes.
        self._keytool(
            "-genkeypair",
            "-alias",
            "broker",
            "-keyalg",
            "EC",
            "-groupname",
            "secp256r1",
            "-validity",
            "7",
            "-dname",
            "CN=localhost",
            "-ext",
            "SAN=ip:127.0.0.1,dns:localhost",
            "-storetype",
            "JKS",
            "-keystore",
            str(self.keystore),
            "-storepass",
            password,
            "-keypass",
            password,
        )
        self._keytool(
            "-exportcert",
            "-rfc",
            "-alias",
            "broker",
            "-keystore",
            str(self.keystore),
            "-storepass",
            password,
            "-file",
            str(self.ca_pem),
        )
        self._keytool(
            "-importcert",
            "-noprompt",
            "-alias",
            "broker",
            "-file",
            str(self.ca_pem),
            "-storetype",
            "JKS",
            "-keystore",
            str(self.truststore),
            "-storepass",
            password,
        )

    def _make_client_store(self) -> None:
        """The client's keystore (self-signed, CN=mm2py-client) and a broker truststore that trusts it."""
        if self.client_keystore.is_file():
            return
        certificate = self.directory / "client-cert.pem"
        self._keytool(
            "-genkeypair",
            "-alias",
            "client",
            "-keyalg",
            "EC",
            "-groupname",
            "secp256r1",
            "-validity",
            "7",
            "-dname",
            f"CN={CLIENT_CERT_CN}",
            "-storetype",
            "JKS",
            "-keystore",
            str(self.client_keystore),
            "-storepass",
            self._store_password,
            "-keypass",
            self._key_password,
        )
        self._keytool(
            "-exportcert",
            "-rfc",
            "-alias",
            "client",
            "-keystore",
            str(self.client_keystore),
            "-storepass",
            self._store_password,
            "-file",
            str(certificate),
        )
        self._keytool(
            "-importcert",
            "-noprompt",
            "-alias",
            "client",
            "-file",
            str(certificate),
            "-storetype",
            "JKS",
            "-keystore",
            str(self.broker_truststore),
            "-storepass",
            self._store_password,
        )

    def _keytool(self, *args: str) -> None:
        fast_start = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")
        done = subprocess.run(
            [str(self.keytool), *fast_start, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            # The command line holds the store password; report only the action and keytool's output.
            output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise RuntimeError(f"keytool {args[0]} failed ({done.returncode}): {output}")

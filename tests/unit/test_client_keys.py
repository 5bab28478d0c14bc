"""The key tables are facts: they agree with each other, and the installed librdkafka accepts every key the
translation emits (real clients are constructed; nothing connects)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from mm2py.client_settings import ClientKind
from mm2py.librdkafka import key_tables
from tests.harness.translation_helpers import client_keys

PASSWORD = "S3cr3t-Pa55word"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


# --- the tables agree with each other -----------------------------------------------------------------------
def test_every_renamed_or_boolean_property_is_a_librdkafka_property() -> None:
    assert set(key_tables.RENAMES.values()) <= key_tables.RDKAFKA_PROPERTIES
    assert key_tables.RDKAFKA_BOOLEAN <= key_tables.RDKAFKA_PROPERTIES
    assert set(key_tables.ASSIGNORS.values()) == {"range", "roundrobin", "cooperative-sticky"}


def test_client_scopes_do_not_overlap() -> None:
    scopes = [key_tables.RDKAFKA_CONSUMER, key_tables.RDKAFKA_PRODUCER, key_tables.RDKAFKA_GLOBAL]
    assert all(not (a & b) for i, a in enumerate(scopes) for b in scopes[i + 1 :])


def test_tls_keys_count_only_under_tls_and_login_keys_only_under_sasl() -> None:
    # One rule for both readers: the typed ClientSettings (config) and the other keys' translation (librdkafka).
    for key in ("ssl.truststore.location", "ssl.ca.location", "enable.ssl.certificate.verification"):
        assert [key_tables.counts_under(key, p) for p in key_tables.PROTOCOLS] == [False, True, False, True]
    for key in ("sasl.jaas.config", "sasl.username", "enable.sasl.oauthbearer.unsecure.jwt"):
        assert [key_tables.counts_under(key, p) for p in key_tables.PROTOCOLS] == [False, False, True, True]
    assert all(key_tables.counts_under("client.id", p) for p in key_tables.PROTOCOLS)
    assert key_tables.PROTOCOLS == ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def test_a_dropped_java_key_is_never_also_passed_through_or_renamed() -> None:
    dropped = key_tables.NO_EQUIVALENT | set(key_tables.DROP_REASONS) | set(key_tables.BUILTIN_CLASSES)
    assert not dropped & set(key_tables.RENAMES)
    assert not key_tables.NO_EQUIVALENT & key_tables.RDKAFKA_PROPERTIES


# --- the installed librdkafka accepts what we emit ----------------------------------------------------------
REPRESENTATIVE = {
    "bootstrap.servers": "127.0.0.1:1",
    "client.id": "mm2-test",
    "security.protocol": "sasl_plaintext",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": f'{SCRAM} required username="mm2" password="{PASSWORD}";',
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "10",
    "batch.size": "262144",
    "compression.type": "zstd",
    "compression.zstd.level": "3",
    "max.request.size": "2097152",
    "buffer.memory": "67108864",
    "delivery.timeout.ms": "120000",
    "max.in.flight.requests.per.connection": "5",
    "retries": "2147483647",
    "retry.backoff.ms": "100",
    "request.timeout.ms": "30000",
    "send.buffer.bytes": "-1",
    "receive.buffer.bytes": "65536",
    "metadata.max.age.ms": "300000",
    "reconnect.backoff.ms": "50",
    "reconnect.backoff.max.ms": "1000",
    "connections.max.idle.ms": "540000",
    "client.dns.lookup": "use_all_dns_ips",
    "socket.connection.setup.timeout.ms": "10000",
    "group.id": "mm2-group",
    "group.instance.id": "mm2-0",
    "enable.auto.commit": "false",
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "fetch.min.bytes": "1",
    "fetch.max.bytes": "52428800",
    "fetch.max.wait.ms": "500",
    "max.partition.fetch.bytes": "1048576",
    "session.timeout.ms": "45000",
    "heartbeat.interval.ms": "3000",
    "max.poll.interval.ms": "300000",
    "check.crcs": "true",
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
    "client.rack": "rack-a",
    "allow.auto.create.topics": "false",
}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def construct(kind: ClientKind, out: Mapping[str, str]) -> list[str]:
    """Build a real client (no broker needed: nothing connects during construction) and return its warnings."""
    capture = _Capture()
    logger = logging.getLogger(f"mm2py.test.librdkafka.{kind}")
    logger.addHandler(capture)
    conf: dict[str, Any] = {**out, "logger": logger}
    try:
        if kind == "producer":
            confluent_kafka.Producer(conf).flush(0)
        elif kind == "consumer":
            confluent_kafka.Consumer(conf).close()
        else:
            AdminClient(conf)
    finally:
        logger.removeHandler(capture)
    return [m for m in capture.messages if "CONFWARN" in m]


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_librdkafka_accepts_every_key_translated_from_a_representative_config(kind: ClientKind) -> None:
    out, issues = client_keys(REPRESENTATIVE, kind)
    assert [i for i in issues if i.severity == "error"] == []
    assert construct(kind, out) == []


@pytest.mark.parametrize(
    "jaas",
    [
        f'{OAUTH} required clientId="mm2" clientSecret="{PASSWORD}" scope="kafka" extension_a=b;',
        f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",r,w";',
    ],
)
def test_librdkafka_accepts_translated_oauthbearer_settings(jaas: str) -> None:
    java = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas,
    }
    if "clientId" in jaas:
        java["sasl.oauthbearer.token.endpoint.url"] = "http://127.0.0.1:1/token"
    out, issues = client_keys(java, "producer")
    assert issues == []
    assert construct("producer", out) == []


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed key and certificate as PEM and as a PKCS12 keystore, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    directory = tmp_path_factory.mktemp("tls")
    run = [
        [
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=mm2py-test",
        ],
        [
            "pkcs12",
            "-export",
            "-in",
            "cert.pem",
            "-inkey",
            "key.pem",
            "-out",
            "client.p12",
            "-passout",
            f"pass:{PASSWORD}",
        ],
    ]
    for arguments in run:
        subprocess.run(["openssl", *arguments], cwd=directory, check=True, capture_output=True)
    return directory


def test_librdkafka_accepts_translated_tls_stores(tls_files: Path) -> None:
    java = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls_files / "client.p12"),
        "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls_files / "cert.pem"),
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    }
    out, issues = client_keys(java, "consumer")
    assert [i.severity for i in issues] == ["warning"]  # the TLS 1.3 suite
    assert construct("consumer", {**out, "group.id": "g"}) == []


def test_librdkafka_accepts_translated_inline_pem_stores(tls_files: Path) -> None:
    java = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": (tls_files / "key.pem").read_text(),
        "ssl.keystore.certificate.chain": (tls_files / "cert.pem").read_text(),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": (tls_files / "cert.pem").read_text(),
    }
    out, issues = client_keys(java, "admin")
    assert issues == []
    assert construct("admin", out) == []


def test_construct_really_reports_keys_a_client_ignores() -> None:
    warnings = construct("consumer", {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "acks": "all"})
    assert any("producer property" in warning for warning in warnings)

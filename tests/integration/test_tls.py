"""TLS end to end: the source cluster behind a TLS-terminating proxy (tansu has no working TLS listener).

The proxy forwards plaintext too, so the harness sets up and checks data on the same advertised address;
its counters prove that every connection mm2py made to the source was TLS, and that failures were refused
handshakes, not something else.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness.kafka_harness import (
    _TANSU_ENV,
    HOST,
    ClusterFactory,
    Record,
    TansuBroker,
    create_topic,
    free_port,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config
from tests.harness.tls_proxy import Certificates, ProxyStats, TlsProxy, make_certificates

KEYSTORE_PASSWORD = "Keyst0re-S3cret"
PARTITIONS = 3


@dataclass
class ProxiedTansuBroker(TansuBroker):
    """tansu on a private plaintext port (``listener_port``), advertising ``port``, where the proxy listens.

    ``bootstrap`` is the proxy's address, so everything that connects goes through the proxy. The readiness
    check of the harness then passes only once the proxy forwards to the broker. (Should another process take
    ``listener_port`` first, the harness's retry would move ``port`` away from the proxy and readiness would
    time out: loud, and unlikely with session-unique ports.)
    """

    listener_port: int = field(default_factory=free_port)

    def _spawn(self) -> None:
        cmd = [
            str(self.binary),
            "broker",
            "--listener-url",
            f"tcp://{HOST}:{self.listener_port}",
            "--advertised-listener-url",
            f"tcp://{HOST}:{self.port}",
            "--cluster-id",
            self.name,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env["NO_COLOR"] = "1"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"### {' '.join(cmd)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )


@dataclass(frozen=True)
class TlsSource:
    broker: ProxiedTansuBroker
    proxy: TlsProxy


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that signed nothing the proxy presents."""
    return make_certificates(tmp_path_factory.mktemp("other-pki"), ca_name="some other CA").ca


@pytest.fixture
def tls_source(kafka_cluster: ClusterFactory, certs: Certificates) -> Iterator[Callable[..., TlsSource]]:
    """Factory: ``tls_source(mtls=False)`` starts the proxy, then the ``dc1`` broker behind it."""
    proxies: list[TlsProxy] = []

    def start(mtls: bool = False) -> TlsSource:
        broker = ProxiedTansuBroker("dc1", kafka_cluster.binary, log_dir=kafka_cluster.log_dir)
        proxy = TlsProxy(
            broker.listener_port,
            broker.port,
            certs.server,
            certs.server_key,
            client_ca=certs.ca if mtls else None,
            plaintext_too=True,
        )
        proxy.start()
        proxies.append(proxy)
        kafka_cluster.brokers["dc1"] = broker  # stopped, and its log shown on failure, by kafka_cluster
        broker.start()
        return TlsSource(broker, proxy)

    try:
        yield start
    finally:
        for proxy in proxies:
            proxy.stop()


def fields(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, tuple(r.headers), r.timestamp, r.partition)


def tls_config(path: Path, brokers: dict[str, TansuBroker], ca: Path, keystore: Path | None = None) -> Path:
    body = (
        "dc1->target.enabled = true\ntopics = orders\n"
        "dc1.security.protocol = SSL\n"
        "dc1.ssl.truststore.type = PEM\n"
        f"dc1.ssl.truststore.location = {ca}\n"
    )
    if keystore is not None:
        body += (
            "dc1.ssl.keystore.type = PKCS12\n"
            f"dc1.ssl.keystore.location = {keystore}\n"
            f"dc1.ssl.keystore.password = {KEYSTORE_PASSWORD}\n"
        )
    return write_config(path, brokers, body)


def load_source(source: TlsSource, count: int = 200) -> list[Record]:
    create_topic(source.broker.bootstrap, "orders", PARTITIONS)
    records = make_records(count, partitions=PARTITIONS, seed=7, tombstone_every=11, null_key_every=9)
    produce(source.broker.bootstrap, "orders", records)
    return read_all(source.broker.bootstrap, "orders")


def planned_topics(stdout: str) -> set[tuple[str, str, int, str]]:
    plan = json.loads(stdout)
    return {(t["topic"], t["remote_topic"], t["partitions"], t["action"]) for f in plan["flows"] for t in f["topics"]}


def assert_only_tls(stats: ProxyStats) -> None:
    """mm2py reached the source, and never without TLS (the proxy would have forwarded plaintext too)."""
    assert stats.tls_sessions > 0 and stats.plaintext == 0 and stats.rejected == 0, stats


def assert_one_line_naming_dc1(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mm2py: error: ") and " on dc1 " in lines[0], lines[0]


@pytest.mark.integration
def test_plan_reaches_a_source_behind_tls_with_a_pem_truststore(
    kafka_cluster: ClusterFactory, tls_source: Callable[..., TlsSource], certs: Certificates, tmp_path: Path
) -> None:
    source = tls_source()
    brokers = {"dc1": source.broker, **kafka_cluster("target")}
    load_source(source)
    config = tls_config(tmp_path / "mm2.properties", brokers, certs.ca)
    before = source.proxy.stats()
    result = mm2py("plan", str(config), "--json")
    assert result.returncode == 0, result.stderr
    assert planned_topics(result.stdout) == {("orders", "dc1.orders", PARTITIONS, "create")}
    assert_only_tls(source.proxy.stats().since(before))


@pytest.mark.integration
@pytest.mark.spark
def test_run_once_copies_exactly_from_a_source_behind_tls(
    kafka_cluster: ClusterFactory, tls_source: Callable[..., TlsSource], certs: Certificates, tmp_path: Path
) -> None:
    source = tls_source()
    brokers = {"dc1": source.broker, **kafka_cluster("target")}
    expected = load_source(source)
    config = tls_config(tmp_path / "mm2.properties", brokers, certs.ca)
    before = source.proxy.stats()
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert_only_tls(source.proxy.stats().since(before))
    copied = read_all(brokers["target"].bootstrap, "dc1.orders")
    assert [fields(r) for r in copied] == [fields(r) for r in expected]


@pytest.mark.integration
@pytest.mark.spark
def test_run_once_presents_a_pkcs12_client_certificate_to_a_source_that_requires_one(
    kafka_cluster: ClusterFactory, tls_source: Callable[..., TlsSource], certs: Certificates, tmp_path: Path
) -> None:
    source = tls_source(mtls=True)
    brokers = {"dc1": source.broker, **kafka_cluster("target")}
    expected = load_source(source)
    keystore = certs.client_pkcs12(tmp_path / "client.p12", KEYSTORE_PASSWORD)
    config = tls_config(tmp_path / "mm2.properties", brokers, certs.ca, keystore)
    before = source.proxy.stats()
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert_only_tls(source.proxy.stats().since(before))
    copied = read_all(brokers["target"].bootstrap, "dc1.orders")
    assert [fields(r) for r in copied] == [fields(r) for r in expected]
    assert KEYSTORE_PASSWORD not in result.stdout + result.stderr


@pytest.mark.integration
def test_without_a_client_certificate_a_source_requiring_one_fails_with_exit_3_naming_it(
    kafka_cluster: ClusterFactory, tls_source: Callable[..., TlsSource], certs: Certificates, tmp_path: Path
) -> None:
    source = tls_source(mtls=True)
    brokers = {"dc1": source.broker, **kafka_cluster("target")}
    config = tls_config(tmp_path / "mm2.properties", brokers, certs.ca)
    before = source.proxy.stats()
    result = mm2py("plan", str(config), timeout=60)
    assert_one_line_naming_dc1(result)
    stats = source.proxy.stats().since(before)
    assert stats.rejected > 0 and stats.tls_sessions == 0 and stats.plaintext == 0, stats


@pytest.mark.integration
def test_a_source_certificate_from_an_unknown_ca_fails_with_exit_3_and_never_prints_the_password(
    kafka_cluster: ClusterFactory,
    tls_source: Callable[..., TlsSource],
    certs: Certificates,
    other_ca: Path,
    tmp_path: Path,
) -> None:
    source = tls_source(mtls=True)
    brokers = {"dc1": source.broker, **kafka_cluster("target")}
    keystore = certs.client_pkcs12(tmp_path / "client.p12", KEYSTORE_PASSWORD)
    config = tls_config(tmp_path / "mm2.properties", brokers, other_ca, keystore)
    before = source.proxy.stats()
    result = mm2py("plan", str(config), timeout=60)
    assert_one_line_naming_dc1(result)
    # librdkafka's own text ("certificate verify failed") or, checked again by Python's OpenSSL, the reason itself.
    reasons = (
        "certificate verify failed",
        "self-signed certificate in certificate chain",
        "unable to get local issuer",
    )
    assert "TLS handshake failed" in result.stderr and any(r in result.stderr for r in reasons), result.stderr
    assert KEYSTORE_PASSWORD not in result.stdout + result.stderr
    stats = source.proxy.stats().since(before)
    assert stats.rejected > 0 and stats.tls_sessions == 0, stats


def test_validate_names_a_jks_truststore_that_does_not_exist_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = dc1, target\n"
        "dc1.bootstrap.servers = 127.0.0.1:1\n"
        "target.bootstrap.servers = 127.0.0.1:2\n"
        "dc1->target.enabled = true\n"
        "dc1.security.protocol = SSL\n"
        "dc1.ssl.truststore.location = /etc/kafka/dc1-truststore.jks\n"
        f"dc1.ssl.truststore.password = {KEYSTORE_PASSWORD}\n"
    )
    result = mm2py("validate", str(config), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    problem = next(line for line in result.stdout.splitlines() if "dc1.ssl.truststore.location" in line)
    assert problem == (
        f"error: {config}:6 dc1.ssl.truststore.location = /etc/kafka/dc1-truststore.jks: "
        "no such file (a JKS truststore, Java's default type)"
    )
    assert len([line for line in result.stdout.splitlines() if line.startswith("error:")]) == 1
    assert KEYSTORE_PASSWORD not in result.stdout + result.stderr

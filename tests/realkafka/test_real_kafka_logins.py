"""Every common login, on both copy paths, against real Kafka: SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
TLS, hostname verification, and the refusals a user meets first (a wrong password, a certificate for another
host), each with the path that ran (or was to run) asserted.

The driver's admin clients connect before any copy task does, so a refusal by the whole cluster's settings
proves only the driver. A refusal *of a copy path* needs settings that only the copy task's client gets: MM2's
``src.consumer.*`` keys override the cluster's for the source consumer alone, which is the batch path's fetcher
or the record path's librdkafka consumer, as ``mm2py.copy.mode`` says.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.real_kafka import KafkaCluster
from tests.harness.secured_flows import COPY_PATHS, assert_no_secret, cluster_lines, copy_once, refused_run

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

REFUSED_WITHIN_S = 30


@pytest.mark.parametrize("copy_path", COPY_PATHS)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_each_sasl_mechanism_over_tls_copies_on_each_copy_path(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, mechanism: str, copy_path: str
) -> None:
    security = real_kafka.security
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=2)
    source = cluster_lines(
        "src", real_kafka.bootstrap_for("SASL_SSL"), security.java_client_settings("SASL_SSL", "alice", mechanism)
    )
    target = cluster_lines(
        "tgt",
        real_kafka.bootstrap_for("SASL_PLAINTEXT"),
        security.java_client_settings("SASL_PLAINTEXT", "admin", mechanism),
    )
    copy_once(tmp_path, real_kafka, topic, source, target, copy_path)


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_a_wrong_password_on_the_copy_client_is_refused_within_30_s_naming_authentication(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    security = real_kafka.security
    right = security.java_client_settings("SASL_SSL", "alice", "SCRAM-SHA-256")
    wrong_jaas = right["sasl.jaas.config"].replace(security.passwords["alice"], "not-alices-pw")
    source = cluster_lines("src", real_kafka.bootstrap_for("SASL_SSL"), right)
    source += f"src.consumer.sasl.jaas.config = {wrong_jaas}\n"
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=1)

    refusal = refused_run(
        tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), copy_path
    )

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "authentication failed" in line.lower(), line
    assert "Traceback" not in refusal.result.stderr
    assert_no_secret(refusal.result, real_kafka, "not-alices-pw")
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"


def another_name_for_this_host() -> str:
    """A name of the broker's address (127.0.0.1) that its certificate (SAN 127.0.0.1, localhost) does not list."""
    name = socket.gethostname()
    if name in ("localhost", "127.0.0.1") or socket.gethostbyname(name) != "127.0.0.1":
        pytest.skip(f"this host's name {name!r} is not another name of 127.0.0.1")
    return name


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_a_certificate_for_another_host_is_refused_within_30_s_naming_the_hostname(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    host = another_name_for_this_host()
    port = real_kafka.bootstrap_for("SSL").rsplit(":", 1)[1]
    java = real_kafka.security.java_client_settings("SSL")
    # The driver's clients skip the check, so the copy task's consumer is the first to meet the mismatch.
    source = cluster_lines("src", f"{host}:{port}", {**java, "ssl.endpoint.identification.algorithm": ""})
    source += "src.consumer.ssl.endpoint.identification.algorithm = https\n"
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=1)

    refusal = refused_run(
        tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), copy_path
    )

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "hostname" in line.lower() and host in line, line
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"
    assert_no_secret(refusal.result, real_kafka)


def test_a_certificate_for_another_host_stops_the_run_before_any_copy(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    host = another_name_for_this_host()
    port = real_kafka.bootstrap_for("SSL").rsplit(":", 1)[1]
    source = cluster_lines("src", f"{host}:{port}", real_kafka.security.java_client_settings("SSL"))
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=1)

    refusal = refused_run(tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), "batch")

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "hostname" in line.lower(), line
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"
    assert_no_secret(refusal.result, real_kafka)


@pytest.mark.parametrize("copy_path", COPY_PATHS)
@pytest.mark.parametrize("store_type", ["JKS", "PKCS12", "PEM"])
def test_mutual_tls_with_each_keystore_type_copies_on_each_copy_path(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, store_type: str, copy_path: str
) -> None:
    # The SSL listener of this cluster demands a client certificate; without one nothing would connect.
    cluster = real_kafka_acl
    security = cluster.security
    keystore = security.client_keystore_settings(store_type)
    source = cluster_lines("src", cluster.bootstrap_for("SSL"), {**security.java_client_settings("SSL"), **keystore})
    topic = cluster.create_topic(unique_topic("orders"), partitions=2)
    copy_once(tmp_path, cluster, topic, source, cluster_lines("tgt", cluster.bootstrap, {}), copy_path)

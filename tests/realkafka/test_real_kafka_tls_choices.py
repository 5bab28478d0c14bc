"""TLS choices MM2 users write, against real Kafka on both copy paths: Java cipher-suite names (mapped to OpenSSL's,
so they never move a flow to another path) and TLS version pins (``ssl.enabled.protocols``), honoured by the
batch path and checked by the driver against the brokers; the record path, whose librdkafka cannot pin a
version, refuses a pin (mm2py/librdkafka/tls_versions.py says why).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.secured_flows import (
    COPY_PATHS,
    assert_no_secret,
    cluster_lines,
    copy_once,
    refused_run,
    write_flow,
)

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

REFUSED_WITHIN_S = 30
# The broker's key is an EC key: these suites are the ones it can serve over TLS 1.2.
JAVA_SUITES = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256"


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_java_cipher_suite_names_copy_on_the_path_asked_for(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    java = {**real_kafka.security.java_client_settings("SSL"), "ssl.cipher.suites": JAVA_SUITES}
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=2)
    source = cluster_lines("src", real_kafka.bootstrap_for("SSL"), java)
    copy_once(tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), copy_path)


def test_java_cipher_suite_names_leave_an_automatic_flow_on_the_batch_path(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    java = {**real_kafka.security.java_client_settings("SSL"), "ssl.cipher.suites": JAVA_SUITES}
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=1)
    config = write_flow(
        tmp_path / "mm2.properties",
        topic,
        cluster_lines("src", real_kafka.bootstrap_for("SSL"), java),
        cluster_lines("tgt", real_kafka.bootstrap, {}),
    )
    result = mm2py("plan", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "path=batch" in result.stdout and "path=record" not in result.stdout, result.stdout


def test_an_unknown_cipher_suite_name_is_one_config_line_and_exit_2(real_kafka: KafkaCluster, tmp_path: Path) -> None:
    java = {**real_kafka.security.java_client_settings("SSL"), "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_ROT13_SHA"}
    config = write_flow(
        tmp_path / "mm2.properties",
        "orders",
        cluster_lines("src", real_kafka.bootstrap_for("SSL"), java),
        cluster_lines("tgt", real_kafka.bootstrap, {}),
    )
    result = mm2py("run", str(config), "--once", timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line and "ssl.cipher.suites" in line]
    assert len(errors) == 1 and "TLS_ECDHE_RSA_WITH_ROT13_SHA" in errors[0], result.stderr
    assert_no_secret(result, real_kafka)


def test_a_tls13_pin_copies_on_the_batch_path_from_a_broker_that_offers_tls13(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    java = {**real_kafka.security.java_client_settings("SSL"), "ssl.enabled.protocols": "TLSv1.3"}
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=2)
    source = cluster_lines("src", real_kafka.bootstrap_for("SSL"), java)
    copy_once(tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), "batch")


def test_a_tls13_pin_on_the_record_path_is_refused_naming_librdkafka(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    java = {**real_kafka.security.java_client_settings("SSL"), "ssl.enabled.protocols": "TLSv1.3"}
    source = cluster_lines("src", real_kafka.bootstrap_for("SSL"), java)
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=1)
    refusal = refused_run(tmp_path, real_kafka, topic, source, cluster_lines("tgt", real_kafka.bootstrap, {}), "record")
    assert refusal.result.returncode == 2, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "ssl.enabled.protocols" in line and "librdkafka" in line and "TLSv1.3" in line, line


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_a_tls13_pin_against_a_tls12_only_listener_is_refused_before_any_login(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    # The driver's admin client checks the brokers first, whichever path the flow would take.
    cluster = real_kafka_acl
    java = {
        **cluster.security.java_client_settings("SASL_SSL", "admin", "SCRAM-SHA-512"),
        "ssl.enabled.protocols": "TLSv1.3",
    }
    topic = cluster.create_topic(unique_topic("orders"), partitions=1)
    source = cluster_lines("src", cluster.bootstrap_for("SASL_SSL"), java)
    refusal = refused_run(tmp_path, cluster, topic, source, cluster_lines("tgt", cluster.bootstrap, {}), copy_path)

    assert refusal.result.returncode in (2, 3), refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "TLSv1.3" in line, line
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {line}"
    assert_no_secret(refusal.result, cluster)


def test_the_batch_paths_own_tls13_pin_refuses_a_tls12_only_listener_within_30_s(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    # Only the copy task's consumer is pinned, so the refusal is the batch path's own SSLContext's.
    cluster = real_kafka_acl
    java = cluster.security.java_client_settings("SASL_SSL", "admin", "SCRAM-SHA-512")
    source = cluster_lines("src", cluster.bootstrap_for("SASL_SSL"), java)
    source += "src.consumer.ssl.enabled.protocols = TLSv1.3\n"
    topic = cluster.create_topic(unique_topic("orders"), partitions=1)
    refusal = refused_run(tmp_path, cluster, topic, source, cluster_lines("tgt", cluster.bootstrap, {}), "batch")

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "TLS handshake failed" in line, line
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stdout[-3000:]}"
    assert_no_secret(refusal.result, cluster)

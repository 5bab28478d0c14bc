"""MM2 users' own security settings, unchanged, against real Kafka: SASL (SCRAM-SHA-512, PLAIN), TLS with JKS
truststores, mutual TLS with a JKS keystore, and topic ACL sync by MM2's rules with a real authorizer.

Each flow's two cluster aliases are two listeners of the same broker (DefaultReplicationPolicy, so the
remote topic ``src.<topic>`` differs from the source topic). The stores are keytool's own JKS files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.control.acls import sync_topic_acls
from mm2py.librdkafka.admin import ClusterAdmin
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.secured_flows import (
    COPY_PATHS,
    assert_no_secret,
    cluster_lines,
    copy_once,
    write_flow,
)

pytestmark = pytest.mark.realkafka


@pytest.mark.spark
@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_run_once_with_the_seeds_scram_sasl_ssl_and_jks_truststore_to_a_sasl_plain_target(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    security = real_kafka.security
    topic = real_kafka.create_topic(unique_topic("orders"), partitions=2)
    source = cluster_lines(
        "src", real_kafka.bootstrap_for("SASL_SSL"), security.java_client_settings("SASL_SSL", "alice", "SCRAM-SHA-512")
    )
    target = cluster_lines(
        "tgt",
        real_kafka.bootstrap_for("SASL_PLAINTEXT"),
        security.java_client_settings("SASL_PLAINTEXT", "admin", "PLAIN"),
    )
    assert "src.ssl.truststore.location" in source and source.count(".jks") == 1  # the users' JKS, unconverted
    assert "endpoint.identification" not in source  # hostname verification on (MM2's default) and matching
    copy_once(tmp_path, real_kafka, topic, source, target, copy_path)


def test_a_wrong_sasl_password_is_exit_3_with_one_authentication_line_and_no_secret(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    security = real_kafka.security
    wrong = security.java_client_settings("SASL_SSL", "alice", "SCRAM-SHA-512")
    wrong["sasl.jaas.config"] = wrong["sasl.jaas.config"].replace(security.passwords["alice"], "not-alices-pw")
    config = write_flow(
        tmp_path / "mm2.properties",
        unique_topic("orders"),
        cluster_lines("src", real_kafka.bootstrap_for("SASL_SSL"), wrong),
        cluster_lines("tgt", real_kafka.bootstrap, {}),
    )

    result = mm2py("run", str(config), "--once", timeout=120)

    assert result.returncode == 3, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("mm2py: error: ")]
    assert len(errors) == 1 and "src" in errors[0] and "authentication failed" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert "not-alices-pw" not in result.stdout + result.stderr
    assert_no_secret(result, real_kafka)


def test_a_wrong_truststore_password_is_a_config_error_naming_the_key(real_kafka: KafkaCluster, tmp_path: Path) -> None:
    java = real_kafka.security.java_client_settings("SSL")
    java["ssl.truststore.password"] = "not-the-store-pw"
    config = write_flow(
        tmp_path / "mm2.properties",
        "orders",
        cluster_lines("src", real_kafka.bootstrap_for("SSL"), java),
        cluster_lines("tgt", real_kafka.bootstrap, {}),
    )
    result = mm2py("validate", str(config), timeout=60)
    assert result.returncode == 2
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "src.ssl.truststore.password = [hidden]: " in errors[0], result.stdout
    assert "not-the-store-pw" not in result.stdout + result.stderr


# --- mutual TLS and ACL sync, on the node with an authorizer ------------------------------------------------


def mtls_flow(cluster: KafkaCluster, topic: str, tmp_path: Path) -> tuple[Path, str, str]:
    security = cluster.security
    source = cluster_lines(
        "src",
        cluster.bootstrap_for("SSL"),
        {**security.java_client_settings("SSL"), **security.java_keystore_settings()},
    )
    target = cluster_lines(
        "tgt", cluster.bootstrap_for("SASL_SSL"), security.java_client_settings("SASL_SSL", "admin", "SCRAM-SHA-512")
    )
    return write_flow(tmp_path / "mm2.properties", topic, source, target), source, target


def flow_of(config: Path) -> FlowConfig:
    return build_flow_config(MirrorMakerConfig.from_file(config, environ={}), Flow("src", "tgt"))


def topic_acls(cluster: KafkaCluster, topic: str) -> set[tuple[str, str, str, str, str]]:
    admin = AdminClient(cluster.client_config())
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
    ).result(timeout=30)
    return {
        (b.name, b.resource_pattern_type.name, b.principal, b.operation.name, b.permission_type.name) for b in found
    }


def binding(
    topic: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, pattern, principal, "*", operation, permission)


@pytest.mark.spark
def test_mutual_tls_with_a_jks_keystore_copies_and_syncs_topic_acls_by_mm2s_rules(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    cluster = real_kafka_acl
    topic = cluster.create_topic(unique_topic("orders"), partitions=2)
    other = cluster.create_topic(unique_topic("payments"), partitions=1)
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    admin = AdminClient(cluster.client_config())
    created = admin.create_acls(
        [
            binding(topic, "User:alice", AclOperation.READ, allow),
            binding(topic, "User:alice", AclOperation.WRITE, allow),  # dropped: nobody may write to a replica
            binding(topic, "User:bob", AclOperation.ALL, allow),  # becomes READ
            binding(topic, "User:carol", AclOperation.READ, deny),  # DENY: unchanged
            binding(topic, "User:carol", AclOperation.WRITE, deny),  # DENY WRITE: unchanged
            binding(topic[:10], "User:alice", AclOperation.READ, allow, ResourcePatternType.PREFIXED),  # never
            binding(other, "User:alice", AclOperation.READ, allow),  # not replicated by this flow
        ],
        request_timeout=30,
    )
    for future in created.values():
        future.result(timeout=30)
    # CreateAcls returns once the controller has them; the broker that answers DescribeAcls learns them a bit later.
    poll_until(lambda: len(topic_acls(cluster, topic)) == 5, 30, "the new ACLs in the broker's metadata")
    config, source, target = mtls_flow(cluster, topic, tmp_path)

    copy_once(tmp_path, cluster, topic, source, target, "batch")  # mTLS source, SCRAM target (both paths: logins)
    flow = flow_of(config)
    source_admin = ClusterAdmin("src", flow.source_admin.settings())
    target_admin = ClusterAdmin("tgt", flow.target_admin.settings())
    assert sync_topic_acls(flow, source_admin, target_admin) == 4

    remote = f"src.{topic}"
    expected = {
        (remote, "LITERAL", "User:alice", "READ", "ALLOW"),
        (remote, "LITERAL", "User:bob", "READ", "ALLOW"),
        (remote, "LITERAL", "User:carol", "READ", "DENY"),
        (remote, "LITERAL", "User:carol", "WRITE", "DENY"),
    }
    assert topic_acls(cluster, remote) == expected
    assert topic_acls(cluster, f"src.{other}") == set()
    assert sync_topic_acls(flow, source_admin, target_admin) == 4  # again: Kafka keeps one of each
    assert topic_acls(cluster, remote) == expected
    assert_alice_reads_but_cannot_write(cluster, remote)


def assert_alice_reads_but_cannot_write(cluster: KafkaCluster, remote: str) -> None:
    """The synced ACLs take effect: alice (no super user) reads the replica and is refused writing to it."""
    config = cluster.client_config("SASL_SSL", user="alice", mechanism="SCRAM-SHA-512")
    consumer = Consumer({**config, "group.id": "unused-no-commits", "enable.auto.commit": False})
    consumer.assign([TopicPartition(remote, 0, 0)])
    try:
        got = poll_until(
            lambda: [m for m in consumer.consume(10, timeout=0.5) if m.error() is None], 30, f"alice reading {remote}"
        )
    finally:
        consumer.close()
    assert got[0].topic() == remote
    failures: list[KafkaError] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(remote, b"forged", partition=0, on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(30)
    assert failures and failures[0] is not None and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_source_without_authorizer_never_leads_to_create_acls(real_kafka: KafkaCluster, tmp_path: Path) -> None:
    # Kafka answers DescribeAcls with SECURITY_DISABLED here, but librdkafka reports it as "no ACLs"; either way
    # nothing may be sent to CreateAcls.
    source = cluster_lines(
        "src",
        real_kafka.bootstrap_for("SASL_PLAINTEXT"),
        real_kafka.security.java_client_settings("SASL_PLAINTEXT", "admin", "PLAIN"),
    )
    config = write_flow(tmp_path / "mm2.properties", ".*", source, cluster_lines("tgt", real_kafka.bootstrap, {}))
    flow = flow_of(config)

    class NeverCalled(ClusterAdmin):
        def create_topic_acls(self, acls: object) -> dict[object, str | None]:  # type: ignore[override]
            raise AssertionError("CreateAcls must not be sent when the source has no authorizer")

    assert sync_topic_acls(flow, ClusterAdmin("src", flow.source_admin.settings()), NeverCalled("tgt", {})) == 0


def test_a_target_without_authorizer_is_one_warning_and_no_failure(
    real_kafka_acl: KafkaCluster,
    real_kafka: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = real_kafka_acl.create_topic(unique_topic("orders"), partitions=1)
    admin = AdminClient(real_kafka_acl.client_config())  # kept referenced until the futures are done
    created = admin.create_acls(
        [binding(topic, "User:alice", AclOperation.READ, AclPermissionType.ALLOW)], request_timeout=30
    )
    for future in created.values():
        future.result(timeout=30)
    poll_until(lambda: topic_acls(real_kafka_acl, topic), 30, "the new ACL in the broker's metadata")
    config = write_flow(
        tmp_path / "mm2.properties",
        topic,
        cluster_lines("src", real_kafka_acl.bootstrap, {}),
        cluster_lines("tgt", real_kafka.bootstrap, {}),
    )
    flow = flow_of(config)

    with caplog.at_level("WARNING", logger="mm2py.control.acls"):
        assert (
            sync_topic_acls(
                flow,
                ClusterAdmin("src", flow.source_admin.settings()),
                ClusterAdmin("tgt", flow.target_admin.settings()),
            )
            == 0
        )
    assert "target has no authorizer" in caplog.text

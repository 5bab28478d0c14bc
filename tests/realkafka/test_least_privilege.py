"""mm2py as a principal that holds only what MirrorMaker 2 needs, on real Kafka with StandardAuthorizer.

The grants are Strimzi's for a MirrorMaker 2 user ("Securing a Kafka MirrorMaker 2 deployment", its
``mirror-maker-2.yaml`` example), re-aimed at each test's cluster aliases: mm2py must copy every record and sync
the group's offsets with them, as MM2 does beside it, and say in one line per flow what it skipped and which ACL
would enable it. One side of each flow is the authorizer cluster as a user of the test's own
(tests/harness/acl_principals.py), the other a cluster without an authorizer, so the source's and the target's
grants are proven apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation as Op

from tests.harness import acl_principals as acl
from tests.harness.kafka_harness import commit_group, committed_group, make_records, produce, read_all
from tests.harness.mirror_maker import MirrorMaker
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import REAL_SMALL_CLUSTER, unique_alias

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

RECORDS = 600
PARTITIONS = 2


def strimzi_source_grants(target: str) -> list[acl.Grant]:
    """Strimzi's source-cluster ACLs for a MirrorMaker 2 user."""
    return [
        *acl.topic(f"mm2-offset-syncs.{target}.internal", Op.CREATE, Op.DESCRIBE_CONFIGS, Op.READ, Op.WRITE),
        *acl.topic("*", Op.READ, Op.DESCRIBE_CONFIGS),
        *acl.cluster(Op.DESCRIBE),
        *acl.group("*", Op.DESCRIBE),
    ]


def strimzi_target_grants(source: str) -> list[acl.Grant]:
    """Strimzi's target-cluster ACLs for a MirrorMaker 2 user (without those of Connect's own topics and group,
    which mm2py has no use for)."""
    return [
        *acl.group("*", Op.READ, Op.DESCRIBE),
        *acl.topic("*", Op.CREATE, Op.ALTER, Op.ALTER_CONFIGS, Op.WRITE, Op.READ),
        *acl.cluster(Op.DESCRIBE),
        *acl.topic(f"{source}.checkpoints.internal", Op.CREATE, Op.DESCRIBE, Op.WRITE),
    ]


def config_text(src: str, src_settings: dict[str, str], tgt: str, tgt_settings: dict[str, str], body: str) -> str:
    lines = [f"clusters = {src}, {tgt}", f"{src}->{tgt}.enabled = true"]
    lines += [f"{src}.{k} = {v}" for k, v in src_settings.items()]
    lines += [f"{tgt}.{k} = {v}" for k, v in tgt_settings.items()]
    # Strimzi's example connector settings: group offsets synced, topic ACLs not.
    lines += ["sync.group.offsets.enabled = true", "sync.topic.acls.enabled = false"]
    return "\n".join(lines) + "\n" + REAL_SMALL_CLUSTER + body


def topic_with_group(kafka: KafkaCluster, name: str, group: str) -> dict[int, int]:
    """``name`` with RECORDS records and ``group`` committed half-way through each partition (as a super user)."""
    kafka.create_topic(name, partitions=PARTITIONS)
    produce(kafka.bootstrap, name, make_records(RECORDS, partitions=PARTITIONS, seed=11))
    halfway = {p: RECORDS // PARTITIONS // 2 for p in range(PARTITIONS)}
    commit_group(kafka.bootstrap, group, name, halfway)
    return halfway


def skipped_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if " skipped: " in line]


def test_strimzis_source_acls_copy_every_record_and_sync_the_group_as_mm2_does_beside_it(
    real_kafka_acl: KafkaCluster,
    real_kafka: KafkaCluster,
    kafka_runtime: KafkaRuntime,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    src, tgt = unique_alias("src"), unique_alias("tgt")
    ours, theirs, group = unique_topic("orders"), unique_topic("payments"), unique_topic("billing")
    halfway = topic_with_group(real_kafka_acl, ours, group)
    topic_with_group(real_kafka_acl, theirs, group)
    with acl.principal_with(real_kafka_acl, strimzi_source_grants(tgt)) as mm2:
        settings = {"bootstrap.servers": real_kafka_acl.bootstrap_for("SASL_SSL"), **mm2.java_settings()}
        target = {"bootstrap.servers": real_kafka.bootstrap}
        config = tmp_path / "mm2py.properties"
        config.write_text(config_text(src, settings, tgt, target, f"topics = {ours}\ngroups = {group}\n"))

        started = time.monotonic()
        result = mm2py("run", str(config), "--once")
        took = time.monotonic() - started

        assert result.returncode == 0, result.stderr[-4000:]
        copied = read_all(real_kafka.bootstrap, f"{src}.{ours}")
        assert len(copied) == RECORDS
        synced = committed_group(real_kafka.bootstrap, group, f"{src}.{ours}", PARTITIONS)
        assert all(0 < synced[p] <= halfway[p] for p in range(PARTITIONS)), synced
        lines = skipped_lines(result.stderr)
        dense = [line for line in lines if "dense offset syncs skipped" in line]
        assert len(dense) == 1, result.stderr[-4000:]
        assert f"refused {mm2.name}" in dense[0], dense[0]
        assert f"grant Create, Write and Read on topic mm2py-offset-syncs.{tgt}.internal (cluster {src})" in dense[0]
        assert "mm2py.offset-syncs.dense.enabled = false" in dense[0]
        assert all("grant " in line and " = false" in line for line in lines), lines
        assert "retry" not in result.stderr and mm2.password not in result.stdout + result.stderr
        print(f"mm2py --once as {mm2.name} with Strimzi's source ACLs: {took:.1f} s; skipped: {lines}")

        # MirrorMaker 2 with the same user and grants, on a topic of its own.
        mm2_config = tmp_path / "mm2.properties"
        mm2_config.write_text(
            config_text(src, settings, tgt, target, f"topics = {theirs}\ngroups = {group}\n")
            + "emit.checkpoints.interval.seconds = 1\nsync.group.offsets.interval.seconds = 1\n"
            + "config.storage.replication.factor = 1\nstatus.storage.replication.factor = 1\n"
        )
        with MirrorMaker(kafka_runtime, mm2_config, tmp_path / "mm2") as mirror_maker:
            ends = {(theirs, p): RECORDS // PARTITIONS for p in range(PARTITIONS)}
            mirror_maker.await_progress(real_kafka.bootstrap, src, ends)
            theirs_synced = poll_until(
                lambda: (lambda got: got if all(got.values()) else None)(
                    committed_group(real_kafka.bootstrap, group, f"{src}.{theirs}", PARTITIONS)
                ),
                120,
                "MM2's group offset sync",
            )
        assert len(read_all(real_kafka.bootstrap, f"{src}.{theirs}")) == RECORDS
        print(f"MM2 with the same grants: group offsets on the target {theirs_synced}, mm2py's {synced}")


def test_strimzis_target_acls_copy_every_record_and_sync_the_group_with_nothing_skipped(
    real_kafka_acl: KafkaCluster, real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    src, tgt = unique_alias("src"), unique_alias("tgt")
    ours, group = unique_topic("orders"), unique_topic("billing")
    halfway = topic_with_group(real_kafka, ours, group)
    with acl.principal_with(real_kafka_acl, strimzi_target_grants(src)) as mm2:
        settings = {"bootstrap.servers": real_kafka_acl.bootstrap_for("SASL_SSL"), **mm2.java_settings()}
        config = tmp_path / "mm2py.properties"
        config.write_text(
            config_text(src, {"bootstrap.servers": real_kafka.bootstrap}, tgt, settings, f"topics = {ours}\n")
            + f"groups = {group}\n"
        )

        result = mm2py("run", str(config), "--once")

        assert result.returncode == 0, result.stderr[-4000:]
        assert len(read_all(real_kafka_acl.bootstrap, f"{src}.{ours}")) == RECORDS
        synced = committed_group(real_kafka_acl.bootstrap, group, f"{src}.{ours}", PARTITIONS)
        assert synced == halfway  # the dense syncs on the (unsecured) source translate exactly
        assert skipped_lines(result.stderr) == []


def test_a_principal_that_may_not_write_the_remote_topic_stops_within_30_s_naming_it(
    real_kafka_acl: KafkaCluster, real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Writing the remote topic is what the copy is: no degrading, no retrying; principal, operation, topic."""
    src, tgt = unique_alias("src"), unique_alias("tgt")
    ours = unique_alias("orders")  # short: the one error line names it whole
    topic_with_group(real_kafka, ours, unique_topic("unused"))
    remote = real_kafka_acl.create_topic(f"{src}.{ours}", partitions=PARTITIONS)
    grants = [
        *acl.topic(remote, Op.READ, Op.DESCRIBE),  # no Write
        *acl.topic(f"mm2-offsets.{src}.internal", Op.CREATE, Op.READ, Op.WRITE),
        *acl.topic(f"{src}.heartbeats", Op.CREATE, Op.WRITE),  # MM2 replicates the source's heartbeats too
    ]
    with acl.principal_with(real_kafka_acl, grants) as mm2:
        settings = {"bootstrap.servers": real_kafka_acl.bootstrap_for("SASL_SSL"), **mm2.java_settings()}
        config = tmp_path / "mm2py.properties"
        config.write_text(
            config_text(src, {"bootstrap.servers": real_kafka.bootstrap}, tgt, settings, f"topics = {ours}\n")
        )

        started = time.monotonic()
        result = mm2py("run", str(config), "--once")
        took = time.monotonic() - started

        assert result.returncode == 3, result.stderr[-4000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("mm2py: error: ")]
        assert len(errors) == 1, result.stderr[-4000:]
        print(errors[0])
        assert mm2.name in errors[0] and remote in errors[0] and "TOPIC_AUTHORIZATION_FAILED" in errors[0], errors
        assert took < 30, f"{took:.1f} s"
        assert read_all(real_kafka_acl.bootstrap, remote) == []

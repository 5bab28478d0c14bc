"""mm2py as a principal that holds only what MirrorMaker 2 needs, on real Kafka with StandardAuthorizer.

The grants are Strimzi's for a MirrorMaker 2 user ("Securing a Kafka MirrorMaker 2 deployment", its
``mirror-maker-2.yaml`` example), re-aimed at each test's cluster aliases: mm2py must copy every record and sync
the group's offsets with them, as MM2 does beside it, and say in one line per flow what it skipped and which ACL
would enable it. One side of each flow is the authorizer cluster as a user of the test's own
(tests/harness/acl_principals.py), the other a cluster without an authorizer, so the source's and the target's
grants are proven apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import AclOperation as Op

from tests.harness import acl_principals as acl
from tests.harness.kafka_harness import commit_group, committed_group, make_records, produce, read_all
from tests.harness.mirror_maker import MirrorMaker, prompt_herder, properties_text
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


def one_cluster_config(
    path: Path, kafka: KafkaCluster, source: tuple[str, acl.Principal], target: tuple[str, acl.Principal], body: str
) -> Path:
    """Both aliases on the authorizer cluster's SASL_SSL listener, each as its own principal."""
    bootstrap = kafka.bootstrap_for("SASL_SSL")
    (src, reader), (tgt, writer) = source, target
    path.write_text(
        config_text(
            src,
            {"bootstrap.servers": bootstrap, **reader.java_settings()},
            tgt,
            {"bootstrap.servers": bootstrap, **writer.java_settings()},
            body,
        )
    )
    return path


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
        retried = [line for line in result.stderr.splitlines() if "will retry" in line and "uthorization" in line]
        assert retried == [] and mm2.password not in result.stdout + result.stderr
        print(f"mm2py --once as {mm2.name} with Strimzi's source ACLs: {took:.1f} s; skipped: {lines}")

        # MirrorMaker 2 with the same user and grants, on a topic of its own.
        mm2_config = tmp_path / "mm2.properties"
        mm2_config.write_text(
            config_text(src, settings, tgt, target, f"topics = {theirs}\ngroups = {group}\n")
            + "emit.checkpoints.interval.seconds = 1\nsync.group.offsets.interval.seconds = 1\n"
            + "config.storage.replication.factor = 1\nstatus.storage.replication.factor = 1\n"
            + properties_text(prompt_herder(tgt))
        )
        # --clusters tgt: only the herders that write into tgt, as a Connect cluster beside the target runs them
        # (a dedicated MM2's reverse herder would need Connect's topics on the source, which Strimzi's grants lack).
        with MirrorMaker(kafka_runtime, mm2_config, tmp_path / "mm2", clusters=[tgt]) as mirror_maker:
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
    ]
    with acl.principal_with(real_kafka_acl, grants) as mm2:
        settings = {"bootstrap.servers": real_kafka_acl.bootstrap_for("SASL_SSL"), **mm2.java_settings()}
        config = tmp_path / "mm2py.properties"
        config.write_text(
            config_text(src, {"bootstrap.servers": real_kafka.bootstrap}, tgt, settings, f"topics = {ours}\n")
            # The shared source holds other tests' heartbeats topics, which MM2's rules would replicate too.
            + "heartbeats.replication.enabled = false\n"
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


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def plan_rights(config: Path) -> dict[str, bool | None]:
    """What ``mm2py plan --json`` says the flow's principals may run (KIP-430's answers)."""
    planned = mm2py("plan", str(config), "--json")
    assert planned.returncode == 0, planned.stderr[-2000:]
    (rights,) = json.loads(planned.stdout)["rights"].values()
    return {right["feature"]: right["allowed"] for right in rights}


def topic_config(kafka: KafkaCluster, topic: str, name: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient(kafka.client_config())  # referenced until the future is done
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return entries[name].value if name in entries else None


def test_copy_only_grants_copy_every_record_and_each_feature_set_then_enables_its_feature(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two principals on the authorizer cluster, one per alias: first with the copy's grants alone (no cluster
    rights, no DescribeConfigs, AlterConfigs or DescribeAcls), then with each documented feature set added."""
    kafka = real_kafka_acl
    src, tgt = unique_alias("src"), unique_alias("tgt")
    ours, group = unique_alias("orders"), unique_topic("billing")
    halfway = topic_with_group(kafka, ours, group)
    admin = AdminClient(kafka.client_config())
    admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, ours, incremental_configs=[_set("retention.ms", "7200000")])]
    )[ConfigResource(ConfigResource.Type.TOPIC, ours)].result(timeout=30)
    remote = kafka.create_topic(f"{src}.{ours}", partitions=PARTITIONS)
    kafka.create_topic(f"mm2-offsets.{src}.internal", partitions=1)
    source_copy = acl.topic(ours, Op.READ)
    target_copy = [*acl.topic(remote, Op.WRITE), *acl.topic(f"mm2-offsets.{src}.internal", Op.READ, Op.WRITE)]
    with (
        acl.principal_with(kafka, source_copy) as reader,
        acl.principal_with(kafka, target_copy) as writer,
    ):
        body = f"topics = {ours}\ngroups = {group}\nsync.topic.acls.enabled = true\n"
        config = one_cluster_config(tmp_path / "mm2py.properties", kafka, (src, reader), (tgt, writer), body)

        result = mm2py("run", str(config), "--once")

        assert result.returncode == 0, result.stderr[-4000:]
        assert len(read_all(kafka.bootstrap, remote)) == RECORDS
        skipped = {line.split(" skipped: ")[0].split(": ", 1)[-1] for line in skipped_lines(result.stderr)}
        assert {"offset syncs", "checkpoints", "lease", "topic config sync", "topic ACL sync"} <= skipped, result.stderr
        assert all("grant " in line for line in skipped_lines(result.stderr))
        lag = mm2py("lag", str(config), "--json")
        assert lag.returncode == 0, lag.stderr[-2000:]
        assert [row["lag_records"] for row in json.loads(lag.stdout)] == [0] * PARTITIONS, lag.stdout
        assert topic_config(kafka, remote, "retention.ms") != "7200000"
        assert plan_rights(config) == {
            "copy": True,
            "topic config sync": False,
            "topic ACL sync": False,
            "offset syncs": None,  # its topic does not exist yet: only creating it tells
            "dense offset syncs": None,
            "checkpoints": None,
            "heartbeats": None,
        }
        translate = ("translate-offsets", str(config), "--group", group, "--source", src, "--target", tgt, "--json")
        refused = mm2py(*translate)  # reading the group's offsets needs Describe on it: named, not guessed
        error = [line for line in refused.stderr.splitlines() if line.startswith("mm2py: error: ")]
        assert refused.returncode == 3 and len(error) == 1, refused.stderr[-2000:]
        assert group in error[0] and "Group authorization failed" in error[0] and reader.name in error[0], error

        # + config sync: DescribeConfigs on the source topic, AlterConfigs on the remote topic.
        acl.grant(reader, acl.topic(ours, Op.DESCRIBE_CONFIGS))
        acl.grant(writer, acl.topic(remote, Op.ALTER_CONFIGS))
        assert plan_rights(config)["topic config sync"] is True
        result = mm2py("run", str(config), "--once")
        assert result.returncode == 0 and "topic config sync skipped" not in result.stderr, result.stderr[-4000:]
        assert topic_config(kafka, remote, "retention.ms") == "7200000"

        # + ACL sync: Describe on the source cluster, Alter on the target cluster.
        binding = AclBinding(
            ResourceType.TOPIC, ours, ResourcePatternType.LITERAL, "User:carol", "*", Op.READ, AclPermissionType.ALLOW
        )
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)
        acl.grant(reader, acl.cluster(Op.DESCRIBE))
        acl.grant(writer, acl.cluster(Op.ALTER))
        try:
            assert plan_rights(config)["topic ACL sync"] is True
            result = mm2py("run", str(config), "--once")
            assert result.returncode == 0 and "topic ACL sync skipped" not in result.stderr, result.stderr[-4000:]
            assert ("User:carol", "READ") in acl.topic_bindings(kafka, remote)
        finally:
            acl.revoke(kafka, "User:carol")

        # + offset syncs, checkpoints and group offset sync.
        acl.grant(
            reader,
            [
                *acl.topic(f"mm2-offset-syncs.{tgt}.internal", Op.CREATE, Op.WRITE, Op.READ),
                *acl.group("*", Op.DESCRIBE),
            ],
        )
        acl.grant(
            writer,
            [
                *acl.topic(f"{src}.checkpoints.internal", Op.CREATE, Op.WRITE, Op.READ),
                *acl.topic(remote, Op.READ),  # OffsetCommit asks Read on the topic too
                *acl.group("*", Op.READ, Op.DESCRIBE),
            ],
        )
        produce(kafka.bootstrap, ours, make_records(RECORDS, partitions=PARTITIONS, seed=12))  # syncs need new records
        commit_group(kafka.bootstrap, group, ours, {p: RECORDS // PARTITIONS + 10 for p in range(PARTITIONS)})
        result = mm2py("run", str(config), "--once")
        assert result.returncode == 0, result.stderr[-4000:]
        for feature in ("offset syncs", "checkpoints", "group offset sync"):
            assert f": {feature} skipped" not in result.stderr, result.stderr[-4000:]
        synced = committed_group(kafka.bootstrap, group, remote, PARTITIONS)
        assert all(halfway[p] < synced[p] <= RECORDS // PARTITIONS + 10 for p in range(PARTITIONS)), synced
        translated = mm2py(*translate)
        assert translated.returncode == 0, translated.stderr[-2000:]
        assert {row["topic"] for row in json.loads(translated.stdout)} == {remote}


def test_the_cut_over_commands_run_with_the_grants_docs_security_lists_for_them(
    real_kafka_acl: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``cutover`` (with ``--deny-writes``) and ``failback`` as two principals holding the copy's grants, the
    lease's, the dense offset syncs' and what docs/security.md's table of the cut-over commands adds: each
    command exits 0, and the groups land where they should."""
    kafka = real_kafka_acl
    src, tgt = unique_alias("src"), unique_alias("tgt")
    ours, group = unique_alias("orders"), unique_topic("billing")
    topic_with_group(kafka, ours, group)
    remote = kafka.create_topic(f"{src}.{ours}", partitions=PARTITIONS)
    kafka.create_topic(f"mm2-offsets.{src}.internal", partitions=1)
    kafka.create_topic(f"mm2-offsets.{tgt}.internal", partitions=1)
    lease = "mm2py-leases.internal"
    source_grants = [
        *acl.topic(ours, Op.READ),  # copy (Read implies Describe)
        # Offset syncs, MM2's and mm2py's dense ones: the translation's input (no syncs, no position on B).
        *acl.topic(f"mm2-offset-syncs.{tgt}.internal", Op.CREATE, Op.WRITE, Op.READ),
        *acl.topic(f"mm2py-offset-syncs.{tgt}.internal", Op.CREATE, Op.WRITE, Op.READ),
        *acl.group(group, Op.DESCRIBE),  # cutover: the moving group's members and offsets
        *acl.cluster(Op.DESCRIBE, Op.ALTER),  # cutover: list groups; --deny-writes: Describe/Create/DeleteAcls
        *acl.topic(f"mm2-offsets.{tgt}.internal", Op.READ, Op.WRITE),  # failback: B->A's start
        *acl.group(f"mm2py-lease.{tgt}->{src}", Op.DESCRIBE),  # failback: a run of B->A holding its lease on A
    ]
    target_grants = [
        *acl.topic(remote, Op.WRITE, Op.READ),  # copy; the commit asks Read on the topic
        *acl.topic(f"mm2-offsets.{src}.internal", Op.READ, Op.WRITE),  # copy: progress
        *acl.topic(lease, Op.CREATE, Op.READ, Op.WRITE),  # lease, hand-over request, mark
        *acl.group(f"mm2py-lease.{src}->{tgt}", Op.READ, Op.DESCRIBE),  # lease; cutover: its members
        *acl.group(group, Op.READ, Op.DESCRIBE),  # cutover: members and the commit
        *acl.topic(f"{remote}.failback-tail", Op.CREATE, Op.WRITE),  # failback: the side topic
    ]
    with (
        acl.principal_with(kafka, source_grants) as reader,
        acl.principal_with(kafka, target_grants) as writer,
    ):
        body = f"topics = {ours}\ngroups = {group}\n{tgt}->{src}.enabled = true\n{tgt}->{src}.topics = none\n"
        config = one_cluster_config(tmp_path / "mm2py.properties", kafka, (src, reader), (tgt, writer), body)
        cut = mm2py(
            "cutover", str(config), "--flow", f"{src}->{tgt}", "--quiet-seconds", "1", "--deny-writes", "--json"
        )
        assert cut.returncode == 0, cut.stderr[-4000:]
        moves = json.loads(cut.stdout)["groups"]
        assert {(m["partition"], m["method"], m["read_again"], m["skipped"]) for m in moves} == {
            (p, "exact", 0, 0) for p in range(PARTITIONS)
        }
        assert committed_group(kafka.bootstrap, group, remote, PARTITIONS) == {
            p: m["target_offset"] for p, m in ((m["partition"], m) for m in moves)
        }
        assert ("User:*", "WRITE") in acl.topic_bindings(kafka, ours)
        back = mm2py("failback", str(config), "--flow", f"{src}->{tgt}", "--json")
        assert back.returncode == 0, back.stderr[-4000:]
        assert json.loads(back.stdout)["write_denials_deleted"] == 1

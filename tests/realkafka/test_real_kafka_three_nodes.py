"""A three-node real Kafka source (RF 3): a leader killed mid-copy, partitions added while a run copies, and
topic configs against a real broker's defaults - none of which tansu (one node, no CreatePartitions, no config
sources) can show. The target is the session's one-node cluster.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from confluent_kafka.cimpl import NewPartitions

from tests.harness.faults import LandingWatch, MirrorRun
from tests.harness.kafka_harness import HOST, Record, client_config, free_port, make_records, produce, read_all
from tests.harness.metadata_probe import brokers_listed_by
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import REAL_SMALL_CLUSTER, one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

# The syncs topics live on the three-node source: RF 3 there, so a killed node does not stop sync writes.
THREE_NODE_SOURCE = REAL_SMALL_CLUSTER.replace(
    "offset-syncs.topic.replication.factor = 1", "offset-syncs.topic.replication.factor = 3"
)


def _config(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, topic: str, extra: str = ""
) -> tuple[Path, str]:
    config, src, _tgt = one_flow_config(
        tmp_path / "mm2.properties",
        source.bootstrap,
        target.bootstrap,
        topic,
        extra,
        cluster_settings=THREE_NODE_SOURCE,
    )
    return config, f"{src}.{topic}"


def _count(bootstrap: str, topic: str) -> int:
    try:
        return len(read_all(bootstrap, topic, timeout=10))
    except (LookupError, TimeoutError):
        return 0


def _values(records: list[Record]) -> Counter[bytes | None]:
    return Counter(r.value for r in records)


def test_a_source_leader_killed_mid_copy_loses_nothing_and_the_run_carries_on(
    real_kafka_cluster: KafkaCluster,
    real_kafka: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    cluster = real_kafka_cluster
    topic = cluster.create_topic(
        unique_topic("leader-kill"), partitions=2, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    records = make_records(40_000, partitions=2, seed=31, value_size=64, with_headers=False)
    produce(cluster.bootstrap, topic, records)
    config, remote = _config(
        tmp_path, cluster, real_kafka, topic, "mm2py.range.max.records = 4000\nconsumer.poll.timeout.ms = 200\n"
    )
    victim = -1
    started = time.monotonic()
    try:
        with MirrorRun(config, tmp_path / "run.log") as run, LandingWatch(real_kafka.bootstrap, remote, 2) as watch:
            watch.wait_landing(run, above=4000, timeout=180)
            victim, _ = cluster.partition_state(topic, 0)
            cluster.kill_node(victim)  # the leader of partition 0, while its records are being copied
            killed = time.monotonic()
            record_property("copied_at_kill", watch.sample())
            run.wait_for(
                lambda: _count(real_kafka.bootstrap, remote) >= len(records),
                240,
                f"all {len(records)} records on the target after node {victim} was killed",
            )
            record_property("seconds_kill_to_complete", round(time.monotonic() - killed, 1))
            assert run.stop() == 0, run.log_text()[-5000:]
    finally:
        if victim > 0:
            restarting = time.monotonic()
            cluster.restart_node(victim)
            record_property("restart_seconds", round(time.monotonic() - restarting, 1))
    new_leader, _ = cluster.partition_state(topic, 0)
    assert new_leader != -1
    copied = read_all(real_kafka.bootstrap, remote)
    missing = _values(records) - _values(copied)
    assert not missing, f"{sum(missing.values())} source records missing on the target"
    duplicates = sum((_values(copied) - _values(records)).values())
    record_property("duplicates", duplicates)  # at-least-once: a re-copied range at most per partition
    assert duplicates <= 2 * 4000
    for p in (0, 1):  # order of each source partition kept (a re-copied range repeats a contiguous run)
        values = [r.value for r in copied if r.partition == p]
        firsts = sorted(set(values), key=values.index)
        assert firsts == [r.value for r in records if r.partition == p]
    record_property("seconds", round(time.monotonic() - started, 1))


def test_partitions_added_to_a_source_topic_are_created_and_copied_while_running(
    real_kafka_cluster: KafkaCluster,
    real_kafka: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    cluster = real_kafka_cluster
    topic = cluster.create_topic(unique_topic("grow"), partitions=1, replication_factor=3)
    before = make_records(200, partitions=1, seed=41, with_headers=False)
    produce(cluster.bootstrap, topic, before)
    config, remote = _config(
        tmp_path, cluster, real_kafka, topic, "refresh.topics.interval.seconds = 2\nconsumer.poll.timeout.ms = 200\n"
    )
    started = time.monotonic()
    with MirrorRun(config, tmp_path / "run.log") as run:
        run.wait_for(lambda: _count(real_kafka.bootstrap, remote) == 200, 180, "the first 200 records copied")
        admin = AdminClient(client_config(cluster.bootstrap))
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
        for p in (1, 2):
            poll_until(lambda p=p: cluster.partition_state(topic, p)[0] >= 0, 30, f"a leader for {topic}-{p}")
        grown = time.monotonic()
        after = [
            Record(r.key, r.value, r.headers, r.timestamp, i % 3)
            for i, r in enumerate(make_records(300, partitions=1, seed=42, with_headers=False))
        ]
        produce(cluster.bootstrap, topic, after)
        run.wait_for(
            lambda: _count(real_kafka.bootstrap, remote) == 500, 120, "the records of the new partitions on the target"
        )
        record_property("seconds_growth_to_copied", round(time.monotonic() - grown, 1))
        assert run.stop() == 0, run.log_text()[-5000:]
    target_partitions = AdminClient(client_config(real_kafka.bootstrap)).list_topics(remote, timeout=10)
    assert sorted(target_partitions.topics[remote].partitions) == [0, 1, 2]
    copied = read_all(real_kafka.bootstrap, remote)
    for p in (0, 1, 2):
        expected = [r.value for r in before + after if r.partition == p]
        assert [r.value for r in copied if r.partition == p] == expected, f"partition {p}"
    record_property("seconds", round(time.monotonic() - started, 1))


def _topic_overrides(cluster: KafkaCluster, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (DYNAMIC_TOPIC_CONFIG), not inherited from broker or Kafka defaults."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient(client_config(cluster.bootstrap))  # kept alive until the future is resolved
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: str(e.value) for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def _alter(cluster: KafkaCluster, topic: str, op: AlterConfigOpType, configs: dict[str, str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v in configs.items()]
    admin = AdminClient(client_config(cluster.bootstrap))
    futures = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)]
    )
    for future in futures.values():
        future.result(timeout=30)


def test_topic_configs_follow_mm2s_rules_against_real_defaults(
    real_kafka_cluster: KafkaCluster,
    real_kafka: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    cluster = real_kafka_cluster
    topic = cluster.create_topic(
        unique_topic("configs"),
        partitions=1,
        replication_factor=3,
        config={"retention.ms": "123456789", "max.message.bytes": "200000", "cleanup.policy": "delete"},
    )
    produce(cluster.bootstrap, topic, make_records(10, partitions=1, seed=51))
    # Kafka 4 sets min.insync.replicas as a cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), which
    # MM2 copies as an override unless excluded; it is in MM2's default exclusions, kept here.
    config, remote = _config(
        tmp_path,
        cluster,
        real_kafka,
        topic,
        "config.properties.exclude = max\\.message\\.bytes, min\\.insync\\.replicas\n",
    )
    started = time.monotonic()

    created = mm2py("run", str(config), "--once")
    assert created.returncode == 0, created.stderr
    # Set on the source topic: copied; excluded: not copied; Kafka's defaults (everything else, also the
    # explicitly given cleanup.policy=delete, which is an override on the source): only what is not default.
    assert _topic_overrides(real_kafka, remote) == {"retention.ms": "123456789", "cleanup.policy": "delete"}

    # The source override goes away, a target-side override of an excluded property is set by hand.
    _alter(cluster, topic, AlterConfigOpType.DELETE, {"retention.ms": ""})
    _alter(real_kafka, remote, AlterConfigOpType.SET, {"max.message.bytes": "300000"})
    synced = mm2py("run", str(config), "--once")  # a run syncs topic configs once it holds the flow
    assert synced.returncode == 0, synced.stderr
    # MM2 (use.defaults.from = target): a property that is a default on the source is restored to the target's
    # default (DELETE), an excluded one is never touched.
    assert _topic_overrides(real_kafka, remote) == {"cleanup.policy": "delete", "max.message.bytes": "300000"}
    record_property("seconds", round(time.monotonic() - started, 1))


def test_the_harness_metadata_probe_asks_the_one_node_at_an_address(real_kafka_cluster: KafkaCluster) -> None:
    """The probe the harness waits on for each node's own view of the cluster: every node of the started cluster
    lists all three brokers, and an address where no broker listens is an OSError, not an empty list."""
    for node in real_kafka_cluster.nodes:
        assert brokers_listed_by(node.address()) == {1, 2, 3}
    with pytest.raises(OSError):
        brokers_listed_by(f"{HOST}:{free_port()}")

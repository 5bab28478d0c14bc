"""Three real Kafka nodes: killing a partition leader elects another, and no acknowledged record is lost."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.harness.kafka_harness import Record, make_records, produce, read_all
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster

pytestmark = pytest.mark.realkafka


def _shape(records: list[Record]) -> list[tuple[object, ...]]:
    return [(r.partition, r.key, r.value, r.headers, r.timestamp) for r in records]


def test_killed_leader_is_replaced_and_acknowledged_records_survive(
    real_kafka_cluster: KafkaCluster, unique_topic: Callable[..., str], record_property: Callable[[str, object], None]
) -> None:
    cluster = real_kafka_cluster
    topic = cluster.create_topic(
        unique_topic("failover"), partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    poll_until(lambda: len(cluster.partition_state(topic, 0)[1]) == 3, 30, f"{topic}-0 has 3 in-sync replicas")
    before = make_records(500, partitions=1, seed=1)
    produce(cluster.bootstrap, topic, before)  # acks=all: raises unless every record is acknowledged
    old_leader, _ = cluster.partition_state(topic, 0)

    cluster.kill_node(old_leader)
    killed = time.monotonic()
    try:
        new_leader, isr = poll_until(
            lambda: (state := cluster.partition_state(topic, 0))[0] not in (-1, old_leader) and state,
            30,
            f"a new leader for {topic}-0 after killing node {old_leader}",
        )
        record_property("leader_election_seconds", round(time.monotonic() - killed, 2))
        assert new_leader in {n.node_id for n in cluster.nodes} - {old_leader}
        assert old_leader not in isr
        after = make_records(300, partitions=1, seed=2, base_timestamp=before[-1].timestamp + 1)
        produce(cluster.bootstrap, topic, after)  # two replicas left meet min.insync.replicas=2
        assert _shape(read_all(cluster.bootstrap, topic)) == _shape(before + after)
    finally:
        restarting = time.monotonic()
        cluster.restart_node(old_leader)
        record_property("restart_seconds", round(time.monotonic() - restarting, 2))

    poll_until(
        lambda: len(cluster.partition_state(topic, 0)[1]) == 3, 60, f"node {old_leader} back in the ISR of {topic}-0"
    )
    record_property("back_in_isr_seconds", round(time.monotonic() - restarting, 2))
    assert _shape(read_all(cluster.bootstrap, topic)) == _shape(before + after)

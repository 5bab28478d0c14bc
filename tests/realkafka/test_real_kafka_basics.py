"""The real-Kafka harness on one node: records round-trip exactly, and the log cleaner really compacts."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.harness.kafka_harness import (
    Record,
    commit_group,
    committed_group,
    consumer_config,
    make_records,
    produce,
    read_all,
)
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_compaction import await_compaction, newest_per_key

pytestmark = pytest.mark.realkafka


def test_records_round_trip_exactly_through_a_real_broker(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    topic = real_kafka.create_topic(unique_topic("roundtrip"), partitions=3)
    sent = make_records(600, partitions=3, seed=7, tombstone_every=11, null_key_every=13)
    produce(real_kafka.bootstrap, topic, sent)

    read = read_all(real_kafka.bootstrap, topic)

    def shape(records: list[Record]) -> list[tuple[object, ...]]:
        return [(r.partition, r.key, r.value, r.headers, r.timestamp) for r in records]

    assert shape(read) == shape(sorted(sent, key=lambda r: r.partition))
    for partition in range(3):
        offsets = [r.offset for r in read if r.partition == partition]
        assert offsets == list(range(200)), f"partition {partition} offsets are not 0..199"
    consumer = Consumer(consumer_config(real_kafka.bootstrap))
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(3)]
    finally:
        consumer.close()
    assert ends == [(0, 200)] * 3  # real ListOffsets: exact, unlike tansu's
    commit_group(real_kafka.bootstrap, "roundtrip-group", topic, {0: 5, 1: 17, 2: 200})
    assert committed_group(real_kafka.bootstrap, "roundtrip-group", topic, 3) == {0: 5, 1: 17, 2: 200}


def test_log_cleaner_leaves_only_the_newest_record_per_key(
    real_kafka: KafkaCluster, compacted_topic: Callable[..., str], record_property: Callable[[str, object], None]
) -> None:
    topic = compacted_topic(real_kafka, partitions=2)
    keys, versions = 5, 200
    produced = [
        Record(
            f"key-{k}".encode(),
            f"key-{k} version {v}".encode(),
            [("v", str(v).encode())],
            int(time.time() * 1000),
            k % 2,
        )
        for v in range(versions)
        for k in range(keys)
    ]
    produce(real_kafka.bootstrap, topic, produced)
    assert len(read_all(real_kafka.bootstrap, topic)) == keys * versions  # nothing cleaned yet: all versions

    started = time.monotonic()
    read = await_compaction(real_kafka, topic, produced, partitions=2, timeout=60)
    record_property("compaction_seconds", round(time.monotonic() - started, 2))

    survivors = {(r.key, r.value) for r in read if not r.key or not r.key.startswith(b"seal-")}
    assert survivors == {(f"key-{k}".encode(), f"key-{k} version {versions - 1}".encode()) for k in range(keys)}
    expected = [r for records in newest_per_key(produced).values() for r in records]
    assert sorted((r.partition, r.key, r.value) for r in read) == sorted(
        (r.partition, r.key, r.value) for r in expected
    )
    # Compaction keeps offsets: each survivor still sits where it was written (versions go round the keys).
    keys_of = {p: [k for k in range(keys) if k % 2 == p] for p in range(2)}
    for r in read:
        if r.key is not None and r.key.startswith(b"key-"):
            k = int(r.key.removeprefix(b"key-"))
            assert r.offset == (versions - 1) * len(keys_of[k % 2]) + keys_of[k % 2].index(k)

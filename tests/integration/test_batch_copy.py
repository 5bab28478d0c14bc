"""The batch copier end to end against real brokers: every record identical, offsets consistent.

tansu returns aborted records to read_committed consumers and lists no aborted transactions, so dropping
aborted batches is covered by the unit tests of the read_committed rule, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from mm2py.executor.batch_copy import copy_partitions
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.mirror.record_formats import OffsetSync
from tests.harness.copy_specs import copy_spec
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    client_config,
    create_topic,
    end_offsets,
    make_records,
    read_all,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    return kafka_cluster("src", "dst")


def spec_for(src: str, dst: str, syncs_topic: str, progress: str, **consumer: str) -> CopySpec:
    return copy_spec(
        flow="src->dst",
        source="src",
        target="dst",
        consumer_settings={"bootstrap.servers": src, "group.id": "unused", **consumer},
        producer_settings={
            "bootstrap.servers": dst,
            "acks": "all",
            "enable.idempotence": "true",
            "partitioner": "murmur2_random",
            "linger.ms": "5",
        },
        syncs_producer_settings={"bootstrap.servers": src, "acks": "all"},
        target_consumer_settings={"bootstrap.servers": dst},
        syncs_topic=syncs_topic,
        progress_topic=progress,
        offset_lag_max=100,
        stall_timeout_s=30.0,
        flush_timeout_s=30.0,
    )


def produce_batched(bootstrap: str, topic: str, records: list[Record], **settings: Any) -> None:
    """Produce with large batches (the harness sends one-record tail batches; here batches are the point)."""
    producer = Producer(
        client_config(
            bootstrap, **{"linger.ms": 50, "batch.num.messages": 10_000, "enable.idempotence": True, **settings}
        )
    )
    transactional = "transactional.id" in settings
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i, r in enumerate(records):
        producer.produce(topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers))
        if transactional and i % 50 == 49:
            producer.commit_transaction(30)
            producer.begin_transaction()
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0


def run_task(spec: CopySpec, ranges: list[PartitionRange]) -> list[CopyResult]:
    """The batch copy task over ``ranges``, as an executor runs it; every range must have been copied."""
    results = list(copy_partitions(spec, iter(ranges)))
    assert all(r.error is None for r in results), results
    return results


def copy(spec: CopySpec, src: str, topic: str, starts: dict[int, int] | None = None) -> list[CopyResult]:
    ends = end_offsets(src, topic)
    ranges = [PartitionRange(topic, p, topic, (starts or {}).get(p, 0), end) for p, end in ends.items()]
    results = run_task(spec, ranges)
    for r in results:
        assert r.next_offset >= ends[r.partition]
    return results


def same(record: Record) -> tuple[Any, ...]:
    return record.partition, record.key, record.value, record.headers, record.timestamp


def check_syncs(src: str, syncs_topic: str, topic: str, source: list[Record], target: list[Record]) -> None:
    """Every offset sync maps a source record to the target record with the same content."""
    by_source = {(r.partition, r.offset): r for r in source}
    by_target = {(r.partition, r.offset): r for r in target}
    syncs = [OffsetSync.from_record(r.key, r.value) for r in read_all(src, syncs_topic)]
    assert syncs
    for sync in syncs:
        assert sync.topic == topic
        upstream = by_source[(sync.partition, sync.upstream_offset)]
        downstream = by_target[(sync.partition, sync.downstream_offset)]
        assert same(upstream) == same(downstream)


def make_topics(pair: dict[str, TansuBroker], topic: str, partitions: int) -> tuple[str, str]:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    create_topic(src, topic, partitions)
    create_topic(dst, topic, partitions)
    syncs, progress = f"mm2-offset-syncs-{topic}", "mm2-offsets.src.internal"
    create_topic(src, syncs, 1)
    create_topic(dst, progress, 1)
    return syncs, progress


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_is_copied_record_for_record(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str], codec: str
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic(codec)
    syncs, progress = make_topics(pair, topic, 3)
    produce_batched(src, topic, make_records(3000, partitions=3, value_size=100), **{"compression.type": codec})
    results = copy(spec_for(src, dst, syncs, progress), src, topic)
    assert sum(r.records for r in results) == 3000
    source, target = read_all(src, topic), read_all(dst, topic)
    assert [same(r) for r in target] == [same(r) for r in source]
    assert [(r.partition, r.offset) for r in target] == [(r.partition, r.offset) for r in source]
    check_syncs(src, syncs, topic, source, target)
    assert {r.partition: r.last_offset for r in results} == {p: 999 for p in range(3)}


def test_committed_transactions_are_copied_without_their_markers(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("txn")
    syncs, progress = make_topics(pair, topic, 2)
    produce_batched(src, topic, make_records(400, partitions=2), **{"transactional.id": f"tx-{topic}"})
    results = copy(spec_for(src, dst, syncs, progress, **{"isolation.level": "read_committed"}), src, topic)
    source, target = read_all(src, topic), read_all(dst, topic)
    assert [same(r) for r in target] == [same(r) for r in source]
    # markers take source offsets, not target ones: the target is dense, the source has gaps
    for p in range(2):
        assert [r.offset for r in target if r.partition == p] == list(range(200))
        assert max(r.offset for r in source if r.partition == p) > 199
    assert sum(r.records for r in results) == 400
    check_syncs(src, syncs, topic, source, target)


def test_a_range_starting_inside_a_batch_copies_from_its_first_offset(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("mid")
    syncs, progress = make_topics(pair, topic, 1)
    produce_batched(src, topic, make_records(500, partitions=1), **{"compression.type": "lz4"})
    results = copy(spec_for(src, dst, syncs, progress), src, topic, starts={0: 137})
    source, target = read_all(src, topic), read_all(dst, topic)
    assert [same(r) for r in target] == [same(r) for r in source[137:]]
    assert results[0].records == 363 and results[0].last_offset == 499
    check_syncs(src, syncs, topic, source, target)

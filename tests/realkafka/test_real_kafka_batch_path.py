"""The batch copier against a real broker's log validation (tansu validates nothing a real broker does).

Every kind of batch the batch path forwards or rebuilds is produced to a real Kafka broker as the source and
copied to a real Kafka broker as the target: plain, each codec, from an idempotent producer, from transactions
(aborted ones dropped under read_committed, which tansu cannot show), from a compacted partition (offset
holes), with LogAppendTime. Records are compared field by field and in order. A batch larger than the target
topic accepts is a permanent error naming its size and the key to raise, and nothing after it is written.

Each test runs on the pinned version (4.3.1) on both sides, and with a 3.x broker (3.9.2) and the newest 4.x
(4.4.0) as the source and as the target, the pinned version on the other side: the wire client negotiates its
API versions with each, and a 3.x broker still serves the versions 4.0 removed (KIP-896).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import Producer

from mm2py.executor.batch_copy import copy_partitions
from mm2py.executor.contract import CopyPath, CopyResult, CopySpec, PartitionRange
from mm2py.librdkafka.clients import drop_consumer, drop_producer
from tests.harness.copy_specs import copy_spec
from tests.harness.kafka_harness import Record, client_config, make_records, read_all
from tests.harness.real_kafka import OTHER_VERSIONS, PINNED_VERSION, KafkaCluster
from tests.harness.real_kafka_compaction import await_compaction
from tests.harness.translation_helpers import client_settings

pytestmark = pytest.mark.realkafka
# source version -> target version; one side is always the pinned version
PAIRS = [
    f"{PINNED_VERSION}->{PINNED_VERSION}",
    *(f"{v}->{PINNED_VERSION}" for v in OTHER_VERSIONS),
    *(f"{PINNED_VERSION}->{v}" for v in OTHER_VERSIONS),
]
Pair = tuple[KafkaCluster, KafkaCluster]


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest, real_kafka_versions: Callable[[str], KafkaCluster]) -> Pair:
    """(source, target): one-node clusters of the versions the test id names."""
    source, target = request.param.split("->")
    return real_kafka_versions(source), real_kafka_versions(target)


def spec_for(source: KafkaCluster, target: KafkaCluster, progress: str, **consumer: str) -> CopySpec:
    return copy_spec(
        flow="src->dst",
        source="src",
        target="dst",
        consumer_settings={"bootstrap.servers": source.bootstrap, "group.id": "unused", **consumer},
        producer_settings={"bootstrap.servers": target.bootstrap, "acks": "all", "enable.idempotence": "true"},
        syncs_producer_settings=None,
        target_consumer_settings={"bootstrap.servers": target.bootstrap},
        syncs_topic=None,
        progress_topic=progress,
        offset_lag_max=100,
        stall_timeout_s=30.0,
        flush_timeout_s=30.0,
        copy_path=CopyPath("batch"),
    )


def produce_batched(
    cluster: KafkaCluster, topic: str, records: list[Record], abort_every: int = 0, **settings: Any
) -> list[Record]:
    """Large batches; with a transactional.id, transactions of 50 records, every ``abort_every``-th aborted.
    Returns the records a read_committed consumer sees."""
    producer = Producer(client_config(cluster.bootstrap, **{"linger.ms": 50, "batch.num.messages": 10_000, **settings}))
    transactional = "transactional.id" in settings
    kept: list[Record] = []
    if transactional:
        producer.init_transactions(30)
    for start in range(0, len(records), 50):
        chunk = records[start : start + 50]
        if transactional:
            producer.begin_transaction()
        for r in chunk:
            producer.produce(topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers))
        abort = transactional and abort_every and (start // 50) % abort_every == abort_every - 1
        if abort:
            # The aborted records must reach the log (that is what is tested); without this flush, under load,
            # librdkafka purged them unsent and its EndTxn(ABORT) found no open transaction on the broker:
            # INVALID_TXN_STATE (seen once in the full suite).
            assert producer.flush(30) == 0
        if transactional:
            (producer.abort_transaction if abort else producer.commit_transaction)(30)
        if not abort:
            kept += chunk
    assert producer.flush(30) == 0
    return kept


def copy(source: KafkaCluster, spec: CopySpec, topic: str, remote: str, partitions: int) -> list[CopyResult]:
    from tests.harness.kafka_harness import end_offsets

    ends = end_offsets(source.bootstrap, topic)
    ranges = [PartitionRange(topic, p, remote, 0, ends[p]) for p in range(partitions)]
    return list(copy_partitions(spec, iter(ranges)))


def fields(r: Record) -> tuple[Any, ...]:
    return r.partition, r.key, r.value, tuple(r.headers), r.timestamp


@pytest.fixture
def topics(pair: Pair, unique_topic: Callable[..., str]) -> Callable[..., tuple[str, str, str]]:
    """Factory: a source topic on the pair's source, its copy and a progress topic on the pair's target."""
    source, target = pair

    def make(
        kind: str,
        partitions: int = 2,
        source_config: dict[str, str] | None = None,
        target_config: dict[str, str] | None = None,
        compacted: bool = False,
    ) -> tuple[str, str, str]:
        name = unique_topic(kind)
        if compacted:
            source.create_compacted_topic(name, partitions, config=source_config)
        else:
            source.create_topic(name, partitions, config=source_config)
        target.create_topic(f"{name}-copy", partitions, config=target_config)
        progress = target.create_topic(f"{name}-progress", 1)
        return name, f"{name}-copy", progress

    return make


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_and_an_idempotent_source_are_accepted_exactly(
    pair: Pair, topics: Callable[..., tuple[str, str, str]], codec: str
) -> None:
    src, dst = pair
    topic, remote, progress = topics(codec)
    produce_batched(
        src,
        topic,
        make_records(2000, partitions=2, seed=4, value_size=100, tombstone_every=17, null_key_every=13),
        **{"compression.type": codec, "enable.idempotence": True},
    )
    results = copy(src, spec_for(src, dst, progress), topic, remote, 2)
    assert all(r.error is None for r in results), results
    source, target = read_all(src.bootstrap, topic), read_all(dst.bootstrap, remote)
    assert [fields(r) for r in target] == [fields(r) for r in source]
    assert [(r.partition, r.offset) for r in target] == [(r.partition, r.offset) for r in source]


def test_aborted_transactions_are_dropped_under_read_committed(
    pair: Pair, topics: Callable[..., tuple[str, str, str]]
) -> None:
    src, dst = pair
    topic, remote, progress = topics("txn")
    committed = produce_batched(
        src,
        topic,
        make_records(1000, partitions=2, seed=5),
        abort_every=3,
        **{"transactional.id": f"tx-{topic}", "compression.type": "lz4"},
    )
    spec = spec_for(src, dst, progress, **{"isolation.level": "read_committed"})
    results = copy(src, spec, topic, remote, 2)
    assert all(r.error is None for r in results), results
    target = read_all(dst.bootstrap, remote)
    assert len(target) == len(committed) < 1000
    assert [fields(r) for r in target] == [fields(r) for r in sorted(committed, key=lambda r: r.partition)]


def test_a_compacted_source_with_offset_holes_and_log_append_time(
    pair: Pair, topics: Callable[..., tuple[str, str, str]]
) -> None:
    src, dst = pair
    topic, remote, progress = topics(
        "compacted", partitions=1, compacted=True, source_config={"message.timestamp.type": "LogAppendTime"}
    )
    produced = [
        Record(f"key-{i % 7}".encode(), f"value {i}".encode(), [("i", str(i).encode())], 1000 + i, 0)
        for i in range(700)
    ]
    produce_batched(src, topic, produced, **{"compression.type": "zstd"})
    source = await_compaction(src, topic, produced, partitions=1)
    offsets = [r.offset for r in source]
    assert offsets != list(range(len(offsets)))  # holes, which a forwarded batch must not keep
    results = copy(src, spec_for(src, dst, progress), topic, remote, 1)
    assert all(r.error is None for r in results), results
    target = read_all(dst.bootstrap, remote)
    # LogAppendTime: the source's append times travel as the copies' CreateTime
    assert [fields(r) for r in target] == [fields(r) for r in source]
    assert [r.offset for r in target] == list(range(len(source)))


def test_a_batch_larger_than_the_target_accepts_is_a_permanent_error_naming_sizes(
    pair: Pair, topics: Callable[..., tuple[str, str, str]]
) -> None:
    src, dst = pair
    topic, remote, progress = topics("toolarge", partitions=1, target_config={"max.message.bytes": "4000"})
    # Each record alone is over the limit, so whichever batches the producer made, the first one is refused.
    produce_batched(src, topic, make_records(50, partitions=1, seed=6, value_size=5000))
    results = copy(src, spec_for(src, dst, progress), topic, remote, 1)
    assert len(results) == 1 and results[0].error is not None
    failure = results[0].error
    error = failure.message  # failures travel as data: the message, the Kafka error's name, retriability
    assert not failure.retriable and failure.code, failure
    assert "too large" in error and "bytes" in error and f"max.message.bytes of topic {remote}" in error, error
    assert read_all(dst.bootstrap, remote) == []  # never skipped past


@pytest.mark.parametrize("path", ["batch", "record"])
def test_a_range_whose_records_were_deleted_stops_at_them_with_records_gone(
    pair: Pair, topics: Callable[..., tuple[str, str, str]], path: str
) -> None:
    """Both copy paths stop a range at records deleted before they were copied (DeleteRecords here), copy
    nothing after them, and say so with a failure the driver counts as lost records rather than retries."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from mm2py.executor import record_copy
    from mm2py.librdkafka.defaults import copy_consumer_settings

    source, target = pair
    topic, remote, progress = topics(f"gone-{path}", partitions=1)
    produce_batched(source, topic, make_records(1000, partitions=1, seed=7))
    admin = AdminClient(client_config(source.bootstrap))
    for future in admin.delete_records([TopicPartition(topic, 0, 600)]).values():
        future.result(timeout=30)
    consumer = copy_consumer_settings({"bootstrap.servers": source.bootstrap}, "unused", exactly_once=False)
    spec = replace(
        spec_for(source, target, progress),
        consumer_settings=consumer,
        consumer_connection=client_settings(consumer),
        copy_path=CopyPath(path),  # type: ignore[arg-type]
    )
    try:
        rng = PartitionRange(topic, 0, remote, 200, 1000)
        if path == "batch":
            [result] = list(copy_partitions(spec, iter([rng])))
        else:
            [result] = list(record_copy.copy_partitions(spec, iter([rng]), last_attempt=True))
    finally:
        drop_producer(spec.producer_settings)
        drop_consumer(spec.consumer_settings)  # not left for the interpreter's exit, after the broker stopped
    assert result.error is not None and result.error.records_gone and not result.error.retriable, result
    assert (result.records, result.next_offset) == (0, 200)
    assert read_all(target.bootstrap, remote) == []


def test_a_batch_the_target_refuses_names_the_record_and_the_brokers_reason(
    pair: Pair, topics: Callable[..., tuple[str, str, str]]
) -> None:
    """A keyless record into a compacted remote topic: the broker refuses its batch with INVALID_RECORD and says
    why in the Produce answer (v8's record errors), which the failure carries as Java's producer shows it."""
    src, dst = pair
    topic, remote, progress = topics("keyless", partitions=1, target_config={"cleanup.policy": "compact"})
    produce_batched(src, topic, [replace(r, key=None) for r in make_records(1, partitions=1, seed=8)])
    [result] = copy(src, spec_for(src, dst, progress), topic, remote, 1)
    assert result.error is not None and not result.error.retriable, result
    assert result.error.code == "INVALID_RECORD", result.error
    reason = "record 0 of the batch: Compacted topic cannot accept message without key"
    assert reason in result.error.message, result.error.message
    assert read_all(dst.bootstrap, remote) == []

"""The copy task (runs on executors): one offset range of one source partition -> the same partition of
the remote topic, inside one Python process. Records never pass through the JVM or the driver.

Order of effects, which is what makes a crash safe at any point:
1. consume [start, end) and produce every record (key, value, headers, CreateTime, partition kept);
2. flush: every record is acknowledged by the target (acks=all), or the task fails and Spark retries it;
3. write the offset syncs of this range (MM2's emission rule) for offset translation;
4. write progress (the last replicated offset) to ``mm2-offsets.<source>.internal`` and flush it.
A crash before 4 re-copies at most this range (at-least-once); progress never runs ahead of the data.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from mm2py.errors import ReplicationError
from mm2py.kafka.clients import cached_consumer, cached_producer, drop_producer
from mm2py.offset_syncs import DENSE_SYNC_HEADER, DENSE_SYNC_VALUE, offset_syncs_for
from mm2py.progress import progress_record

_CONSUME_BATCH = 10_000
# librdkafka drops a message it cannot deliver within message.timeout.ms; after that the idempotent
# producer's epoch must be bumped, which some brokers refuse, so a producer that timed out is replaced.
_RECREATE_PRODUCER = {KafkaError._MSG_TIMED_OUT, KafkaError._FENCED, KafkaError._FATAL}


@dataclass(frozen=True)
class CopySpec:
    """What every task of one flow needs; small, plain and picklable (shipped with each task)."""

    flow: str
    source: str
    target: str
    consumer_settings: Mapping[str, str] = field(repr=False)
    producer_settings: Mapping[str, str] = field(repr=False)
    syncs_producer_settings: Mapping[str, str] | None = field(repr=False)
    syncs_topic: str | None
    progress_topic: str
    offset_lag_max: int
    dense_offset_syncs: bool = True
    poll_timeout_s: float = 1.0
    stall_timeout_s: float = 120.0
    flush_timeout_s: float = 300.0


@dataclass(frozen=True)
class PartitionRange:
    """Copy source ``topic``-``partition`` offsets [start, end) into ``remote_topic``, same partition."""

    topic: str
    partition: int
    remote_topic: str
    start: int
    end: int


@dataclass(frozen=True)
class CopyResult:
    topic: str
    partition: int
    start: int
    next_offset: int  # where the next range starts (after the last record or marker read)
    last_offset: int  # offset of the last record copied, -1 if none
    records: int
    bytes: int
    syncs: int
    seconds: float


def copy_partitions(spec: CopySpec, ranges: Iterator[PartitionRange]) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy each range in turn."""
    for rng in ranges:
        yield copy_range(spec, rng)


def copy_range(spec: CopySpec, rng: PartitionRange) -> CopyResult:
    """Copy one range; raises ReplicationError (the task fails, Spark retries it, progress stays put)."""
    started = time.monotonic()
    where = f"flow={spec.flow} topic={rng.topic} partition={rng.partition}"
    consumer = cached_consumer(spec.consumer_settings)
    producer = cached_producer(spec.producer_settings)
    upstream: list[int] = []
    downstream: list[int] = []
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err)
        else:
            downstream.append(msg.offset())

    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    try:
        position, copied_bytes = _pump(spec, rng, consumer, producer, on_delivery, upstream, failures, where)
    finally:
        consumer.unassign()
    _flush(spec, producer, failures, where)
    if len(downstream) != len(upstream):
        raise ReplicationError(f"{where}: {len(upstream)} records sent but {len(downstream)} acknowledged")
    syncs = 0
    if spec.syncs_topic is not None and upstream:
        syncs = _write_offset_syncs(spec, rng, zip(upstream, downstream, strict=True), where)
    if upstream:
        record = progress_record(spec.source, rng.topic, rng.partition, upstream[-1])
        producer.produce(spec.progress_topic, record.value, record.key, on_delivery=on_delivery)
        _flush(spec, producer, failures, f"{where} (progress)")
    return CopyResult(rng.topic, rng.partition, rng.start, position, upstream[-1] if upstream else -1,
                      len(upstream), copied_bytes, syncs, time.monotonic() - started)


def _pump(spec: CopySpec, rng: PartitionRange, consumer: Any, producer: Any, on_delivery: Any,
          upstream: list[int], failures: list[KafkaError], where: str) -> tuple[int, int]:
    """The hot loop: consume a batch, produce each record, repeat until the range's end."""
    produce = producer.produce
    poll = producer.poll
    remote, partition, end = rng.remote_topic, rng.partition, rng.end
    append = upstream.append
    position = rng.start
    copied_bytes = 0
    last_progress = time.monotonic()
    while position < end:
        messages = consumer.consume(num_messages=_CONSUME_BATCH, timeout=spec.poll_timeout_s)
        if not messages:
            if time.monotonic() - last_progress > spec.stall_timeout_s:
                raise ReplicationError(f"{where}: no records from the source for {spec.stall_timeout_s:.0f} s "
                                       f"at offset {position} (range ends at {end})")
            continue
        last_progress = time.monotonic()
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    position = max(position, msg.offset())
                    continue
                raise ReplicationError(f"{where}: consuming from {spec.source} failed: {err.str()}")
            offset = msg.offset()
            if offset >= end:
                position = end
                break
            value = msg.value()
            kind, timestamp = msg.timestamp()
            while True:
                try:
                    produce(remote, value, msg.key(), partition, on_delivery=on_delivery,
                            timestamp=timestamp if kind else 0, headers=msg.headers())
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    poll(0.05)
            append(offset)
            if value is not None:
                copied_bytes += len(value)
            position = offset + 1
        poll(0)
        if failures:
            _raise_delivery_failure(spec, failures, where)
    return position, copied_bytes


def _flush(spec: CopySpec, producer: Any, failures: list[KafkaError], where: str) -> None:
    deadline = time.monotonic() + spec.flush_timeout_s
    while producer.flush(1.0) > 0:
        if failures:
            break
        if time.monotonic() > deadline:
            raise ReplicationError(f"{where}: the target {spec.target} did not acknowledge within "
                                   f"{spec.flush_timeout_s:.0f} s")
    if failures:
        _raise_delivery_failure(spec, failures, where)


def _raise_delivery_failure(spec: CopySpec, failures: list[KafkaError], where: str) -> None:
    first = failures[0]
    if first.code() in _RECREATE_PRODUCER or first.fatal():
        drop_producer(spec.producer_settings)
    raise ReplicationError(f"{where}: producing to {spec.target} failed for {len(failures)} record(s): "
                           f"{first.str()}")


def _write_offset_syncs(spec: CopySpec, rng: PartitionRange, pairs: Any, where: str) -> int:
    assert spec.syncs_producer_settings is not None and spec.syncs_topic is not None
    syncs = offset_syncs_for(rng.topic, rng.partition, pairs, spec.offset_lag_max, dense=spec.dense_offset_syncs)
    headers: list[tuple[str, str | bytes | None]] | None = (
        [(DENSE_SYNC_HEADER, DENSE_SYNC_VALUE)] if spec.dense_offset_syncs else None)
    producer = cached_producer(spec.syncs_producer_settings)
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    for sync in syncs:
        while True:
            try:
                producer.produce(spec.syncs_topic, sync.record_value(), sync.record_key(), 0,
                                 on_delivery=on_delivery, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    _flush(spec, producer, failures, f"{where} (offset syncs)")
    return len(syncs)

"""Loading a source topic fast and checking a copy of it record by record, for millions of records.

Why a checker of its own: the fault tests and the campaign (``bench/broker_faults.py``) must say how many records
a broker failure lost, duplicated or reordered, for up to a million records a run. ``kafka_harness.read_all``
keeps every record as a Python object, twice over (source and target), and compares lists. Here each record
becomes one 64-bit hash of everything a copy must keep (key, value, headers, timestamp and its type), kept per
partition in offset order in an ``array`` (8 bytes a record), and the comparison walks the target's hashes
against an index of the source's, one partition at a time:

- *lost*: a source record with no copy in the same partition of the target;
- *duplicated*: a copy beyond the first of a source record;
- *reordered*: a first copy that lands after the first copy of a later record of the same source partition;
- *unexpected*: a target record that is no source record of that partition (altered, or in another partition).

The records a loader writes are unique (the key names the dataset, partition and sequence number), so the
index of a partition's hashes is exact. Every read goes from offset 0 to the high watermark that Kafka reports
when the read starts (real Kafka only: tansu's ListOffsets is not exact).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from array import array
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.harness.kafka_harness import client_config, consumer_config

Digest = dict[int, array]  # partition -> the hashes of its records, in offset order ("Q": unsigned 64 bit)
# Fast and safe through a broker restart: idempotent (a retried batch is never written twice), acks=all, and
# deliveries retried for 5 minutes (longer than any fault a test injects).
LOAD_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.timeout.ms": 300_000,
}


def record_hash(key: bytes | None, value: bytes | None, headers: Any, timestamp: tuple[int, int]) -> int:
    """64 bits of BLAKE2b over the repr of every field a copy keeps (repr tells None from b"" and keeps order)."""
    digest = hashlib.blake2b(repr((key, value, headers or None, timestamp)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


# -- loading ---------------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    """What a loader wrote: ``records`` per topic, round-robin over ``partitions``; values of ``value_size`` bytes."""

    topic: str
    partitions: int
    records: int
    value_size: int
    seed: int
    seconds: float = 0.0


class RecordMaker:
    """Record ``i`` of dataset ``seed``: partition ``i % partitions``, key ``<seed>-<partition>-<i>``, a value of
    exactly ``value_size`` bytes (``i`` as 8 bytes, then bytes cut from one random block), one header carrying
    ``i``, CreateTime ``base_ms + i``. Unique per (seed, i), cheap to make a million of."""

    def __init__(self, partitions: int, value_size: int, seed: int, base_ms: int | None = None) -> None:
        self.partitions, self.value_size, self.seed = partitions, value_size, seed
        self.base_ms = int(time.time() * 1000) if base_ms is None else base_ms
        self._filler = os.urandom(value_size + 4096)

    def produce(self, producer: Producer, topic: str, i: int, on_delivery: Any) -> None:
        partition = i % self.partitions
        seq = i.to_bytes(8, "big")
        start = i % 4096
        value = seq + self._filler[start : start + max(0, self.value_size - 8)]
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    f"{self.seed}-{partition}-{i}".encode(),
                    partition,
                    on_delivery=on_delivery,
                    timestamp=self.base_ms + i,
                    headers=[("i", seq)],
                )
                return
            except BufferError:
                producer.poll(0.05)  # local queue full: serve delivery reports, then retry


def load(bootstrap: str, topic: str, records: int, *, partitions: int, value_size: int = 100, seed: int = 0) -> Dataset:
    """Write ``records`` records to ``topic`` as fast as one producer can; raise if any was not acknowledged."""
    started = time.monotonic()
    maker = RecordMaker(partitions, value_size, seed)
    producer = Producer(client_config(bootstrap, **LOAD_PRODUCER))
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    for i in range(records):
        maker.produce(producer, topic, i, on_delivery)
        if i % 10_000 == 0:
            producer.poll(0)
    if (left := producer.flush(300)) or failures:
        raise RuntimeError(f"loading {topic} failed: {left} undelivered, errors {failures[:3]}")
    return Dataset(topic, partitions, records, value_size, seed, time.monotonic() - started)


class PacedProducer:
    """Writes new records to a topic at ``rate`` records/s in a thread, until stopped (continuous mode's load).

    Deliveries are retried through broker restarts (``LOAD_PRODUCER``); ``stop`` returns how many records were
    acknowledged and fails if any delivery failed."""

    def __init__(self, bootstrap: str, topic: str, rate: float, *, partitions: int, value_size: int = 100) -> None:
        self.topic, self.rate = topic, rate
        self.maker = RecordMaker(partitions, value_size, seed=int(time.time()))
        self.producer = Producer(client_config(bootstrap, **LOAD_PRODUCER))
        self.sent = 0
        self.acknowledged = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            self.acknowledged += 1
        else:
            self.failures.append(err.str())

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                self.maker.produce(self.producer, self.topic, self.sent, self._on_delivery)
                self.sent += 1
            self.producer.poll(0.01)  # serves delivery reports; the pacing tick

    def stop(self, timeout: float = 300.0) -> int:
        self._stop.set()
        self._thread.join(30)
        if (left := self.producer.flush(timeout)) or self.failures:
            raise RuntimeError(f"paced producer to {self.topic}: {left} undelivered, errors {self.failures[:3]}")
        return self.acknowledged


# -- reading ---------------------------------------------------------------------------------------------------


def high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], timeout: float = 10.0) -> dict[int, int]:
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in partitions}
    finally:
        consumer.close()


def digest_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 300.0) -> Digest:
    """Every record of ``topic`` up to the high watermarks of now, hashed, per partition in offset order."""
    ends = high_watermarks(bootstrap, topic, range(partitions))
    digest: Digest = {p: array("Q") for p in range(partitions)}
    pending = {p for p, end in ends.items() if end > 0}
    consumer = Consumer(
        consumer_config(
            bootstrap, **{"isolation.level": "read_uncommitted", "fetch.wait.max.ms": 100, "enable.partition.eof": True}
        )
    )
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in sorted(pending)])
        while pending:
            if time.monotonic() > deadline:
                read = {p: len(digest[p]) for p in pending}
                raise TimeoutError(f"digest of {topic}: partitions {read} not read up to {ends} in {timeout} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if (msg.offset() or 0) >= ends[msg.partition() or 0]:
                        pending.discard(msg.partition() or 0)  # the end was a control record (a marker)
                    continue
                partition, offset = msg.partition(), msg.offset()
                if partition not in pending or offset >= ends[partition]:
                    continue
                digest[partition].append(record_hash(msg.key(), msg.value(), msg.headers(), msg.timestamp()))
                if offset == ends[partition] - 1:
                    pending.discard(partition)
    finally:
        consumer.close()
    return digest


# -- comparing -------------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """How a target topic differs from its source, record by record (see the module docstring)."""

    source_records: int = 0
    target_records: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    unexpected: int = 0
    per_partition: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.unexpected)

    def summary(self) -> str:
        bad = {p: c for p, c in self.per_partition.items() if any(v for k, v in c.items() if k != "records")}
        return (
            f"{self.source_records} source, {self.target_records} target records: lost {self.lost}, duplicated "
            f"{self.duplicated}, reordered {self.reordered}, unexpected {self.unexpected}"
            + (f"; by partition {bad}" if bad else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare(source: Digest, target: Digest) -> Comparison:
    result = Comparison()
    for partition in sorted(source.keys() | target.keys()):
        counts = compare_partition(source.get(partition, array("Q")), target.get(partition, array("Q")))
        result.per_partition[partition] = counts
        result.source_records += counts["records"]
        result.target_records += len(target.get(partition, ()))
        result.lost += counts["lost"]
        result.duplicated += counts["duplicated"]
        result.reordered += counts["reordered"]
        result.unexpected += counts["unexpected"]
    return result


def compare_partition(source: array, target: array) -> dict[str, int]:
    """One partition's counts. Fast path: a target that equals the source is one array comparison."""
    if source == target:
        return {"records": len(source), "lost": 0, "duplicated": 0, "reordered": 0, "unexpected": 0}
    index = {h: i for i, h in enumerate(source)}
    if len(index) != len(source):
        raise ValueError(f"the source holds {len(source) - len(index)} records twice: it cannot be checked by hash")
    seen = bytearray(len(source))
    duplicated = reordered = unexpected = 0
    highest = -1
    for h in target:
        i = index.get(h)
        if i is None:
            unexpected += 1
        elif seen[i]:
            duplicated += 1
        else:
            seen[i] = 1
            if i < highest:
                reordered += 1
            else:
                highest = i
    lost = len(source) - sum(seen)
    return {
        "records": len(source),
        "lost": lost,
        "duplicated": duplicated,
        "reordered": reordered,
        "unexpected": unexpected,
    }

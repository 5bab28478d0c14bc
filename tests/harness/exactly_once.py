"""What exactly-once tests on real Kafka share: counting a copy's faults record by record, the target's view of
transactions (its last stable offset against its log end), a transactional.id's coordinator, and the raw batches
of a partition's log as the broker stored them.

Why independent tools: the code under test speaks the transaction protocol itself (mm2py/wire/transactions.py),
so what a test believes about transactions comes from elsewhere: kafka-python's admin client for
DescribeTransactions, librdkafka for offsets per isolation level, and the broker's own segment files, parsed here
(producer ids, control batches and their markers).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.harness.kafka_harness import Record, consumer_config
from tests.harness.real_kafka import KafkaCluster


def content(r: Record) -> tuple[object, ...]:
    """What a copy must keep of a record: partition, key, value, headers (in order), timestamp."""
    return (r.partition, r.key, r.value, tuple(r.headers), r.timestamp)


def account(source: Sequence[Hashable], target: Sequence[Hashable]) -> dict[str, int]:
    """Lost, duplicated, extra (never in the source) and reordered records of one partition's copy.

    A target record is reordered when it arrives after a record that followed it in the source; a duplicate is
    counted once as duplicated, not again as reordered."""
    want, got = Counter(source), Counter(target)
    surplus = got - want
    position: dict[Hashable, int] = {}
    for i, c in enumerate(source):
        position.setdefault(c, i)
    seen: set[Hashable] = set()
    reordered, highest = 0, -1
    for c in target:
        if c not in position or c in seen:
            continue
        seen.add(c)
        reordered += position[c] < highest
        highest = max(highest, position[c])
    return {
        "lost": sum((want - got).values()),
        "duplicated": sum(n for c, n in surplus.items() if c in want),
        "extra": sum(n for c, n in surplus.items() if c not in want),
        "reordered": reordered,
    }


def copy_faults(source: list[Record], target: list[Record]) -> dict[str, int]:
    """:func:`account` summed over the partitions of a copy, plus the record counts of both sides."""
    totals = {"source": len(source), "target": len(target), "lost": 0, "duplicated": 0, "extra": 0, "reordered": 0}
    for p in sorted({r.partition for r in source} | {r.partition for r in target}):
        counted = account(
            [content(r) for r in source if r.partition == p], [content(r) for r in target if r.partition == p]
        )
        for key, n in counted.items():
            totals[key] += n
    return totals


class TargetOffsets:
    """A topic's end offsets per isolation level: the log end (read_uncommitted) and the last stable offset
    (read_committed). Records between the two belong to a transaction that is still open."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._uncommitted = Consumer(consumer_config(bootstrap, **{"isolation.level": "read_uncommitted"}))
        self._committed = Consumer(consumer_config(bootstrap, **{"isolation.level": "read_committed"}))
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def _ends(self, consumer: Consumer) -> list[int]:
        try:
            return [consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in self._partitions]
        except KafkaException:  # the topic does not exist yet
            return [0] * len(self._partitions)

    def stable(self) -> int:
        """Sum of the last stable offsets: what read_committed readers can see (records and markers)."""
        return sum(self._ends(self._committed))

    def open_records(self) -> int:
        """Offsets past the last stable offset, summed: the open transactions' records."""
        return sum(e - s for e, s in zip(self._ends(self._uncommitted), self._ends(self._committed), strict=True))

    def __enter__(self) -> TargetOffsets:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._uncommitted.close()
        self._committed.close()


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[tuple[str, int]]


class TransactionDescriber:
    """DescribeTransactions at each id's coordinator, through one kafka-python admin client (a new client costs
    a bootstrap and an ApiVersions round; a test that polls for a transaction state cannot afford that)."""

    def __init__(self, bootstrap: str) -> None:
        from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

        self._admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)

    def describe(self, transactional_ids: Sequence[str]) -> dict[str, Transaction]:
        """The ids' transactions; ids unknown to the cluster, or whose coordinator is not ready, are left out."""
        from kafka import errors  # type: ignore[import-untyped]

        not_known = (
            errors.TransactionalIdNotFoundError,
            errors.CoordinatorNotAvailableError,
            errors.NotCoordinatorError,
            errors.CoordinatorLoadInProgressError,
        )

        out: dict[str, Transaction] = {}
        for tid in transactional_ids:
            try:
                described = self._admin.describe_transactions([tid])[tid]
            except not_known:
                continue
            out[tid] = Transaction(
                tid,
                described.coordinator_id,
                described.state.name,
                described.producer_id,
                described.producer_epoch,
                frozenset((tp.topic, tp.partition) for tp in described.topic_partitions),
            )
        return out

    def __enter__(self) -> TransactionDescriber:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._admin.close()


def describe_transactions(bootstrap: str, transactional_ids: Sequence[str]) -> dict[str, Transaction]:
    """:meth:`TransactionDescriber.describe` once."""
    with TransactionDescriber(bootstrap) as describer:
        return describer.describe(transactional_ids)


def transaction_state_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of an id: Utils.abs(String.hashCode()) % partitions, as Kafka's
    TransactionStateManager.partitionFor computes it; its leader is the id's coordinator."""
    h = 0
    for unit in _utf16_units(transactional_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # Kafka's RecordBatch v2 header, 61 bytes
_CONTROL = {0: "ABORT", 1: "COMMIT"}


def log_batches(cluster: KafkaCluster, node_id: int, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record batch of ``topic``-``partition`` as ``node_id`` stored it in its segment files (the on-disk
    format is the wire format of RecordBatch v2, read here with ``struct``, not with the code under test):
    ``base_offset``, ``count``, ``producer_id``, ``producer_epoch``, ``base_sequence``, ``transactional``,
    ``control`` and, for a control batch, its marker (``COMMIT`` or ``ABORT``)."""
    batches: list[dict[str, Any]] = []
    for segment in sorted((cluster.node(node_id).data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + _BATCH_HEADER.size <= len(data):
            (
                base,
                length,
                _leader_epoch,
                magic,
                _crc,
                attributes,
                _last_delta,
                _first_ts,
                _max_ts,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
            ) = _BATCH_HEADER.unpack_from(data, position)
            if length <= 0 or magic != 2:
                break  # the preallocated tail of an active segment
            batch = {
                "base_offset": base,
                "count": count,
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "base_sequence": base_sequence,
                "transactional": bool(attributes & 0x10),
                "control": bool(attributes & 0x20),
            }
            if batch["control"]:
                batch["marker"] = _control_type(data, position + _BATCH_HEADER.size)
            batches.append(batch)
            position += 12 + length  # baseOffset and batchLength are not counted in batchLength
    return batches


def _control_type(data: bytes, position: int) -> str:
    """The type of a control batch's one record: its key is (version int16, type int16)."""
    _length, position = _varint(data, position)
    position += 1  # attributes
    _timestamp_delta, position = _varint(data, position)
    _offset_delta, position = _varint(data, position)
    key_length, position = _varint(data, position)
    _version, kind = struct.unpack_from(">hh", data, position)
    assert key_length >= 4
    return _CONTROL.get(kind, f"type {kind}")


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zigzag varint, as Kafka's records encode lengths and deltas."""
    shift = result = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7

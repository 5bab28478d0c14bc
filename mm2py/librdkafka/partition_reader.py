"""Reading partitions from given offsets to their end: the one reader behind every driver-side read of a
topic (MM2's internal topics, lag's record ages, verify's record-by-record comparison).

The end of a partition is where the consumer reports partition EOF, i.e. the high watermark of its own
fetch - the same end Connect's KafkaBasedLog reads to - so nothing depends on a separate ListOffsets answer
(which some brokers answer too low). Every read has a deadline, and a read that misses it names the cluster
and what it was for ("reading replication progress (mm2-offsets.dc1.internal) on target failed: ...").
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException

from mm2py.errors import KafkaOperationError, error_name
from mm2py.librdkafka.clients import new_consumer
from mm2py.librdkafka.error_mapping import wrap_kafka_error
from mm2py.librdkafka.principals import principal_of
from mm2py.mirror.topic_partition import TopicPartition

_BATCH = 10_000
# consume() waits until it has a full batch or this long: short, so the end of a small topic costs little.
_WAIT_S = 0.05


class PartitionReader:
    """Reads ``starts`` (topic, partition) -> first offset on cluster ``alias``, forward, to each end.

    A partition counts as at its end when the consumer reports EOF for it, and as not at its end again when
    a record arrives after that. Records come in offset order per partition. ``settings`` are the consumer's
    (group.id, isolation.level, ...); this reader adds partition EOF and turns auto commit off, since a reader
    must not leave committed offsets behind that MM2 would then checkpoint.
    """

    def __init__(
        self,
        alias: str,
        settings: Mapping[str, str],
        starts: Mapping[TopicPartition, int] | None = None,
        *,
        purpose: str,
        timeout_s: float = 30.0,
    ) -> None:
        self.alias = alias
        self.purpose = purpose
        self.operation = purpose
        self.timeout_s = timeout_s
        self._positions: dict[TopicPartition, int] = {}
        self._open: set[TopicPartition] = set()  # partitions not at their end, nor stopped
        self._stopped: set[TopicPartition] = set()
        self.principal = principal_of(settings)
        self._consumer: Any = new_consumer({**settings, "enable.partition.eof": "true", "enable.auto.commit": "false"})
        if starts:
            self.assign(starts)

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        """Read these partitions from these offsets (``OFFSET_BEGINNING`` for a partition's start)."""
        self._positions = dict(starts)
        self._open = set(starts)
        topics = ", ".join(sorted({t for t, _ in starts}))
        self.operation = f"{self.purpose} ({topics})" if topics else self.purpose
        self._consumer.assign([confluent_kafka.TopicPartition(t, p, o) for (t, p), o in starts.items()])

    def topic_partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic``; none when it does not exist (this metadata request creates nothing)."""
        try:
            metadata = self._consumer.list_topics(topic, timeout=self.timeout_s)
        except KafkaException as exc:
            raise wrap_kafka_error(self.alias, f"{self.purpose} ({topic})", exc) from None
        info = metadata.topics.get(topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return []
        return sorted(info.partitions)

    def __enter__(self) -> PartitionReader:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def at_end(self) -> bool:
        """Every partition reached its end (or was stopped)."""
        return not self._open

    def records(self) -> Iterator[Any]:
        """Every record up to the end of every partition not stopped; the whole read must finish within
        ``timeout_s``. A partition stopped while its records are being yielded yields no more."""
        deadline = time.monotonic() + self.timeout_s
        while batch := self.fetch(deadline):
            for msg in batch:
                if (msg.topic(), msg.partition()) not in self._stopped:
                    yield msg

    def fetch(self, deadline: float) -> list[Any]:
        """The next records (confluent-kafka Messages): at least one, unless every partition is at its end.

        Raises KafkaOperationError when ``deadline`` (``time.monotonic()``) passes first, or on a read error.
        """
        while self._open:
            if time.monotonic() > deadline:
                raise KafkaOperationError(
                    self.alias, self.operation, f"did not reach the end within {self.timeout_s:.0f} s ({self._where()})"
                )
            batch = []
            for msg in self._consumer.consume(num_messages=_BATCH, timeout=_WAIT_S):
                tp = (msg.topic() or "", msg.partition() or 0)
                if tp in self._stopped:
                    continue  # fetched before it was stopped
                err = msg.error()
                if err is None:
                    self._open.add(tp)
                    self._positions[tp] = msg.offset() + 1
                    batch.append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._open.discard(tp)
                elif err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    # librdkafka looks the group.id's coordinator up although a reader never commits: a principal
                    # without rights on that group reads all the same (Java's KafkaBasedLog has no group at all).
                    continue
                else:
                    raise KafkaOperationError(
                        self.alias, self.operation, err.str(), code=error_name(err), principal=self.principal
                    )
            if batch:
                return batch
        return []

    def stop(self, topic: str, partition: int) -> None:
        """Read no more of this partition (e.g. its first record was all the caller wanted)."""
        tp = (topic, partition)
        self._stopped.add(tp)
        self._open.discard(tp)
        self._consumer.pause([confluent_kafka.TopicPartition(topic, partition)])

    def _where(self) -> str:
        def position(tp: TopicPartition) -> str:
            offset = self._positions[tp]
            return f"offset {offset}" if offset >= 0 else "its start"

        return ", ".join(f"{t}-{p} at {position((t, p))}" for t, p in sorted(self._open))

    def close(self) -> None:
        self._consumer.close()


def read_partitions(
    alias: str,
    settings: Mapping[str, str],
    starts: Mapping[TopicPartition, int],
    *,
    purpose: str,
    timeout_s: float = 30.0,
) -> Iterator[Any]:
    """Every record from ``starts`` to the end of each partition (see PartitionReader)."""
    with PartitionReader(alias, settings, starts, purpose=purpose, timeout_s=timeout_s) as reader:
        yield from reader.records()


def internal_topic_settings(alias: str, consumer_settings: Mapping[str, str]) -> dict[str, str]:
    """How MM2's internal topics (progress, offset syncs, checkpoints, heartbeats) are read: committed records
    only, as Connect's KafkaBasedLog reads them."""
    return {
        **consumer_settings,
        "group.id": f"mm2py-reader-{alias}",
        "fetch.wait.max.ms": "10",
        "isolation.level": "read_committed",
    }


def read_topic(
    alias: str, consumer_settings: Mapping[str, str], topic: str, *, purpose: str, timeout_s: float = 30.0
) -> Iterator[Any]:
    """Every record of ``topic`` on cluster ``alias``, per partition in offset order; nothing if it does not exist
    (read as :func:`internal_topic_settings` says): a tail's first read."""
    settings = internal_topic_settings(alias, consumer_settings)
    yield from TopicTail(alias, settings, [topic], purpose=purpose, timeout_s=timeout_s).new_records()


class TopicTail:
    """Topics read from their start once and then only what came after: what a continuous run reads again and
    again (its checkpoints read the offset syncs and the progress every ``emit.checkpoints.interval.seconds``),
    as MM2 keeps reading its internal topics through a KafkaBasedLog that stays open. Reading them whole each time
    would cost more the longer the flow runs. Partitions added meanwhile are read from their start."""

    def __init__(
        self, alias: str, settings: Mapping[str, str], topics: list[str], *, purpose: str, timeout_s: float = 30.0
    ) -> None:
        self.alias = alias
        self.settings = dict(settings)
        self.topics = topics
        self.purpose = purpose
        self.timeout_s = timeout_s
        self._next: dict[TopicPartition, int] = {}  # the next offset to read of each partition read so far
        self.records_read = 0

    def new_records(self) -> Iterator[Any]:
        """The records written since the last call (every record, the first time), per partition in offset
        order. A read that fails part way leaves what it read read."""
        with PartitionReader(self.alias, self.settings, purpose=self.purpose, timeout_s=self.timeout_s) as reader:
            starts = {
                (topic, p): self._next.get((topic, p), OFFSET_BEGINNING)
                for topic in self.topics
                for p in reader.topic_partitions(topic)
            }
            if not starts:
                return
            reader.assign(starts)
            for msg in reader.records():
                self._next[(msg.topic() or "", msg.partition() or 0)] = msg.offset() + 1
                self.records_read += 1
                yield msg

"""Records that say where they come from, and a reader that counts, one by one, what a copy lost, duplicated or
reordered.

Why: a merge of several sources into one topic interleaves their records, and an at-least-once copy that was
interrupted writes some of them twice; comparing record lists cannot tell a duplicate from a reordering, nor
say which source lost what. Each record here carries ``<dc>/<partition>/<sequence>`` as its key (and at the
start of its value): sequences are dense from 0 per source partition and written in order by an idempotent
producer, so the source holds exactly sequences ``0..count-1`` of each partition, in order, and the target is
checked against that alone.

Counting on the target, per (dc, partition) and in the target's offset order:

- *duplicated*: a sequence seen before (an at-least-once re-copy);
- *reordered*: a sequence seen for the first time after a higher one of the same source partition;
- *lost*: a sequence below the produced count never seen;
- *misplaced*: a record in another target partition than its source partition (MM2 keeps partition numbers),
  or one whose key is not an identity at all.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.harness.kafka_harness import consumer_config

TICK_S = 0.01  # the steady load hands over rate * TICK_S records every tick
PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,  # no duplicate and no reordering at the source, whatever the retries
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "queue.buffering.max.kbytes": 262_144,
    "compression.type": "none",
}

Stream = tuple[str, int]  # (dc, source partition)


def identity(dc: str, partition: int, seq: int) -> bytes:
    return f"{dc}/{partition}/{seq}".encode()


def parse_identity(key: bytes | None) -> tuple[str, int, int] | None:
    try:
        dc, partition, seq = (key or b"").decode().split("/")
        return dc, int(partition), int(seq)
    except ValueError:
        return None


class SourceLoad:
    """Writes identified records into ``topic`` of one source cluster ``dc``, each partition in turn."""

    def __init__(self, dc: str, bootstrap: str, topic: str, partitions: int, value_size: int) -> None:
        self.dc, self.topic, self.value_size = dc, topic, value_size
        self.counts = [0] * partitions  # the next sequence of each partition
        self.failures: list[str] = []
        self._filler = os.urandom(value_size)
        self._producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.failures.append(err.str())

    def send(self, partition: int) -> None:
        key = identity(self.dc, partition, self.counts[partition])
        value = key + b"|" + self._filler[: max(0, self.value_size - len(key) - 1)]
        while True:
            try:
                self._producer.produce(self.topic, value, key, partition, on_delivery=self._on_delivery)
                break
            except BufferError:
                self._producer.poll(0.05)
        self.counts[partition] += 1

    def bulk(self, per_partition: int) -> None:
        """``per_partition`` records into every partition, acknowledged before it returns."""
        for i in range(per_partition):
            for partition in range(len(self.counts)):
                self.send(partition)
            if i % 200 == 0:
                self._producer.poll(0)
        self.flush()

    def flush(self, timeout: float = 120.0) -> None:
        left = self._producer.flush(timeout)
        if left or self.failures:
            raise RuntimeError(f"{self.dc}: {left} records unacknowledged, failures {self.failures[:3]}")

    def start_steady(self, rate: int) -> None:
        """From now on about ``rate`` records/s (all partitions together) in a thread, until ``stop_steady``."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._steady, args=(rate,), name=f"load {self.dc}", daemon=True)
        self._thread.start()

    def _steady(self, rate: int) -> None:
        per_tick = max(1, round(rate * TICK_S))
        started, tick, partition = time.monotonic(), 0, 0
        while not self._stop.is_set():
            for _ in range(per_tick):
                self.send(partition)
                partition = (partition + 1) % len(self.counts)
            self._producer.poll(0)
            tick += 1
            # Paced by the clock, not by sleeps of a fixed length: a late tick is caught up at once.
            self._stop.wait(max(0.0, started + tick * TICK_S - time.monotonic()))  # pacing, not synchronisation

    def stop_steady(self) -> None:
        """Stop the steady load; returns once everything it produced is acknowledged (``counts`` are final)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        self.flush()

    def expected(self) -> dict[Stream, int]:
        return {(self.dc, p): count for p, count in enumerate(self.counts)}


@dataclass
class _Seen:
    """One source partition as seen on the target so far."""

    seen: bytearray = field(default_factory=bytearray)
    distinct: int = 0
    highest: int = -1  # the highest sequence seen
    duplicated: int = 0
    reordered: int = 0
    duplicates: tuple[int, int] = (-1, -1)  # the lowest and highest sequence seen more than once

    def add(self, seq: int) -> None:
        if seq >= len(self.seen):
            self.seen.extend(bytes(max(seq + 1 - len(self.seen), len(self.seen))))
        if self.seen[seq]:
            self.duplicated += 1
            low, high = self.duplicates
            self.duplicates = (seq if low < 0 else min(low, seq), max(high, seq))
            return
        self.seen[seq] = 1
        self.distinct += 1
        if seq < self.highest:
            self.reordered += 1
        self.highest = max(self.highest, seq)

    def below(self, count: int) -> int:
        """Distinct sequences seen below ``count``."""
        return self.distinct - sum(self.seen[count:])


class TargetCheck:
    """Reads the merged topic on the target from its start, record by record, keeping the counts above."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.records = 0
        self.misplaced = 0
        self.streams: dict[Stream, _Seen] = {}
        self.positions = dict.fromkeys(range(partitions), 0)
        self._consumer = Consumer(consumer_config(bootstrap, **{"enable.partition.eof": True}))
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def close(self) -> None:
        self._consumer.close()

    def read_available(self, timeout: float = 60.0) -> int:
        """Read until every partition reached its end (as it was when reached); returns the records read."""
        before, pending = self.records, set(range(self.partitions))
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in self._consumer.consume(num_messages=10_000, timeout=0.2):
                err = msg.error()
                if err is None:
                    self._add(msg.partition(), msg.offset(), msg.key())
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                elif err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaException(err)
        return self.records - before

    def read_to_end(self, bootstrap_timeout: float = 120.0) -> None:
        """Read up to the end offsets the target has now (the copy is over)."""
        ends = {
            p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
            for p in range(self.partitions)
        }
        deadline = time.monotonic() + bootstrap_timeout
        while any(self.positions[p] < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: read to {self.positions}, not to the ends {ends}")
            self.read_available(timeout=5.0)

    def _add(self, partition: int, offset: int, key: bytes | None) -> None:
        self.records += 1
        self.positions[partition] = offset + 1
        found = parse_identity(key)
        if found is None or found[1] != partition:
            self.misplaced += 1
            return
        dc, source_partition, seq = found
        self.streams.setdefault((dc, source_partition), _Seen()).add(seq)

    def complete(self, expected: dict[Stream, int]) -> bool:
        """Every expected record is on the target (duplicates allowed)."""
        return all(self.streams.get(s, _Seen()).below(n) == n for s, n in expected.items())

    def counts(self, expected: dict[Stream, int]) -> dict[str, int]:
        streams = [self.streams.get(s, _Seen()) for s in expected]
        seen_below = sum(st.below(n) for st, n in zip(streams, expected.values(), strict=True))
        return {
            "expected": sum(expected.values()),
            "target_records": self.records,
            "lost": sum(expected.values()) - seen_below,
            "duplicated": sum(st.duplicated for st in self.streams.values()),
            "reordered": sum(st.reordered for st in self.streams.values()),
            "unexpected": sum(st.distinct for st in self.streams.values()) - seen_below + self.misplaced,
        }

    def duplicate_runs(self) -> dict[Stream, tuple[int, int, int]]:
        """(lowest, highest sequence, copies too many) of every source partition with duplicates: a re-copy
        from recorded progress is one run, ``highest - lowest + 1 == copies`` (each record once more)."""
        return {s: (*st.duplicates, st.duplicated) for s, st in sorted(self.streams.items()) if st.duplicated}

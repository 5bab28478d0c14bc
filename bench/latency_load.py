"""The load and the measuring of ``bench.latency``: records at a steady rate into each source, and each
record's latency, source timestamp -> read on the target, kept by (source, sequence number).

Why a sequence number in the value rather than a count: every record is checked one by one (a record that never
arrives is named as missing, not hidden in an average), and the windows of the report are by send time, so a slow
first window after an idle spell shows as such instead of being averaged away.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

VALUE_SIZE = 100
TICK_S = 0.01  # the load producer hands over rate * TICK_S records every tick

Seq = tuple[int, int]  # (source index, sequence number)


def value_of(source: int, seq: int, size: int = VALUE_SIZE) -> bytes:
    return f"{source:02d}{seq:010d}".encode().ljust(size, b".")


def seq_of(value: bytes) -> Seq:
    return int(value[:2]), int(value[2:12])


class Arrivals:
    """Reads the remote topics from their start in a thread; keeps, per record, its latency in ms (arrival minus
    CreateTime), its CreateTime and its arrival time (wall clock, ms), and how often it arrived."""

    def __init__(self, bootstrap: str, topics: Sequence[str], partitions: int) -> None:
        self.latency_ms: dict[Seq, float] = {}
        self.created_ms: dict[Seq, float] = {}
        self.seen_ms: dict[Seq, float] = {}
        self.duplicates = 0
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-latency",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.min.bytes": 1,
            }
        )
        self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, name="arrivals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            # What is buffered now, without waiting; else wait for the next record. consume(n, timeout) returns
            # only when n records are buffered or the timeout has passed, which would stamp a record's arrival up
            # to that timeout late (confluent-kafka-python issue 407).
            batch = self._consumer.consume(10_000, timeout=0)
            if not batch:
                first = self._consumer.poll(0.1)
                batch = [first] if first is not None else []
            for message in batch:
                if message.error() is not None:
                    continue
                now_ms = time.time() * 1000
                seq = seq_of(message.value() or b"")
                if seq in self.seen_ms:
                    self.duplicates += 1
                    continue
                created = float(message.timestamp()[1])
                self.latency_ms[seq] = now_ms - created
                self.created_ms[seq] = created
                self.seen_ms[seq] = now_ms

    def count(self) -> int:
        return len(self.seen_ms)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


@dataclass
class Load:
    """One source's load producer: sequence numbers ``next_seq``.. at ``rate`` records/s over ``partitions``."""

    source: int
    bootstrap: str
    topic: str
    partitions: int
    rate: int
    linger_ms: int
    value_bytes: int = VALUE_SIZE
    next_seq: int = 0

    def __post_init__(self) -> None:
        self.acked_ms: dict[Seq, float] = {}  # when the source acknowledged each record (wall clock, ms)
        self.ack_delay_ms: dict[Seq, float] = {}  # CreateTime -> acknowledged by the source
        self.failed = 0

        def on_delivery(err: Any, message: Any) -> None:
            if err is None:
                seq, now_ms = seq_of(message.value()), time.time() * 1000
                self.acked_ms[seq] = now_ms
                self.ack_delay_ms[seq] = now_ms - message.timestamp()[1]
            else:
                self.failed += 1

        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": self.linger_ms,
                "acks": "all",
                "on_delivery": on_delivery,
            }
        )

    def one_per_partition(self) -> range:
        """One record per partition (the warm-up): every partition exists on the target once they arrived."""
        return self.produce(self.partitions)

    def produce(self, count: int) -> range:
        first = self.next_seq
        for _ in range(count):
            self.producer.produce(
                self.topic,
                value_of(self.source, self.next_seq, self.value_bytes),
                partition=self.next_seq % self.partitions,
            )
            self.next_seq += 1
        self.producer.poll(0)
        return range(first, self.next_seq)

    def flush(self) -> None:
        if self.producer.flush(60) != 0 or self.failed:
            raise RuntimeError(f"source {self.source}: the load producer could not deliver every record")


def produce_steadily(loads: Sequence[Load], seconds: float) -> dict[int, range]:
    """Every load at its rate for ``seconds``, paced by the clock (a late tick is caught up at once); returns the
    sequence numbers each source produced."""
    firsts = {load.source: load.next_seq for load in loads}
    started = time.monotonic()
    tick = 0
    while time.monotonic() - started < seconds:
        for load in loads:
            load.produce(max(1, round(load.rate * TICK_S)))
        tick += 1
        delay = started + tick * TICK_S - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing of the load, not a synchronisation
    for load in loads:
        load.flush()
    return {load.source: range(firsts[load.source], load.next_seq) for load in loads}


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def windows(
    arrivals: Arrivals,
    produced: dict[int, range],
    start_ms: float,
    window_s: float,
    loads: Sequence[Load] = (),
) -> list[dict[str, Any]]:
    """p50/p99 and the missing records per window of send time (CreateTime), from ``start_ms``; with the ``loads``
    that produced them, also each window's p99 of the source's acknowledgement and of the copier's share after it,
    so that a slow window says whether the source or the copier was slow in it."""
    by_window: dict[int, list[float]] = {}
    acks: dict[int, list[float]] = {}
    hops: dict[int, list[float]] = {}
    missing: dict[int, int] = {}
    by_source = {load.source: load for load in loads}
    for source, seqs in produced.items():
        load = by_source.get(source)
        for seq in seqs:
            key = (source, seq)
            if key in arrivals.latency_ms:
                index = max(0, int((arrivals.created_ms[key] - start_ms) // (window_s * 1000)))
                by_window.setdefault(index, []).append(arrivals.latency_ms[key])
                if load is not None and key in load.acked_ms:
                    acks.setdefault(index, []).append(load.ack_delay_ms[key])
                    hops.setdefault(index, []).append(arrivals.seen_ms[key] - load.acked_ms[key])
            else:
                missing[-1] = missing.get(-1, 0) + 1  # send time unknown: never read on the target
    rows: list[dict[str, Any]] = []
    for index, values in sorted(by_window.items()):
        row = {
            "window": index,
            "from_s": index * window_s,
            "records": len(values),
            "p50_ms": round(percentile(values, 0.50), 1),
            "p99_ms": round(percentile(values, 0.99), 1),
            "max_ms": round(max(values), 1),
        }
        if index in acks:
            row["source_ack_p99_ms"] = round(percentile(acks[index], 0.99), 1)
            row["hop_p99_ms"] = round(percentile(hops[index], 0.99), 1)
        rows.append(row)
    if missing:
        rows.append({"window": "missing", "records": missing[-1]})
    return rows

"""The steady-state copy rate: the slope of the target's end offsets from 10% to 90% of the copy.

Why from outside: start-up (Spark, JVM, connections) and the tail of a copy say nothing about how fast the
copy path moves records once it runs, and each contender would measure its own middle differently. A
sampler thread reads the remote topic's end offsets on the target every ``interval_s``; the slope between
the first sample at or above 10% of the records and the first at or above 90% is the same measure for all.
tansu's ListOffsets answers the last batch's base offset + 1 (test-broker.md), at most one batch short,
which is noise at these sizes.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

from confluent_kafka import Consumer, KafkaException, TopicPartition


class EndOffsetSampler:
    """``with EndOffsetSampler(target, topic, partitions, total) as s: ...``; then ``s.slope()``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        total: int,
        interval_s: float = 0.1,
        isolation: str = "read_committed",
    ) -> None:
        self.bootstrap, self.topic, self.partitions, self.total = bootstrap, topic, partitions, total
        self.interval_s = interval_s
        self.isolation = isolation  # read_committed (librdkafka's default): the last stable offset
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="end-offset-sampler", daemon=True)

    def __enter__(self) -> EndOffsetSampler:
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "bench-sampler", "isolation.level": self.isolation}
        )
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    ends = sum(
                        consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=2, cached=False)[1]
                        for p in range(self.partitions)
                    )
                except KafkaException:
                    continue  # the remote topic does not exist yet
                self.samples.append((time.time(), ends))
                if ends >= self.total:
                    return
        finally:
            consumer.close()

    def slope(self) -> dict[str, float | None]:
        """records/s between 10% and 90% of ``total``, and the wall times of those two points."""

        low, high = first_at(self.samples, 0.1 * self.total), first_at(self.samples, 0.9 * self.total)
        if low is None or high is None or high[0] <= low[0]:
            return {"steady_records_per_s": None, "t10_wall": None, "t90_wall": None}
        return {
            "steady_records_per_s": (high[1] - low[1]) / (high[0] - low[0]),
            "t10_wall": low[0],
            "t90_wall": high[0],
        }


def first_at(samples: list[tuple[float, int]], count: float) -> tuple[float, int] | None:
    """The first (wall time, end offsets) sample at or above ``count`` records."""
    return next(((t, n) for t, n in samples if n >= count), None)


def visible_rate(
    written: list[tuple[float, int]], committed: list[tuple[float, int]], total: int
) -> dict[str, float | None]:
    """records/s from the moment 10% of ``total`` were written (log end) to the moment 90% were readable
    (read_committed end).

    Why beside the slope: a transactional copy makes records readable in steps, one per commit. A copy that commits
    only a few times (2,000,000 records in about two seconds, a commit a second) has no slope between 10% and 90%
    of its read_committed end: both points can fall on one step (no rate at all) or on two steps close together (a
    rate far above what was written). Counting from the writes to their being readable is defined for any number of
    commits, and charges a copy for the time its records wait in open transactions, which is what a read_committed
    consumer of the target sees. Without transactions the two ends are the same and so is the rate.
    """
    low, high = first_at(written, 0.1 * total), first_at(committed, 0.9 * total)
    if low is None or high is None or high[0] <= low[0]:
        return {"visible_records_per_s": None}
    return {"visible_records_per_s": (high[1] - low[1]) / (high[0] - low[0])}

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

        def first_at(fraction: float) -> tuple[float, int] | None:
            return next(((t, n) for t, n in self.samples if n >= fraction * self.total), None)

        low, high = first_at(0.1), first_at(0.9)
        if low is None or high is None or high[0] <= low[0]:
            return {"steady_records_per_s": None, "t10_wall": None, "t90_wall": None}
        return {
            "steady_records_per_s": (high[1] - low[1]) / (high[0] - low[0]),
            "t10_wall": low[0],
            "t90_wall": high[0],
        }

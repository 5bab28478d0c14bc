"""What a copy task measures (executor side), shipped to the driver with each CopyResult.

Kept apart from the Prometheus collector (:mod:`mm2py.metrics.registry`) and its HTTP server
(:mod:`mm2py.metrics.server`): executors import this module only, so a copy task never loads an HTTP server or
the Prometheus client. MM2's per-partition metrics (record age, replication latency) are folded here from
per-batch aggregates, so the copy loop keeps four numbers per batch instead of one age per record.

May import: the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartitionMeasurement:
    """What one copied offset range measured (made on an executor, shipped to the driver: plain and picklable).

    ``topic`` is the source topic and ``remote_topic`` its name on the target. Ages and latencies are in ms
    over the range's ``records``: ``_min``, ``_max`` and ``_sum`` of all of them, ``_last`` of the last one.
    """

    source: str
    target: str
    topic: str
    remote_topic: str
    partition: int
    records: int
    bytes: int
    age_ms_min: float = math.nan
    age_ms_max: float = math.nan
    age_ms_sum: float = 0.0
    age_ms_last: float = math.nan
    latency_ms_min: float = math.nan
    latency_ms_max: float = math.nan
    latency_ms_sum: float = 0.0
    latency_ms_last: float = math.nan
    # how long the range's copy waited for the flow's throughput limit (a task's wait split over its ranges)
    throttled_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.records < 0 or self.bytes < 0:
            raise ValueError(f"negative count in {self}")


@dataclass(frozen=True)
class CheckpointMeasurement:
    """Checkpoints of one group and downstream partition acknowledged by the target, with their latency in ms
    (acknowledgement time minus the time the group offsets were listed, as MM2 measures it)."""

    source: str
    target: str
    group: str
    topic: str
    partition: int
    latency_ms: float


@dataclass
class RangeMeasurer:
    """Builds a PartitionMeasurement on the executor from per-batch aggregates: the ages (or latencies) of n
    records read (or acknowledged) at one moment follow from their timestamps' min, max, sum and last, so the
    copy loop keeps four numbers per batch instead of one age per record.
    """

    records: int = 0
    bytes: int = 0
    age: list[float] = field(default_factory=lambda: [math.inf, -math.inf, 0.0, math.nan])  # min, max, sum, last
    latency: list[float] = field(default_factory=lambda: [math.inf, -math.inf, 0.0, math.nan])
    throttled_ms: float = 0.0

    def read(
        self, now_ms: float, count: int, ts_min: float, ts_max: float, ts_sum: float, ts_last: float, value_bytes: int
    ) -> None:
        """``count`` records with these timestamps were read at ``now_ms``."""
        self.records += count
        self.bytes += value_bytes
        _fold(self.age, now_ms, count, ts_min, ts_max, ts_sum, ts_last)

    def acknowledged(
        self, now_ms: float, count: int, ts_min: float, ts_max: float, ts_sum: float, ts_last: float
    ) -> None:
        """The target acknowledged ``count`` records with these timestamps at ``now_ms``."""
        _fold(self.latency, now_ms, count, ts_min, ts_max, ts_sum, ts_last)

    def empty(self) -> bool:
        """Nothing read, acknowledged or waited for since this measurer started."""
        return not self.records and self.latency[0] == math.inf and not self.throttled_ms

    def measurement(
        self, source: str, target: str, topic: str, remote_topic: str, partition: int
    ) -> PartitionMeasurement:
        a, lat = _finite(self.age), _finite(self.latency)
        return PartitionMeasurement(
            source,
            target,
            topic,
            remote_topic,
            partition,
            self.records,
            self.bytes,
            a[0],
            a[1],
            a[2],
            a[3],
            lat[0],
            lat[1],
            lat[2],
            lat[3],
            self.throttled_ms,
        )


def _fold(
    acc: list[float], now_ms: float, count: int, ts_min: float, ts_max: float, ts_sum: float, ts_last: float
) -> None:
    if count <= 0:
        return
    acc[0] = min(acc[0], now_ms - ts_max)
    acc[1] = max(acc[1], now_ms - ts_min)
    acc[2] += count * now_ms - ts_sum
    acc[3] = now_ms - ts_last


def _finite(acc: list[float]) -> list[float]:
    return [
        acc[0] if math.isfinite(acc[0]) else math.nan,
        acc[1] if math.isfinite(acc[1]) else math.nan,
        acc[2],
        acc[3],
    ]

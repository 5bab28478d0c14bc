"""The batch path's at-least-once recording (executor/batch_results.py ProgressRecorder): the offset syncs of the
new records are acknowledged before the progress that covers them is written, and a failed sync write leaves the
progress unwritten. ``failover`` counts the records B holds past the progress from the syncs; progress past the
syncs would make its recovery point short (the unplanned-failover test caught that once, only when a kill landed
between the two writes: this pins the order without the kill)."""

from __future__ import annotations

from typing import Any

import pytest

from mm2py.errors import ReplicationError
from mm2py.executor import batch_results
from mm2py.executor.batch_results import BatchRange, Counted, ProgressRecorder
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue


def spec() -> CopySpec:
    return CopySpec(
        flow="dc1->target",
        source="dc1",
        target="target",
        consumer_settings={},
        producer_settings={},
        syncs_producer_settings={},
        target_consumer_settings={},
        syncs_topic="mm2-offset-syncs.target.internal",
        progress_topic="mm2-offsets.dc1.internal",
        offset_lag_max=100,
    )


class Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, syncs_fail: bool = False) -> None:
        self.order: list[str] = []
        self.syncs_fail = syncs_fail
        monkeypatch.setattr(batch_results, "queue_offset_syncs", self.queue_syncs)
        monkeypatch.setattr(batch_results, "flush_offset_syncs", self.flush_syncs)
        monkeypatch.setattr(batch_results, "cached_producer", lambda _s: self)
        monkeypatch.setattr(batch_results, "flush_producer", self.flush_progress)

    def queue_syncs(self, _spec: Any, rng: PartitionRange, runs: Any, _failures: Any, _state: Any) -> int:
        self.order.append(f"queue syncs {rng.partition}")
        return len(runs)

    def flush_syncs(self, _spec: Any, _failures: Any, _where: str) -> None:
        self.order.append("syncs acknowledged")
        if self.syncs_fail:
            raise ReplicationError("offset syncs not acknowledged")

    def produce(self, _topic: str, _value: bytes, _key: bytes, on_delivery: Any) -> None:
        self.order.append("queue progress")

    def flush_progress(self, *_args: Any) -> None:
        self.order.append("progress acknowledged")


def ranges() -> list[BatchRange]:
    return [
        BatchRange(PartitionRange("orders", p, "dc1.orders", 0, 300), FetchPartition("orders", p, 0, 300),
                   PartitionQueue("dc1.orders", p, f"partition={p}"))
        for p in range(2)
    ]  # fmt: skip


def counted(rs: list[BatchRange]) -> dict[int, Counted]:
    return {id(r): Counted(upstream=99, records=100, runs=[(0, 0, 100)]) for r in rs}


def test_the_syncs_are_acknowledged_before_the_progress_they_cover_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    rs = ranges()
    ProgressRecorder(spec(), rs, progress=True).record(counted(rs))
    assert calls.order == [
        "queue syncs 0",
        "queue syncs 1",
        "syncs acknowledged",
        "queue progress",
        "queue progress",
        "progress acknowledged",
    ]


def test_syncs_not_acknowledged_leave_the_progress_unwritten(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch, syncs_fail=True)
    rs = ranges()
    with pytest.raises(ReplicationError):
        ProgressRecorder(spec(), rs, progress=True).record(counted(rs))
    assert "queue progress" not in calls.order

"""What a run shows while it copies and when it ends, per flow (the live view, the summary, the metrics)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mm2py.executor.contract import CopyPath, CopyResult


@dataclass
class FlowStats:
    """What the live view and the summary show for one flow."""

    flow: str
    records: int = 0
    bytes: int = 0
    jobs: int = 0
    lag: int = 0
    started: float = field(default_factory=time.monotonic)
    last_rate: float = 0.0
    retries: int = 0
    lost: int = 0  # records that left the source before they were replicated, counted by this run
    last_mb_rate: float = 0.0
    held_by: str | None = None  # another run holds this flow's lease: nothing was copied
    path: CopyPath = field(default_factory=lambda: CopyPath("record"))  # as the plan decided it

    def add(self, results: list[CopyResult], seconds: float) -> None:
        records = sum(r.records for r in results)
        nbytes = sum(r.bytes for r in results)
        self.records += records
        self.bytes += nbytes
        self.jobs += 1
        if seconds > 0:
            self.last_rate = records / seconds
            self.last_mb_rate = nbytes / seconds / 1e6

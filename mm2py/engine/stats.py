"""What a run shows while it copies and when it ends, per flow (the live view, the summary, the metrics)."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from mm2py.executor.contract import CopyPath, CopyResult

RATE_WINDOW_S = 10.0  # the live view's rates while tasks follow: over the reports of the last seconds


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
    _window: collections.deque[tuple[float, int, int]] = field(default_factory=collections.deque, repr=False)

    def reported(self, records: int, nbytes: int) -> None:
        """A following task's report: what it copied since its last one (about a second)."""
        now = time.monotonic()
        self.records += records
        self.bytes += nbytes
        self._window.append((now, records, nbytes))
        while self._window and now - self._window[0][0] > RATE_WINDOW_S:
            self._window.popleft()
        span = max(now - self._window[0][0], 1.0) if self._window else 1.0
        self.last_rate = sum(r for _t, r, _b in self._window) / span
        self.last_mb_rate = sum(b for _t, _r, b in self._window) / span / 1e6

    def add(self, results: list[CopyResult], seconds: float) -> None:
        records = sum(r.records for r in results)
        nbytes = sum(r.bytes for r in results)
        self.records += records
        self.bytes += nbytes
        self.jobs += 1
        if seconds > 0:
            self.last_rate = records / seconds
            self.last_mb_rate = nbytes / seconds / 1e6

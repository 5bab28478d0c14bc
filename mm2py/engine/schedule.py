"""A small scheduler for a flow's periodic work (topic refresh, config sync, checkpoints, group sync).

MM2 runs each of these on its own interval in a scheduler thread per connector. mm2py runs them in the flow's
own thread between copy jobs, so they never race the plan or the positions a copy job uses; heartbeats, which
must not wait for a long job, have a thread of their own (``mm2py.control.heartbeats``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Periodic:
    """``action`` every ``interval_s`` seconds, first after ``first_after_s`` (MM2's first-run delays)."""

    name: str
    interval_s: float
    action: Callable[[], object]
    first_after_s: float = 0.0
    due: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.due = time.monotonic() + self.first_after_s


class Schedule:
    """The periodic jobs of one flow; ``run_due`` runs those whose time has come through ``runner``."""

    def __init__(self, jobs: list[Periodic], clock: Callable[[], float] = time.monotonic) -> None:
        self.jobs = jobs
        self._clock = clock

    def run_due(self, runner: Callable[[Callable[[], object]], object]) -> list[str]:
        """Run every due job (in the order given) with ``runner`` (e.g. a retrying wrapper); returns their names."""
        ran = []
        for job in self.jobs:
            now = self._clock()
            if now >= job.due:
                runner(job.action)
                job.due = now + job.interval_s
                ran.append(job.name)
        return ran

    def seconds_until_due(self) -> float:
        """How long until the next job is due (0 if one is due now; infinite without jobs)."""
        now = self._clock()
        return max(0.0, min((job.due - now for job in self.jobs), default=math.inf))

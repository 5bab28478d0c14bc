"""A copy task's share of its flow's ``mm2py.throughput.max.bytes.per.second`` (executor side).

Why a token bucket per task and not a broker quota: MirrorMaker 2 offers only broker quotas, which throttle by
delaying answers to a client id, so a migration's initial sync that saturates the link and the target needs an
operator with rights on both clusters. The flow's limit is split between its tasks in proportion to their
partitions (:meth:`mm2py.executor.contract.CopySpec.task_throughput`); within a task its partitions share the
bucket in the order the fetcher serves them. The bucket starts empty, so a task that starts (each round of a
one-shot run starts new ones) copies no burst above the limit, and it holds at most one second of the rate, so a
task that was idle resumes with no more than a second's worth at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MIN_WAIT_S = 0.01  # shorter waits are put off until they add up: a task copying small records sleeps in steps
STEP_S = 0.1  # a limited task fetches about this much of its rate per partition, so it waits in small steps
MIN_FETCH_BYTES = 64 * 1024


class Throttle:
    """A token bucket over bytes (``bytes_per_s`` <= 0: no limit). Not thread-safe: one per copy loop."""

    def __init__(self, bytes_per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = max(0.0, bytes_per_s)
        self.clock = clock
        self.tokens = 0.0  # empty: a new task earns its first bytes at the rate
        self.at = clock()
        self.waited_s = 0.0  # how long the task waited for the limit, all told

    @property
    def limited(self) -> bool:
        return self.rate > 0

    def fetch_bytes(self, usual: int) -> int:
        """How much to fetch from one partition at a time: ``usual``, or under a limit ``STEP_S`` of the rate (at
        least ``MIN_FETCH_BYTES``; a larger batch is still fetched whole), so that the copy reaches the target
        in steps of a tenth of a second rather than in bursts of several seconds' worth."""
        if not self.limited:
            return usual
        return min(usual, max(MIN_FETCH_BYTES, int(self.rate * STEP_S)))

    def took(self, nbytes: int) -> float:
        """``nbytes`` were copied; how long to wait before copying more (0: at once)."""
        if not self.limited:
            return 0.0
        now = self.clock()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate) - nbytes
        self.at = now
        return max(0.0, -self.tokens / self.rate)

    def hold(self, nbytes: int, sleep: Callable[[float], object] = time.sleep) -> float:
        """``nbytes`` are copied: wait, through ``sleep``, until the limit lets them through; the seconds waited
        (a wait under ``MIN_WAIT_S`` stays owed, and the next call waits it)."""
        delay = self.took(nbytes)
        if delay >= MIN_WAIT_S:
            sleep(delay)
            self.waited_s += delay
        return delay

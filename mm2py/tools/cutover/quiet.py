"""Waiting until the source's producers have stopped: end offsets unchanged for a quiet time.

Why end offsets: they are what a producer moves, and the only sign of one that needs no access to the
producers. The wait polls; it never sleeps for the whole quiet time, so it ends as soon as the last
partition has been still long enough, and names the partitions still moving when it gives up.
Pure logic over a function that lists end offsets, a clock and a wait, so it is tested without a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mm2py.errors import CheckFailed
from mm2py.mirror.topic_partition import TopicPartition


class QuietWatch:
    """The end offsets seen so far, and when each partition's end last changed.

    The first observation counts as a change of every partition: nothing tells how long they were still
    before the watch began, so a quiet time is always observed whole.
    """

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self.ends: dict[TopicPartition, int] = {}
        self.changed_at: dict[TopicPartition, float] = {}

    def observe(self, ends: Mapping[TopicPartition, int], now: float) -> None:
        for tp, end in ends.items():
            if self.ends.get(tp) != end:
                self.changed_at[tp] = now
            self.ends[tp] = end

    def quiet(self, now: float) -> bool:
        """Whether every partition seen has kept its end for the quiet time."""
        return bool(self.changed_at) and all(now - at >= self.quiet_s for at in self.changed_at.values())

    def moving(self, now: float) -> list[TopicPartition]:
        """Partitions whose end changed within the last quiet time (after the first observation)."""
        first = min(self.changed_at.values(), default=now)
        return sorted(tp for tp, at in self.changed_at.items() if at > first and now - at < self.quiet_s)


@dataclass(frozen=True)
class Quiet:
    """The outcome of a wait: how long it took and the ends the source settled at."""

    waited_s: float
    ends: Mapping[TopicPartition, int]


def wait_for_quiet(
    list_ends: Callable[[], Mapping[TopicPartition, int]],
    *,
    cluster: str,
    quiet_s: float,
    timeout_s: float,
    clock: Callable[[], float],
    wait: Callable[[float], object],
) -> Quiet:
    """Poll ``list_ends`` until every partition's end is unchanged for ``quiet_s``; CheckFailed naming the
    partitions still moving on ``cluster`` after ``timeout_s``."""
    watch = QuietWatch(quiet_s)
    started = clock()
    interval = min(1.0, max(0.05, quiet_s / 10))
    while True:
        now = clock()
        watch.observe(list_ends(), now)
        if watch.quiet(now):
            return Quiet(now - started, dict(watch.ends))
        if now - started >= timeout_s:
            moving = watch.moving(now) or sorted(watch.ends)
            named = ", ".join(f"{t}-{p}" for t, p in moving[:10]) + (" ..." if len(moving) > 10 else "")
            raise CheckFailed(
                f"producers are still writing on {cluster}: {len(moving)} partition(s) moved within the last "
                f"{quiet_s:g} s after waiting {timeout_s:g} s ({named}); stop them, or give --quiet-timeout more time"
            )
        wait(interval)

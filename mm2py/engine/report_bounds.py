"""Which positions a following task's report may set (driver side): within the range its generation was given.

Why: a report moves a partition's position, and the next generation starts there; a position beyond what was
copied would skip records for good. The reports arrive over HTTP (:mod:`mm2py.engine.task_control`) and the
run's token is their only proof, so the driver keeps its own bounds: a report names its generation, and each
partition of that generation may move from the range's start up to its end, and never beyond the source's end
offset (a following range has no end of its own: ``ranges.FOLLOW_END``). The end is the driver's own listing,
asked again (one ListOffsets for the partitions of a report, waited for at most ``LIST_WAIT_S``) only when a
position goes past the last one seen; a task's word on the source's end is not taken. Nothing else checks a
report's position: a copied range's result comes through Spark, not through this door.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mm2py.executor.contract import PartitionRange
from mm2py.metrics.measurement import PartitionMeasurement
from mm2py.mirror.topic_partition import TopicPartition

log = logging.getLogger(__name__)

LIST_WAIT_S = 1.0  # a task waits 2 s for its report's answer (executor/driver_link.py)
MAX_LISTINGS = 2  # listings in flight at once per flow; beyond, positions past the known end wait
ListEnds = Callable[[list[TopicPartition]], Mapping[TopicPartition, int]]


@dataclass(frozen=True)
class ReportRow:
    """One row of a following task's report, typed (``executor.driver_link.report_row`` makes it)."""

    tp: TopicPartition
    position: int
    records: int
    bytes: int
    source_end: int
    measurement: PartitionMeasurement | None
    failed: bool


def report_row(row: dict[str, Any]) -> ReportRow:
    """Raises ValueError, TypeError or KeyError for a row that is not one (the endpoint answers 400)."""
    measurement = row.get("measurement")
    return ReportRow(
        (str(row["topic"]), int(row["partition"])),
        int(row["position"]),
        int(row["records"]),
        int(row["bytes"]),
        int(row["source_end"]),
        PartitionMeasurement(**measurement) if measurement else None,
        bool(row.get("failure")),
    )


class ReportBounds:
    """The ranges of a flow's running generation, and the source ends the driver listed for them."""

    def __init__(self, flow: str, list_ends: ListEnds) -> None:
        self.flow = flow
        self._list_ends = list_ends  # the source's end offsets (high watermarks) of these partitions, now
        self._lock = threading.Lock()
        self.generation: int | None = None
        self._ranges: dict[TopicPartition, tuple[int, int]] = {}  # start, end
        self._ends: dict[TopicPartition, int] = {}  # listed by the driver
        self._told: set[tuple[int, TopicPartition | None]] = set()  # refusals logged (once per generation)
        self.refused = 0  # positions refused since the run started
        self._listings = 0  # listings in flight

    def start(self, generation: int, ranges: list[PartitionRange], ends: Mapping[TopicPartition, int]) -> None:
        """A new generation runs ``ranges``; ``ends`` is the driver's listing of the source's ends just before."""
        with self._lock:
            self.generation = generation
            self._ranges = {(r.topic, r.partition): (r.start, r.end) for r in ranges}
            self._ends = {tp: end for tp, end in ends.items() if end >= 0}

    def allowed(
        self, generation: int, reported: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int]
    ) -> set[TopicPartition]:
        """Which of ``reported`` (partition -> position) may be applied; each other one is logged once per
        generation and partition, and not applied. ``positions`` are the flow's positions now (a position may
        not go back)."""
        with self._lock:
            if generation != self.generation:
                why = f"generation {generation} is not the one running ({self.generation})"
                self._refuse(self.generation or 0, None, why)  # logged once per running generation
                return set()
            fits: dict[TopicPartition, int] = {}
            for tp, position in reported.items():
                reason = self._outside(tp, position, positions.get(tp))
                if reason is None:
                    fits[tp] = position
                else:
                    self._refuse(generation, tp, reason)
            beyond = sorted(tp for tp, position in fits.items() if position > self._ends.get(tp, -1))
        if beyond:
            listed = self._listed(beyond)
            with self._lock:
                for tp in beyond:
                    if tp not in listed:  # not confirmed in time: not applied now, the next report is checked
                        del fits[tp]
                    elif fits[tp] > listed[tp]:
                        self._refuse(generation, tp, f"{fits[tp]} is beyond the source's end offset {listed[tp]}")
                        del fits[tp]
        return set(fits)

    def _outside(self, tp: TopicPartition, position: int, now: int | None) -> str | None:
        bounds = self._ranges.get(tp)
        if bounds is None:
            return "the partition is not in this generation's ranges"
        start, end = bounds
        if not start <= position <= end:
            return f"{position} is outside the range [{start}, {end}] the task was given"
        if now is not None and position < now:
            return f"{position} is behind the position {now} already reported"
        return None

    def _listed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The source's ends of ``partitions`` listed now, or nothing if the listing does not answer within
        ``LIST_WAIT_S`` (a sick source must not hold the report: its task would count its driver as gone). The
        listing runs in a thread of its own and, when it answers late, still serves the next reports."""
        with self._lock:
            if self._listings >= MAX_LISTINGS:
                return {}
            self._listings += 1
        answer: dict[TopicPartition, int] = {}
        done = threading.Event()

        def listing() -> None:
            try:
                answer.update(self._list_ends(partitions))
            except Exception as exc:  # not confirmed: the task's next report is checked again
                log.debug("flow=%s: listing source ends to check a report failed: %s", self.flow, exc)
            finally:
                with self._lock:
                    self._listings -= 1
                    for tp, end in answer.items():
                        self._ends[tp] = max(end, self._ends.get(tp, -1))
                done.set()

        threading.Thread(target=listing, name=f"report bounds {self.flow}", daemon=True).start()
        return dict(answer) if done.wait(LIST_WAIT_S) else {}

    def _refuse(self, generation: int, tp: TopicPartition | None, reason: str) -> None:
        self.refused += 1
        if (generation, tp) in self._told:
            return
        self._told.add((generation, tp))
        where = f" topic={tp[0]} partition={tp[1]}" if tp is not None else ""
        log.warning("flow=%s%s: a task's report was refused, its position not applied: %s", self.flow, where, reason)

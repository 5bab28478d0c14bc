"""One flow's copy jobs and where each of its partitions stands (driver side; never touches records).

A job takes at most one offset range per source partition (so per-partition order holds and progress never
goes backwards) of at most ``mm2py.batch.max.records`` records. Positions move only past ranges a task
reported as copied; a source partition that shrank below its position (deleted, re-created, truncated), or
whose records at the position are gone (a task says so), is placed again by the resume rule, and what it lost
is counted (:mod:`mm2py.engine.losses`); a partition whose leader is away is left out, and named, until it is
back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from mm2py.config.flow import FlowConfig
from mm2py.control.plan import AdminPool, FlowPlan
from mm2py.control.progress_store import write_progress
from mm2py.engine.losses import FlowLosses
from mm2py.engine.ranges import follow_ranges, round_ranges
from mm2py.engine.spark import SparkRunner, raise_failure
from mm2py.engine.stats import FlowStats
from mm2py.engine.unavailable import UnavailablePartitions
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec
from mm2py.metrics.registry import RunMetrics
from mm2py.mirror.resume import Resume, resume_position

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


class CopyRounds:
    """The copy jobs of flow ``flow`` through a shared SparkRunner, and the positions they move."""

    def __init__(
        self,
        flow: FlowConfig,
        plan: FlowPlan,
        spec: CopySpec,
        pool: AdminPool,
        stats: FlowStats,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.flow = flow
        self.spec = spec
        self.pool = pool
        self.stats = stats
        self.metrics = metrics
        self.spark: SparkRunner | None = None  # given once the run holds a lease and Spark is up
        self.plan = plan
        self.remote: dict[str, str] = {t.topic: t.remote_topic for t in plan.topics}
        self.positions: dict[TopicPartition, int] = {}  # where the next range of each partition starts
        self.ends: dict[TopicPartition, int] = {}  # the source end offsets the last copy round saw
        self.away = UnavailablePartitions(flow.name)
        self.losses = FlowLosses(flow, stats, metrics)

    # -- positions -------------------------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        return [(t.topic, p) for t in self.plan.topics for p in range(t.partitions)]

    def _read_committed(self) -> bool:
        return self.spec.consumer_settings.get("isolation.level") == "read_committed"

    def place(self, progress: dict[TopicPartition, int]) -> None:
        """Where each partition not placed yet resumes (``mm2py.mirror.resume``), from ``progress`` (the last
        replicated offsets), and what it lost (counted, or, under ``mm2py.source.loss = fail``, raised before
        any position moves); starts that are not stored progress yet are recorded at once, with the losses, so
        the next run continues from them."""
        admin = self.pool.admin(self.flow.source, self.flow)
        partitions = [tp for tp in self.partitions() if tp not in self.positions]
        earliest = admin.list_offsets(partitions, "earliest")
        latest = admin.list_offsets(partitions, "latest", self._read_committed())
        starts = self._timestamp_starts([tp for tp in partitions if progress.get(tp) is None])
        reset = self.flow.source_consumer.settings().get("auto.offset.reset", "earliest")
        resumes: dict[TopicPartition, Resume] = {
            tp: resume_position(
                progress.get(tp),
                earliest[tp],
                latest[tp],
                reset,
                start_at=starts.get(tp),
                loss=self.losses.state(tp, self.ends.get(tp)),
            )
            for tp in partitions
        }
        losses = self.losses.settle(resumes)  # under mm2py.source.loss = fail, a gap stops here
        record: dict[TopicPartition, int] = {}
        for tp, resume in resumes.items():
            if resume.warning and resume.gap is None:  # a gap was logged when it was counted
                log.warning("flow=%s topic=%s partition=%d: %s", self.flow.name, tp[0], tp[1], resume.warning)
            if resume.record:
                record[tp] = resume.start - 1
            self.positions[tp] = resume.start
        write_progress(self.flow.target, self.spec.producer_settings, self.flow.source, record, losses=losses)
        self.losses.written(losses)

    def _timestamp_starts(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """``mm2py.start.timestamp`` (or ``run --from-timestamp``): the first offset at or after that time of
        each partition without progress (-1: none that late), by ListOffsets."""
        at = self.flow.start_timestamp_ms
        if at is None or not partitions:
            return {}
        return self.pool.admin(self.flow.source, self.flow).offsets_for_times(partitions, at)

    def save_tails(self) -> None:
        """When a run ends: keep the source ends it saw beyond what it copied (see FlowLosses.seen_tails)."""
        tails = self.losses.seen_tails(self.ends, self.positions)
        if tails:
            write_progress(self.flow.target, self.spec.producer_settings, self.flow.source, {}, losses=tails)
            self.losses.written(tails)

    def replan(self, plan: FlowPlan) -> None:
        """A refreshed plan (new topics or partitions): the new partitions are placed, the others keep going."""
        self.plan = plan
        self.remote = {t.topic: t.remote_topic for t in plan.topics}
        self.place({})

    # -- end offsets ---------------------------------------------------------------------------------------------

    @property
    def unavailable(self) -> dict[TopicPartition, str]:
        """The partitions whose leader is away, and why."""
        return self.away.reasons

    def end_offsets(self) -> dict[TopicPartition, int]:
        """The source's end offsets. A partition whose leader is away is left out, and named, until it is back:
        one offline partition must not stop the others (in MM2 each partition is consumed on its own)."""
        return self._available_ends(self.partitions())

    def _available_ends(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        admin = self.pool.admin(self.flow.source, self.flow)
        ends, away = admin.list_offsets_of_available(partitions, "latest", self._read_committed())
        self.away.update(partitions, away)
        return ends

    def ends_of_unavailable(self) -> dict[TopicPartition, int]:
        """``--once``: the end offsets of the partitions left out at the start, once their leaders are back.
        Fails (retriably) while one is still away, so the run waits for it up to ``mm2py.retry.timeout.seconds``
        and then exits 3 naming it; nothing is skipped in silence."""
        ends = self._available_ends(sorted(self.unavailable))
        if self.unavailable:
            (topic, partition), reason = min(self.unavailable.items())
            raise KafkaOperationError(
                self.flow.source,
                f"listing latest offsets of {topic}-{partition}",
                f"{reason} ({len(self.unavailable)} partition(s) not copied by this run)",
            )
        return ends

    # -- copy jobs -----------------------------------------------------------------------------------------------

    def follow_seconds(self) -> float:
        """How long a continuous run's copy tasks follow their partitions; 0 copies in rounds (the record path,
        ``mm2py.continuous.follow.ms = 0``, or fewer Spark task slots than flows)."""
        if not self.spec.copy_path.batch or self.flow.continuous_follow_ms == 0 or self.spark is None:
            return 0.0
        if self.spark.follow_tasks == 0:
            log.warning(
                "flow=%s copies in rounds, one Spark job each: its tasks cannot follow their partitions while %d "
                "flows share %d Spark task slots (give the run at least one per flow)",
                self.flow.name,
                self.spark.flows,
                self.spark.parallelism,
            )
            return 0.0
        return self.flow.continuous_follow_ms / 1000

    def copy_round(self, ends: dict[TopicPartition, int], follow_s: float = 0.0) -> int:
        """One Spark job; returns how many ranges it copied (0 = nothing left below ``ends``). With ``follow_s``
        its tasks also copy what arrives for that long (``mm2py.engine.ranges``)."""
        self._check_truncation(ends)
        # A partition of the plan that this listing left out (its leader is away; or --once copying only the
        # partitions that were away) keeps the end last seen, so its lag is still reported.
        planned = set(self.partitions())
        self.ends = {tp: end for tp, end in self.ends.items() if tp in planned} | ends
        choose = follow_ranges if follow_s else round_ranges
        ranges = choose(ends, self.positions, self.remote, self.flow.batch_max_records)
        self.stats.lag = self.lag()
        if not ranges:
            return 0
        started = time.monotonic()
        if self.spark is None:
            raise RuntimeError(f"flow {self.flow.name}: copy round before Spark was started")
        results = self.spark.copy(replace(self.spec, follow_s=follow_s) if follow_s else self.spec, ranges)
        for r in results:
            self.positions[(r.topic, r.partition)] = max(self.positions.get((r.topic, r.partition), 0), r.next_offset)
            if r.source_end >= 0 and (r.topic, r.partition) in self.ends:
                self.ends[(r.topic, r.partition)] = r.source_end  # newer than the listing: the lag stays true
        seconds = time.monotonic() - started
        self.stats.add(results, seconds)
        if self.metrics is not None:
            self.metrics.record_copy(r.measurement for r in results if r.measurement is not None)
            self.metrics.copy_job_finished(self.flow.source, self.flow.target, seconds)
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        # After what the failed ranges copied before their failure is counted: records gone at a position are
        # a loss to count (or, under mm2py.source.loss = fail, to stop at), the other failures are raised.
        self._records_gone([r for r in results if r.error is not None and r.error.records_gone])
        self.stats.lag = self.lag()
        raise_failure(self.flow.name, [r for r in results if r.error is None or not r.error.records_gone])
        return len(ranges)

    def copy_available(self, follow_s: float = 0.0) -> int:
        """A round up to the ends the source has now (continuous mode)."""
        return self.copy_round(self.end_offsets(), follow_s)

    def lag(self) -> int:
        """Records between each partition's position and the end last seen, summed."""
        return sum(max(0, end - self.positions.get(tp, end)) for tp, end in self.ends.items())

    def _records_gone(self, results: list[CopyResult]) -> None:
        """Tasks found the records at these positions gone: place the partitions again from what their logs hold
        now, counting the gap. A log that still holds the position (a broker answered out of range for another
        reason) is retried with backoff, as any transient failure."""
        if not results:
            return
        before = {(r.topic, r.partition): self.positions[(r.topic, r.partition)] for r in results}
        self._place_again(before)
        if all(self.positions[tp] == position for tp, position in before.items()):
            first = results[0].error
            raise ReplicationError(
                f"flow {self.flow.name}: {first.message if first else 'offset out of range'}; the source still "
                "holds that offset, so the range is copied again",
                code=first.code if first else None,
            )

    def _place_again(self, positions: dict[TopicPartition, int]) -> None:
        """Place ``positions`` again by the resume rule, as if they were stored progress (mid-run, they are)."""
        saved = {tp: self.positions.pop(tp) for tp in positions}
        try:
            self.place({tp: position - 1 for tp, position in saved.items()})
        except BaseException:
            # A partition without a position would read as caught up (ranges() starts it at its end): put the
            # positions back, so the retry places them again and nothing is skipped.
            self.positions.update(saved)
            raise

    def _check_truncation(self, ends: dict[TopicPartition, int]) -> None:
        """A source partition that now ends below what was replicated was deleted, re-created or truncated:
        place it again by the resume rule, as if its progress were stored (mid-run, it is)."""
        # An end of -1 is "not known now" (a leader election), never a truncation.
        shrunk = {tp: self.positions[tp] for tp, end in ends.items() if 0 <= end < self.positions.get(tp, 0)}
        if shrunk:
            self._place_again(shrunk)

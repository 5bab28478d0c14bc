"""One flow's copy jobs and where each of its partitions stands (driver side; never touches records).

A job takes at most one offset range per source partition (so per-partition order holds and progress never goes
backwards) of at most ``mm2py.range.max.records`` records. Positions move only past ranges a task reported as
copied; a source partition that shrank below its position (deleted, re-created, truncated), or whose records at the
position are gone (a task says so), is placed again by the resume rule, and what it lost is counted
(:mod:`mm2py.engine.losses`); a partition whose leader is away is left out, and named, until it is back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.fencing import SlotEpochs
from mm2py.control.plan import FlowPlan
from mm2py.control.progress_store import ReplicationState, read_progress, write_progress
from mm2py.engine.losses import FlowLosses
from mm2py.engine.ranges import follow_ranges, round_ranges
from mm2py.engine.report_bounds import ReportBounds, report_row
from mm2py.engine.source_ends import SourceEnds
from mm2py.engine.spark import SparkRunner, raise_failure
from mm2py.engine.stats import FlowStats
from mm2py.engine.task_control import FlowChannel
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.metrics.registry import RunMetrics
from mm2py.mirror.resume import Resume, resume_position
from mm2py.mirror.topic_partition import TopicPartition

log = logging.getLogger(__name__)


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
        spark: SparkRunner | None = None,
    ) -> None:
        self.flow = flow
        self.spec = spec
        self.pool = pool
        self.stats = stats
        self.metrics = metrics
        self.spark = spark  # None only where no job runs (tests of placement)
        self.plan = plan
        self.remote: dict[str, str] = {t.topic: t.remote_topic for t in plan.topics}
        self.positions: dict[TopicPartition, int] = {}  # where the next range of each partition starts
        self.stored_progress: dict[TopicPartition, int] = {}  # as read when the flow was prepared
        self.ends: dict[TopicPartition, int] = {}  # the source end offsets the last copy round saw
        read_committed = spec.consumer_settings.get("isolation.level") == "read_committed"
        self.source_ends = SourceEnds(flow, pool, read_committed=read_committed)
        self.losses = FlowLosses(flow, stats, metrics)
        # The flow's thread, the periodic jobs' thread and the task-control endpoint all read and move positions.
        self.lock = threading.RLock()
        self.placing = threading.RLock()  # one placing at a time: a gap must be counted once
        self.channel: FlowChannel | None = None  # continuous mode on the batch path: the following generations
        self.epochs: SlotEpochs | None = None  # exactly-once on the batch path: the task slots' producer epochs
        self.bounds = ReportBounds(flow.name, self.source_ends.listed)  # what a following task's report may move
        self._said_rounds = False  # follows() logged that the flow copies in rounds (too few task slots)

    # -- positions -------------------------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        return [(t.topic, p) for t in self.plan.topics for p in range(t.partitions)]

    def fenced(self, epochs: SlotEpochs | None, slots: int) -> CopySpec:
        """Exactly-once, once every earlier producer of the flow's ``slots`` transactional ids is fenced: each job's
        ranges are grouped by slot, and on the batch path (``epochs``) each job's tasks get epochs the driver
        initialized for it. Returns the tasks' spec now."""
        self.epochs = epochs
        self.spec = replace(self.spec, exactly_once_slots=slots)
        return self.spec

    def resume(self, state: ReplicationState) -> None:
        """Start the flow again from what the target stores (a run that takes the flow, or takes it back after a
        lost lease): positions forgotten, stored losses and progress taken in, every partition placed."""
        self.positions = {}
        self.losses.load(state.losses)
        self.stored_progress = state.progress
        self.place(state.progress)

    def place(self, progress: dict[TopicPartition, int]) -> None:
        """Where each partition not placed yet resumes (``mm2py.mirror.resume``), from ``progress`` (the last
        replicated offsets), and what it lost (counted, or, under ``mm2py.source.loss = fail``, raised before
        any position moves); starts that are not stored progress yet are recorded at once, with the losses, so
        the next run continues from them."""
        with self.placing:  # the flow's thread and the periodic jobs' thread may both place pending partitions
            self._place(progress)

    def _place(self, progress: dict[TopicPartition, int]) -> None:
        admin = self.pool.admin(self.flow.source, self.flow)
        progress = {**self.stored_progress, **progress}
        asked = [tp for tp in self.partitions() if tp not in self.positions]
        # A partition whose leader is away stays unplaced (no range) while others are copied; place_pending() later.
        earliest, away = admin.list_offsets_of_available(asked, "earliest")
        latest, away_now = admin.list_offsets_of_available(list(earliest), "latest", self.source_ends.read_committed)
        self.source_ends.away.update(asked, away | away_now)
        partitions = [tp for tp in asked if tp in latest]
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

    def pending(self) -> list[TopicPartition]:
        """Partitions of the plan not placed yet (their leader was away when they were to be placed)."""
        return [tp for tp in self.partitions() if tp not in self.positions]

    def place_pending(self) -> bool:
        """Place the partitions left unplaced, from the progress stored when the flow was prepared; True if any was."""
        before = len(self.pending())
        if before:
            self.place({})
        return len(self.pending()) < before

    def _timestamp_starts(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """``mm2py.start.timestamp`` (or ``run --from-timestamp``): the first offset at or after that time of
        each partition without progress (-1: none that late), by ListOffsets."""
        at = self.flow.start_timestamp_ms
        if at is None or not partitions:
            return {}
        return self.pool.admin(self.flow.source, self.flow).offsets_for_times(partitions, at)

    def save_tails(self) -> None:
        """Keep the source ends seen beyond what was copied (FlowLosses.seen_tails): at the end and periodically.
        Placing waits meanwhile (a gap it counts must not be overwritten by an older state); reports, which their
        tasks' copy loops wait for, wait for the snapshot only."""
        with self.placing:  # always placing, then lock
            with self.lock:
                tails = self.losses.seen_tails(self.ends, self.positions)
            if tails:
                write_progress(self.flow.target, self.spec.producer_settings, self.flow.source, {}, losses=tails)
                self.losses.written(tails)

    def replan(self, plan: FlowPlan) -> None:
        """A refreshed plan (new topics or partitions): the new partitions are placed, the others keep going; a
        following generation ends, so that the next one takes them too."""
        with self.placing, self.lock:  # placing first, as save_tails takes them
            self.plan = plan
            self.remote = {t.topic: t.remote_topic for t in plan.topics}
            self.place({})
        if self.channel is not None:
            self.channel.end()

    # -- end offsets ---------------------------------------------------------------------------------------------

    @property
    def unavailable(self) -> dict[TopicPartition, str]:
        """The partitions whose leader is away, and why."""
        return self.source_ends.away.reasons

    def end_offsets(self) -> dict[TopicPartition, int]:
        """The source's end offsets, without the partitions whose leader is away (:mod:`mm2py.engine.source_ends`)."""
        return self.source_ends.available(self.partitions())

    def ends_of_unavailable(self, late: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self.source_ends.of_unavailable(late)

    # -- copy jobs -----------------------------------------------------------------------------------------------

    def follows(self) -> bool:
        """Whether a continuous run's copy tasks follow their partitions (the batch path, unless
        ``mm2py.continuous.tasks = rounds`` or there are fewer Spark task slots than flows); else rounds of jobs.

        The task slots are those of the executors registered *now*: on a cluster they register after the
        SparkContext started (and a lost one comes back later), so a flow that copies in rounds asks again
        before each round, and says so once when it starts following."""
        if not self.spec.copy_path.batch or self.flow.continuous_tasks == "rounds" or self.spark is None:
            return False
        if self.spark.follow_tasks == 0:
            if not self._said_rounds:
                log.warning(
                    "flow=%s copies in rounds, one Spark job each: its tasks cannot follow their partitions while "
                    "%d flows share %d Spark task slots (give the run at least one per flow)",
                    self.flow.name,
                    self.spark.flows,
                    self.spark.parallelism,
                )
                self._said_rounds = True
            return False
        if self._said_rounds:
            log.warning(
                "flow=%s: %d Spark task slots now, its tasks follow their partitions",
                self.flow.name,
                self.spark.parallelism,
            )
            self._said_rounds = False
        return True

    def copy_round(self, ends: dict[TopicPartition, int]) -> int:
        """One Spark job up to ``ends``; returns how many ranges it copied (0 = nothing left below them)."""
        if any(tp in ends for tp in self.pending()):
            self.place_pending()  # their leaders answered the listing: placing them must succeed (or is retried)
        self._check_truncation(ends)
        with self.lock:
            # A partition of the plan that this listing left out (its leader is away; or --once copying only the
            # partitions that were away) keeps the end last seen, so its lag is still reported.
            planned = set(self.partitions())
            self.ends = {tp: end for tp, end in self.ends.items() if tp in planned} | ends
            ranges = round_ranges(ends, self.positions, self.remote, self.flow.range_max_records)
            self.stats.lag = self.lag()
        if not ranges:
            return 0
        started = time.monotonic()
        if self.spark is None:
            raise RuntimeError(f"flow {self.flow.name}: copy round before Spark was started")
        results = self._run_job(self.spec, ranges)
        self._take_results(results, counts=True)
        seconds = time.monotonic() - started
        self.stats.add(results, seconds)
        if self.metrics is not None:
            self.metrics.record_copy(r.measurement for r in results if r.measurement is not None)
            self.metrics.copy_job_finished(self.flow.source, self.flow.target, seconds)
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        self._raise_failures(results)  # after what the failed ranges copied before their failure is counted
        return len(ranges)

    def follow(self, channel: FlowChannel) -> bool:
        """Continuous mode on the batch path: one generation of the flow, a Spark job whose tasks follow every
        partition from its position until the channel ends the generation (a stop, a lost lease, new topics or
        partitions, a partition that failed). Their reports keep positions, lag, stats and metrics current
        meanwhile (:meth:`on_report`); the job's results only close the generation. False when the flow has no
        partitions to follow (yet)."""
        if self.spark is None:
            raise RuntimeError(f"flow {self.flow.name}: following before Spark was started")
        try:
            self.place_pending()
        except KafkaOperationError as exc:  # still away: followed once placed (the periodic thread tries again)
            log.debug("flow=%s: partitions left unplaced: %s", self.flow.name, exc)
        ends = self.end_offsets()
        self._check_truncation(ends)
        with self.lock:
            ranges = follow_ranges(self.partitions(), self.positions, self.remote)
        if not ranges:
            return False
        started = time.monotonic()
        spec = replace(self.spec, control=channel.next_generation())
        self.bounds.start(spec.control.generation if spec.control else 0, ranges, ends)
        results = self._run_job(spec, ranges)
        self._take_results(results, counts=False)
        if self.metrics is not None:
            self.metrics.copy_job_finished(self.flow.source, self.flow.target, time.monotonic() - started)
        self._raise_failures(results)
        return True

    def _raise_failures(self, results: list[CopyResult]) -> None:
        """Records gone at a position are a loss to count (or, under mm2py.source.loss = fail, to stop at); the
        other failures are raised."""
        self._records_gone([r for r in results if r.error is not None and r.error.records_gone])
        self.stats.lag = self.lag()
        raise_failure(self.flow.name, [r for r in results if r.error is None or not r.error.records_gone], self.spec)

    def _run_job(self, spec: CopySpec, ranges: list[PartitionRange]) -> list[CopyResult]:
        """One Spark job. Exactly-once on the batch path, its task slots first get epochs the driver initialized
        for it; and exactly-once, after a job that failed, positions move to the progress its committed
        transactions hold (what a task committed before it failed is not in its result, or there is no result)."""
        if self.spark is None:
            raise RuntimeError(f"flow {self.flow.name}: a copy job before Spark was started")
        if self.epochs is not None:
            spec = replace(spec, slot_producers=self.epochs.next_job(spec.exactly_once_slots))
        # A job with an end (--once, a round) takes every slot: it ends sooner, and then frees them.
        tasks = self.following_tasks() if spec.following else self.spark.parallelism
        try:
            results = self.spark.copy(spec, ranges, tasks)
        except BaseException:
            self._positions_from_committed_progress()
            raise
        if any(r.error is not None for r in results):
            self._positions_from_committed_progress()
        return results

    def following_tasks(self) -> int:
        """Tasks of a following job, and a continuous exactly-once flow's slots: at most ``tasks.max``, as MM2 runs at
        most ``tasks.max`` tasks of a connector, within the slots each flow gets (every flow's job runs at once)."""
        assert self.spark is not None
        return max(1, min(self.spark.follow_tasks, self.flow.tasks_max))

    def _positions_from_committed_progress(self) -> None:
        if not self.spec.exactly_once:
            return
        progress = read_progress(self.flow.target, self.flow.target_consumer.settings(), self.flow.source)
        with self.lock:
            for tp, position in self.positions.items():
                if tp in progress:
                    self.positions[tp] = max(position, progress[tp] + 1)

    def on_report(self, generation: int, rows: list[dict[str, Any]], final: bool) -> None:
        """A following task's report (the task-control endpoint's thread): where its partitions are, and what it
        copied since its last report. Read whole before anything is applied (a malformed row refuses the
        report); a position outside its generation's range (``ReportBounds``) is not applied, nor counted."""
        parsed = [report_row(row) for row in rows]
        with self.lock:
            planned = set(self.partitions())
            positions = dict(self.positions)
        parsed = [row for row in parsed if row.tp in planned]
        allowed = self.bounds.allowed(generation, {row.tp: row.position for row in parsed}, positions)
        measurements = []
        records = bytes_ = 0
        failed = False
        with self.lock:
            for row in parsed:
                failed = failed or row.failed
                if row.tp not in allowed:
                    continue
                self.positions[row.tp] = max(self.positions.get(row.tp, 0), row.position)
                if row.source_end >= 0:
                    self.ends[row.tp] = row.source_end
                records += row.records
                bytes_ += row.bytes
                if row.measurement is not None:
                    measurements.append(row.measurement)
            self.stats.reported(records, bytes_)
            self.stats.lag = self.lag()
        if self.metrics is not None and measurements:
            self.metrics.record_copy(measurements)
        if failed and self.channel is not None and generation == self.channel.generation:
            self.channel.end()  # the next generation starts the partition again from its position

    def _take_results(self, results: list[CopyResult], *, counts: bool) -> None:
        with self.lock:
            for r in results:
                tp = (r.topic, r.partition)
                self.positions[tp] = max(self.positions.get(tp, 0), r.next_offset)
                if r.source_end >= 0 and tp in self.ends:
                    self.ends[tp] = r.source_end  # newer than the listing: the lag stays true
            self.stats.lag = self.lag()

    def copy_available(self) -> int:
        """A round up to the ends the source has now (continuous mode in rounds)."""
        return self.copy_round(self.end_offsets())

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

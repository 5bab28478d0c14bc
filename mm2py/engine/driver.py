"""The driver of ``mm2py run`` (runs on the driver, never touches records).

Per flow: plan topics, create what is missing on the target, take the flow's lease, read progress from the
target, then run copy jobs. Each job takes at most one offset range per source partition (so per-partition order
holds and progress never goes backwards) of at most ``mm2py.batch.max.records`` records. ``--once`` copies what
the source partitions held when the run started; continuous mode keeps going until asked to stop, then lets the
job in flight finish so its progress is recorded. On the batch path a continuous run's jobs *follow* their
partitions for ``mm2py.continuous.follow.ms`` (or until the next periodic job is due): new records are copied as
they arrive, and a job ends early when a partition has more than a job takes (a backlog).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from mm2py.acls import sync_topic_acls
from mm2py.checkpoints import CheckpointWriter, FlowTranslator, GroupOffset, now_ms
from mm2py.config.flow import FlowConfig
from mm2py.copy_path import choose_copy_path
from mm2py.engine.away import AwayPartitions
from mm2py.engine.group_sync import GroupSyncCoordinator
from mm2py.engine.ranges import follow_ranges, round_ranges
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.engine.spark import SparkRunner
from mm2py.engine.spec import copy_spec
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.lag import PartitionLag, record_ages
from mm2py.metrics import CheckpointMeasurement, RunMetrics
from mm2py.offset_sync_store import OffsetSyncStore
from mm2py.plan import AdminPool, FlowPlan, build_plan
from mm2py.progress import read_progress, write_progress
from mm2py.resume import resume_position
from mm2py.topics import (
    ensure_internal_topics,
    ensure_remote_topics,
    internal_topics,
    sync_topic_configs,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
LAG_INTERVAL_S = 10.0  # how often a run measures its lag in seconds for the metrics endpoint
MIN_FOLLOW_S = 1.0  # a following job shorter than this would cost more in Spark than it saves


class FlowRunner:
    """Replicates one flow ``source->target`` through a shared SparkRunner."""

    def __init__(
        self,
        flow: FlowConfig,
        plan: FlowPlan,
        spark: SparkRunner | None,
        pool: AdminPool,
        coordinator: GroupSyncCoordinator | None = None,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.flow = flow
        self.metrics = metrics
        self.ends: dict[tuple[str, int], int] = {}  # the source end offsets the last copy round saw
        self.away = AwayPartitions(flow.name)
        self.plan = plan
        self.spark = spark
        self.pool = pool
        self.coordinator = coordinator
        self.stats = FlowStats(flow.name, path=choose_copy_path(flow).describe())
        self.positions: dict[tuple[str, int], int] = {}
        self.remote: dict[str, str] = {t.topic: t.remote_topic for t in plan.topics}
        self.spec = copy_spec(flow)
        self._checkpoints: CheckpointWriter | None = None
        self._syncs: OffsetSyncStore | None = None  # tailed, not re-read, at every checkpoint
        self.group_offsets: list[GroupOffset] = []  # the latest translation of every group, for group sync

    # -- preparation (driver, admin calls only) ---------------------------------------------------------

    def ensure_topics(self) -> None:
        f = self.flow
        admins = {f.source: self.pool.admin(f.source, f), f.target: self.pool.admin(f.target, f)}
        ensure_internal_topics(admins, internal_topics(f))
        ensure_remote_topics(f, self.plan, admins[f.source], admins[f.target])

    def prepare(self) -> None:
        """Once this run holds the flow: sync configs, and resume every partition from the stored progress."""
        f = self.flow
        self.sync_configs()
        self.sync_acls()
        self.positions = {}
        self._set_positions(read_progress(f.target, f.target_consumer.settings(), f.source))
        if f.emit_checkpoints_enabled and f.emit_offset_syncs_enabled:
            self._checkpoints = CheckpointWriter(f)
        if self.metrics is not None:
            self.metrics.set_copy_path(f.source, f.target, "batch" if self.spec.copy_path == "batch" else "record")

    def _partitions(self) -> list[tuple[str, int]]:
        return [(t.topic, p) for t in self.plan.topics for p in range(t.partitions)]

    def _read_committed(self) -> bool:
        return self.spec.consumer_settings.get("isolation.level") == "read_committed"

    def _set_positions(self, progress: dict[tuple[str, int], int]) -> None:
        """Where each partition not placed yet resumes (``mm2py.resume``); starts that are not stored progress
        yet are recorded at once, so the next run continues from them."""
        admin = self.pool.admin(self.flow.source, self.flow)
        partitions = [tp for tp in self._partitions() if tp not in self.positions]
        earliest = admin.list_offsets(partitions, "earliest")
        latest = admin.list_offsets(partitions, "latest", self._read_committed())
        reset = self.flow.source_consumer.settings().get("auto.offset.reset", "earliest")
        record: dict[tuple[str, int], int] = {}
        for tp in partitions:
            resume = resume_position(progress.get(tp), earliest[tp], latest[tp], reset)
            if resume.warning:
                log.warning(
                    "flow=%s topic=%s partition=%d: %s",
                    self.flow.name,
                    tp[0],
                    tp[1],
                    resume.warning.format(start=resume.start),
                )
            if resume.record:
                record[tp] = resume.start - 1
            self.positions[tp] = resume.start
        write_progress(self.flow.target, self.spec.producer_settings, self.flow.source, record)

    # -- copying -----------------------------------------------------------------------------------------

    @property
    def unavailable(self) -> dict[tuple[str, int], str]:
        """The partitions whose leader is away, and why."""
        return self.away.reasons

    def end_offsets(self) -> dict[tuple[str, int], int]:
        """The source's end offsets. A partition whose leader is away is left out, and named, until it is back:
        one offline partition must not stop the others (in MM2 each partition is consumed on its own)."""
        return self._available_ends(self._partitions())

    def _available_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        admin = self.pool.admin(self.flow.source, self.flow)
        ends, away = admin.list_offsets_of_available(partitions, "latest", self._read_committed())
        self.away.update(partitions, away)
        return ends

    def _ends_of_unavailable(self) -> dict[tuple[str, int], int]:
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

    def follow_seconds(self) -> float:
        """How long a continuous run's copy tasks follow their partitions; 0 copies in rounds (the record path,
        ``mm2py.continuous.follow.ms = 0``, or fewer Spark task slots than flows)."""
        if self.spec.copy_path != "batch" or self.flow.continuous_follow_ms == 0 or self.spark is None:
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

    def copy_round(self, ends: dict[tuple[str, int], int], follow_s: float = 0.0) -> int:
        """One Spark job; returns how many ranges it copied (0 = nothing left below ``ends``). With ``follow_s``
        its tasks also copy what arrives for that long (``mm2py.engine.ranges``)."""
        self._check_truncation(ends)
        # A partition of the plan that this listing left out (its leader is away; or --once copying only the
        # partitions that were away) keeps the end last seen, so its lag is still reported.
        planned = set(self._partitions())
        self.ends = {tp: end for tp, end in self.ends.items() if tp in planned} | ends
        choose = follow_ranges if follow_s else round_ranges
        ranges = choose(ends, self.positions, self.remote, self.flow.batch_max_records)
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in self.ends.items())
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
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in self.ends.items())
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        return len(ranges)

    def copy_available(self, follow_s: float = 0.0) -> int:
        """A round up to the ends the source has now (continuous mode)."""
        return self.copy_round(self.end_offsets(), follow_s)

    def _check_truncation(self, ends: dict[tuple[str, int], int]) -> None:
        """A source partition that now ends below what was replicated was deleted, re-created or truncated:
        place it again by the resume rule, as if its progress were stored (mid-run, it is)."""
        # An end of -1 is "not known now" (a leader election), never a truncation.
        shrunk = {tp: end for tp, end in ends.items() if 0 <= end < self.positions.get(tp, 0)}
        if not shrunk:
            return
        saved = {tp: self.positions.pop(tp) for tp in shrunk}
        try:
            self._set_positions({tp: position - 1 for tp, position in saved.items()})
        except BaseException:
            # A partition without a position would read as caught up (ranges() starts it at its end): put the
            # positions back, so the retry places them again and nothing is skipped.
            self.positions.update(saved)
            raise

    def run_once(self, stop: threading.Event) -> None:
        """Copy up to the end offsets the source had when the run started; a signal stops after the job in
        flight (what it copied is recorded, the rest is left for the next run)."""
        ends = self.retrying(self.end_offsets, stop)
        self._copy_up_to(ends, stop)
        unfinished: KafkaOperationError | ReplicationError | None = None
        if self.unavailable and not stop.is_set():
            try:  # the partitions whose leader was away at the start, once it is back
                self._copy_up_to(self.retrying(self._ends_of_unavailable, stop), stop)
            except (KafkaOperationError, ReplicationError) as exc:
                unfinished = exc  # raised after the checkpoints of what was copied
        self.retrying(self.checkpoint, stop)
        self.retrying(self.report_lag, stop)
        if unfinished is not None:
            raise unfinished

    def _copy_up_to(self, ends: dict[tuple[str, int], int], stop: threading.Event) -> None:
        while not stop.is_set() and self.retrying(lambda: self.copy_round(ends), stop):
            pass

    def retrying(self, step: Callable[[], T], stop: threading.Event) -> T:
        """Run ``step``, retrying transient failures (a stalled broker, a failed Spark job) with backoff for up to
        ``mm2py.retry.timeout.seconds``. Nothing is lost meanwhile: progress only moves after a range is copied."""
        deadline = time.monotonic() + self.flow.retry_timeout_seconds
        backoff = 1.0
        while True:
            try:
                return step()
            except (ReplicationError, KafkaOperationError) as exc:
                retriable = exc.retriable if isinstance(exc, ReplicationError) else True
                if not retriable or time.monotonic() + backoff > deadline or stop.is_set():
                    raise
                self.stats.retries += 1
                if self.metrics is not None:
                    self.metrics.retried(self.flow.source, self.flow.target)
                log.warning("flow=%s will retry in %.0f s: %s", self.flow.name, backoff, exc)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def checkpoint(self) -> None:
        """Translate every selected source group and write the checkpoints that moved (MM2's checkpoint rule)."""
        if self._checkpoints is None:
            return
        listed_at = now_ms()
        if self._syncs is None:
            self._syncs = OffsetSyncStore(self.flow)
        translator = FlowTranslator(self.flow, self.plan, self.pool.admin(self.flow.source, self.flow), self._syncs)
        rows = [row for group in translator.groups() for row in translator.translate(group)]
        written = self._checkpoints.emit(rows, listed_at)
        self.group_offsets = rows
        if self.metrics is not None:
            latency = now_ms() - listed_at  # MM2: from listing the group's offsets to the target's acknowledgement
            self.metrics.record_checkpoints(
                CheckpointMeasurement(
                    self.flow.source, self.flow.target, cp.consumer_group_id, cp.topic, cp.partition, latency
                )
                for cp in written
            )
        log.info("checkpoints flow=%s groups=%d written=%d", self.flow.name, len({r.group for r in rows}), len(written))

    def schedule(self) -> Schedule:
        """MM2's periodic jobs of this flow, with MM2's intervals and first-run delays."""
        f = self.flow
        # MM2 runs refresh, config sync and ACL sync first after one interval (ACLs and configs are also synced
        # when the flow starts, in prepare), checkpoints every interval.
        periodic = (
            (f.refresh_topics_enabled, "refresh topics", f.refresh_topics_interval_seconds, self.refresh_topics),
            (
                f.sync_topic_configs_enabled,
                "sync topic configs",
                f.sync_topic_configs_interval_seconds,
                self.sync_configs,
            ),
            (f.sync_topic_acls_enabled, "sync topic acls", f.sync_topic_acls_interval_seconds, self.sync_acls),
            (True, "checkpoints", f.emit_checkpoints_interval_seconds, self.checkpoint_and_sync),
        )
        jobs = [
            Periodic(name, interval, action, first_after_s=interval)
            for enabled, name, interval, action in periodic
            if enabled
        ]
        if self.metrics is not None:
            jobs.append(Periodic("lag", LAG_INTERVAL_S, self.report_lag))
        return Schedule(jobs)

    def report_lag(self) -> None:
        """Lag in records and seconds per partition for the metrics endpoint (the age of the oldest record
        not copied yet, read from the source like ``mm2py lag`` does)."""
        if self.metrics is None or not self.ends:
            return
        # No record can be read from a partition whose leader is away: its age is left at 0 until it is back.
        lagging = {
            tp: self.positions.get(tp, end)
            for tp, end in self.ends.items()
            if end > self.positions.get(tp, end) and tp not in self.unavailable
        }
        ages = record_ages(self.flow, lagging, now_ms()) if lagging else {}
        rows = []
        for (topic, partition), end in sorted(self.ends.items()):
            position = self.positions.get((topic, partition), end)
            lag = max(0, end - position)
            rows.append(
                PartitionLag(
                    self.flow.name,
                    self.flow.source,
                    self.flow.target,
                    topic,
                    self.remote.get(topic, topic),
                    partition,
                    end,
                    position,
                    lag,
                    ages.get((topic, partition), 0.0) if lag else 0.0,
                )
            )
        self.metrics.set_lag(self.flow.source, self.flow.target, rows)

    def latest_group_offsets(self) -> list[GroupOffset]:
        return self.group_offsets

    def checkpoint_and_sync(self) -> None:
        self.checkpoint()
        if self.coordinator is not None:
            self.coordinator.maybe_sync(self.flow.target)

    def run_continuous(self, stop: threading.Event, lost: threading.Event) -> None:
        """Copy until ``stop`` (a signal) or ``lost`` (the lease went to another run) is set."""
        idle = max(self.flow.consumer_poll_timeout_ms / 1000, 0.1)
        schedule = self.schedule()
        follow_s = self.follow_seconds()
        while not stop.is_set() and not lost.is_set():
            schedule.run_due(lambda action: self.retrying(action, stop))
            # A following job ends when the next periodic job is due, so checkpoints and refreshes keep their pace.
            follow = min(follow_s, max(MIN_FOLLOW_S, schedule.seconds_until_due())) if follow_s else 0.0
            if not self.retrying(functools.partial(self.copy_available, follow), stop):
                stop.wait(idle)

    def refresh_topics(self) -> None:
        """Pick up new source topics and partitions (MM2's refresh.topics.interval.seconds)."""
        plan = build_plan([self.flow], self.pool, refresh=True).flows[0]
        if plan == self.plan:
            return
        for gone in sorted(set(self.remote) - {t.topic for t in plan.topics}):
            log.warning(
                "flow=%s: source topic %s is gone (deleted, or no longer selected); its replication "
                "stops and its remote topic %s is kept, as MM2 does",
                self.flow.name,
                gone,
                self.remote[gone],
            )
        ensure_remote_topics(
            self.flow, plan, self.pool.admin(self.flow.source, self.flow), self.pool.admin(self.flow.target, self.flow)
        )
        self.plan = plan
        self.remote = {t.topic: t.remote_topic for t in plan.topics}
        self._set_positions({})
        log.info("topics refreshed flow=%s topics=%d", self.flow.name, len(plan.topics))

    def sync_acls(self) -> None:
        """MM2's ACL sync (``sync.topic.acls.*``): the source's topic ACLs, by MM2's rules, onto the target."""
        if not self.flow.sync_topic_acls_enabled:
            return
        created = sync_topic_acls(
            self.flow, self.pool.admin(self.flow.source, self.flow), self.pool.admin(self.flow.target, self.flow)
        )
        if created:
            log.info("topic ACLs synced flow=%s bindings=%d", self.flow.name, created)

    def sync_configs(self) -> None:
        """MM2's topic-config sync (``sync.topic.configs.*``): source configs onto the remote topics."""
        if not self.flow.sync_topic_configs_enabled:
            return
        altered = sync_topic_configs(
            self.flow,
            self.plan,
            self.pool.admin(self.flow.source, self.flow),
            self.pool.admin(self.flow.target, self.flow),
        )
        log.info("topic configs synced flow=%s topics=%d", self.flow.name, altered)

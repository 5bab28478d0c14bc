"""The driver of ``mm2py run`` (runs on the driver, never touches records).

Per flow: plan topics, create what is missing on the target, take the flow's lease, read progress from the
target, then run copy jobs. Each job takes at most one offset range per source partition (so per-partition order
holds and progress never goes backwards) of at most ``mm2py.batch.max.records`` records. ``--once`` copies what
the source partitions held when the run started; continuous mode keeps going until asked to stop, then lets the
job in flight finish so its progress is recorded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mm2py.acls import sync_topic_acls
from mm2py.checkpoints import CheckpointWriter, FlowTranslator, GroupOffset, now_ms
from mm2py.config.flow import FlowConfig
from mm2py.copy_path import choose_copy_path
from mm2py.engine.copy import CopyResult, CopySpec, PartitionRange
from mm2py.engine.group_sync import GroupSyncCoordinator
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.engine.spark import SparkRunner
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.kafka.client_defaults import copy_consumer_settings, copy_producer_settings, syncs_producer_settings
from mm2py.lag import PartitionLag, record_ages
from mm2py.metrics import CheckpointMeasurement, RunMetrics
from mm2py.offset_sync_store import OffsetSyncStore
from mm2py.plan import AdminPool, FlowPlan, build_plan
from mm2py.progress import progress_topic, read_progress, write_progress
from mm2py.resume import resume_position
from mm2py.topics import (
    dense_offset_syncs_topic,
    ensure_internal_topics,
    ensure_remote_topics,
    internal_topics,
    offset_syncs_topic,
    sync_topic_configs,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
LAG_INTERVAL_S = 10.0  # how often a run measures its lag in seconds for the metrics endpoint


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
    last_mb_rate: float = 0.0
    held_by: str | None = None  # another run holds this flow's lease: nothing was copied
    path: str = ""  # the copy path, "batch" or "record (why)" (mm2py.copy_path)

    def add(self, results: list[CopyResult], seconds: float) -> None:
        records = sum(r.records for r in results)
        nbytes = sum(r.bytes for r in results)
        self.records += records
        self.bytes += nbytes
        self.jobs += 1
        if seconds > 0:
            self.last_rate = records / seconds
            self.last_mb_rate = nbytes / seconds / 1e6


def copy_spec(f: FlowConfig) -> CopySpec:
    """What every copy task of flow ``f`` needs (plain and picklable)."""
    exactly_once = f.exactly_once
    return CopySpec(
        flow=f.name,
        source=f.source,
        target=f.target,
        consumer_settings=copy_consumer_settings(
            f.source_consumer.settings(), f"mm2py-{f.source}-{f.target}", exactly_once=exactly_once
        ),
        producer_settings=copy_producer_settings(f.target_producer.settings(), exactly_once=exactly_once),
        syncs_producer_settings=(
            syncs_producer_settings(f.offset_syncs_producer.settings()) if f.emit_offset_syncs_enabled else None
        ),
        syncs_topic=offset_syncs_topic(f) if f.emit_offset_syncs_enabled else None,
        dense_syncs_topic=(
            dense_offset_syncs_topic(f) if f.emit_offset_syncs_enabled and f.dense_offset_syncs else None
        ),
        progress_topic=progress_topic(f.source),
        offset_lag_max=f.offset_lag_max,
        dense_offset_syncs=f.dense_offset_syncs,
        provenance=f.provenance_header_enabled,
        exactly_once=exactly_once,
        copy_path=choose_copy_path(f).path,
        poll_timeout_s=max(f.consumer_poll_timeout_ms / 1000, 0.1),
    )


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

    def end_offsets(self) -> dict[tuple[str, int], int]:
        admin = self.pool.admin(self.flow.source, self.flow)
        return admin.list_offsets(self._partitions(), "latest", self._read_committed())

    def ranges(self, ends: dict[tuple[str, int], int]) -> list[PartitionRange]:
        batch = self.flow.batch_max_records
        result = []
        for (topic, partition), end in ends.items():
            start = self.positions.get((topic, partition), end)
            if start < end:
                result.append(PartitionRange(topic, partition, self.remote[topic], start, min(end, start + batch)))
        return result

    def copy_round(self, ends: dict[tuple[str, int], int]) -> int:
        """One Spark job; returns how many ranges it copied (0 = nothing left below ``ends``)."""
        self._check_truncation(ends)
        self.ends = dict(ends)
        ranges = self.ranges(ends)
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in ends.items())
        if not ranges:
            return 0
        started = time.monotonic()
        if self.spark is None:
            raise RuntimeError(f"flow {self.flow.name}: copy round before Spark was started")
        results = self.spark.copy(self.spec, ranges)
        for r in results:
            self.positions[(r.topic, r.partition)] = max(self.positions.get((r.topic, r.partition), 0), r.next_offset)
        seconds = time.monotonic() - started
        self.stats.add(results, seconds)
        if self.metrics is not None:
            self.metrics.record_copy(r.measurement for r in results if r.measurement is not None)
            self.metrics.copy_job_finished(self.flow.source, self.flow.target, seconds)
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in ends.items())
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        return len(ranges)

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
        while not stop.is_set() and self.retrying(lambda: self.copy_round(ends), stop):
            pass
        self.retrying(self.checkpoint, stop)
        self.retrying(self.report_lag, stop)

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
        lagging = {
            tp: self.positions.get(tp, end) for tp, end in self.ends.items() if end > self.positions.get(tp, end)
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
        while not stop.is_set() and not lost.is_set():
            schedule.run_due(lambda action: self.retrying(action, stop))
            if not self.retrying(lambda: self.copy_round(self.end_offsets()), stop):
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

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from mm2py.checkpoints import CheckpointWriter, FlowTranslator, GroupOffset, now_ms
from mm2py.config.flow import FlowConfig
from mm2py.copy_path import choose_copy_path
from mm2py.engine.copy import CopyResult, CopySpec, PartitionRange
from mm2py.engine.group_sync import GroupSyncCoordinator
from mm2py.engine.lease import FlowLease
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.engine.spark import SparkRunner
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.heartbeats import HeartbeatEmitter
from mm2py.kafka.client_defaults import copy_consumer_settings, copy_producer_settings, syncs_producer_settings
from mm2py.plan import AdminPool, FlowPlan, ReplicationPlan, build_plan
from mm2py.progress import progress_topic, read_progress, write_progress
from mm2py.resume import resume_position
from mm2py.topics import (
    dense_offset_syncs_topic,
    ensure_internal_topics,
    ensure_remote_topics,
    heartbeats_topics,
    internal_topics,
    offset_syncs_topic,
    sync_topic_configs,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        flow=f.name, source=f.source, target=f.target,
        consumer_settings=copy_consumer_settings(f.source_consumer.settings(), f"mm2py-{f.source}-{f.target}",
                                                 exactly_once=exactly_once),
        producer_settings=copy_producer_settings(f.target_producer.settings(), exactly_once=exactly_once),
        syncs_producer_settings=(syncs_producer_settings(f.offset_syncs_producer.settings())
                                 if f.emit_offset_syncs_enabled else None),
        syncs_topic=offset_syncs_topic(f) if f.emit_offset_syncs_enabled else None,
        dense_syncs_topic=(dense_offset_syncs_topic(f) if f.emit_offset_syncs_enabled and f.dense_offset_syncs
                           else None),
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

    def __init__(self, flow: FlowConfig, plan: FlowPlan, spark: SparkRunner | None, pool: AdminPool,
                 coordinator: GroupSyncCoordinator | None = None) -> None:
        self.flow = flow
        self.plan = plan
        self.spark = spark
        self.pool = pool
        self.coordinator = coordinator
        self.stats = FlowStats(flow.name, path=choose_copy_path(flow).describe())
        self.positions: dict[tuple[str, int], int] = {}
        self.remote: dict[str, str] = {t.topic: t.remote_topic for t in plan.topics}
        self.spec = copy_spec(flow)
        self._checkpoints: CheckpointWriter | None = None
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
        self.positions = {}
        self._set_positions(read_progress(f.target, f.target_consumer.settings(), f.source))
        if f.emit_checkpoints_enabled and f.emit_offset_syncs_enabled:
            self._checkpoints = CheckpointWriter(f)

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
                log.warning("flow=%s topic=%s partition=%d: %s", self.flow.name, tp[0], tp[1],
                            resume.warning.format(start=resume.start))
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
        self.stats.add(results, time.monotonic() - started)
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in ends.items())
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        return len(ranges)

    def _check_truncation(self, ends: dict[tuple[str, int], int]) -> None:
        """A source partition that now ends below what was replicated was deleted, re-created or truncated:
        place it again by the resume rule, as if its progress were stored (mid-run, it is)."""
        shrunk = {tp: end for tp, end in ends.items() if end < self.positions.get(tp, 0)}
        if not shrunk:
            return
        progress = {tp: self.positions.pop(tp) - 1 for tp in shrunk}
        self._set_positions(progress)

    def run_once(self, stop: threading.Event) -> None:
        ends = self._retrying(self.end_offsets, stop)
        while self._retrying(lambda: self.copy_round(ends), stop):
            pass
        self._retrying(self.checkpoint, stop)

    def _retrying(self, step: Callable[[], T], stop: threading.Event) -> T:
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
                log.warning("flow=%s will retry in %.0f s: %s", self.flow.name, backoff, exc)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def checkpoint(self) -> None:
        """Translate every selected source group and write the checkpoints that moved (MM2's checkpoint rule)."""
        if self._checkpoints is None:
            return
        listed_at = now_ms()
        translator = FlowTranslator(self.flow, self.plan, self.pool.admin(self.flow.source, self.flow))
        rows = [row for group in translator.groups() for row in translator.translate(group)]
        written = self._checkpoints.emit(rows, listed_at)
        self.group_offsets = rows
        log.info("checkpoints flow=%s groups=%d written=%d", self.flow.name, len({r.group for r in rows}),
                 len(written))

    def schedule(self) -> Schedule:
        """MM2's periodic jobs of this flow, with MM2's intervals and first-run delays."""
        f = self.flow
        jobs = []
        if f.refresh_topics_enabled:
            jobs.append(Periodic("refresh topics", f.refresh_topics_interval_seconds, self.refresh_topics,
                                 first_after_s=f.refresh_topics_interval_seconds))
        if f.sync_topic_configs_enabled:
            jobs.append(Periodic("sync topic configs", f.sync_topic_configs_interval_seconds, self.sync_configs,
                                 first_after_s=f.sync_topic_configs_interval_seconds))
        jobs.append(Periodic("checkpoints", f.emit_checkpoints_interval_seconds, self.checkpoint_and_sync,
                             first_after_s=f.emit_checkpoints_interval_seconds))
        return Schedule(jobs)

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
            schedule.run_due(lambda action: self._retrying(action, stop))
            if not self._retrying(lambda: self.copy_round(self.end_offsets()), stop):
                stop.wait(idle)

    def refresh_topics(self) -> None:
        """Pick up new source topics and partitions (MM2's refresh.topics.interval.seconds)."""
        plan = build_plan([self.flow], self.pool, refresh=True).flows[0]
        if plan == self.plan:
            return
        for gone in sorted(set(self.remote) - {t.topic for t in plan.topics}):
            log.warning("flow=%s: source topic %s is gone (deleted, or no longer selected); its replication "
                        "stops and its remote topic %s is kept, as MM2 does", self.flow.name, gone, self.remote[gone])
        ensure_remote_topics(self.flow, plan, self.pool.admin(self.flow.source, self.flow),
                             self.pool.admin(self.flow.target, self.flow))
        self.plan = plan
        self.remote = {t.topic: t.remote_topic for t in plan.topics}
        self._set_positions({})
        log.info("topics refreshed flow=%s topics=%d", self.flow.name, len(plan.topics))

    def sync_configs(self) -> None:
        """MM2's topic-config sync (``sync.topic.configs.*``): source configs onto the remote topics."""
        if not self.flow.sync_topic_configs_enabled:
            return
        altered = sync_topic_configs(self.flow, self.plan, self.pool.admin(self.flow.source, self.flow),
                                     self.pool.admin(self.flow.target, self.flow))
        log.info("topic configs synced flow=%s topics=%d", self.flow.name, altered)


def _lease(flow: FlowConfig) -> FlowLease | None:
    if not flow.lease_enabled:
        return None
    return FlowLease(flow.source, flow.target, flow.target_consumer.settings(), flow.target_producer.settings(),
                     flow.lease_session_timeout_ms)


def _work(runner: FlowRunner, lease: FlowLease | None, once: bool, stop: threading.Event,
          active: threading.Event) -> None:
    """One flow's thread: take the lease (or stand by for it), then copy; back to standby if it is lost."""
    never_lost = threading.Event()
    while not stop.is_set():
        if lease is not None and not lease.acquire(stop, wait=not once):
            return
        active.set()
        runner._retrying(runner.prepare, stop)
        if once:
            runner.run_once(stop)
            return
        runner.run_continuous(stop, lease.lost if lease is not None else never_lost)
        if lease is not None and lease.lost.is_set():
            log.warning("flow=%s: lease lost; standing by until it can be taken again", runner.flow.name)


def _skip_held(runners: list[FlowRunner], leases: dict[str, FlowLease | None],
               stop: threading.Event) -> list[FlowRunner]:
    """``--once``: take each flow's lease before Spark starts; a flow another run holds is reported, not copied."""
    free = []
    for runner in runners:
        lease = leases[runner.flow.name]
        if lease is None or lease.acquire(stop, wait=False):
            free.append(runner)
            continue
        holder = lease.current_holder()
        runner.stats.held_by = holder.describe() if holder else "another run"
        log.warning("flow=%s is being replicated by %s; this run copies nothing for it", runner.flow.name,
                    runner.stats.held_by)
        lease.release()
    return free


def run_flows(flows: list[FlowConfig], spark_factory: Callable[[], SparkRunner], *, once: bool,
              stop: threading.Event, on_progress: Callable[[list[FlowStats]], None] | None = None,
              heartbeat_pairs: Sequence[FlowConfig] = ()) -> list[FlowStats]:
    """Plan every flow together (to see N->1 merges), then replicate each flow in its own thread.

    Continuous runs start Spark first and wait for their leases as hot standbys; ``--once`` takes the leases
    first, so a run whose flows are all held elsewhere exits at once without starting Spark.
    """
    pool = AdminPool()
    plan: ReplicationPlan = build_plan(flows, pool)
    runners = [FlowRunner(f, p, None, pool) for f, p in zip(flows, plan.flows, strict=True)]
    coordinator = GroupSyncCoordinator([(r.flow, r.latest_group_offsets) for r in runners], pool)
    leases = {r.flow.name: _lease(r.flow) for r in runners}
    heartbeats = HeartbeatEmitter(heartbeat_pairs)
    active = threading.Event()  # some flow of this run holds its lease: heartbeats are this run's to write
    errors: list[BaseException] = []
    spark: SparkRunner | None = None
    try:
        for runner in runners:
            runner.coordinator = coordinator
            runner.ensure_topics()
        for pair in heartbeat_pairs:
            ensure_internal_topics({pair.target: pool.admin(pair.target, pair)}, heartbeats_topics(pair))
        working = _skip_held(runners, leases, stop) if once else runners
        if not working:
            return [r.stats for r in runners]
        spark = spark_factory()
        for runner in working:
            runner.spark = spark

        def work(runner: FlowRunner) -> None:
            try:
                _work(runner, leases[runner.flow.name], once, stop, active)
            except BaseException as exc:  # reported by the main thread; other flows stop too
                errors.append(exc)
                stop.set()

        threads = [threading.Thread(target=work, args=(r,), name=f"flow {r.flow.name}", daemon=True)
                   for r in working]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.2)
            if active.is_set() and not heartbeats.started:
                heartbeats.start()
            if on_progress is not None:
                on_progress([r.stats for r in runners])
        if once and not errors:
            coordinator.sync_all()
    finally:
        if heartbeats.started:
            heartbeats.stop()
        for lease in leases.values():
            if lease is not None:
                lease.release()
        if spark is not None:
            spark.stop()
    if errors:
        raise errors[0]
    return [r.stats for r in runners]

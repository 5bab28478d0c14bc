"""The driver loop of ``mm2py run`` (runs on the driver, never touches records).

Per flow: plan topics, create what is missing on the target, read progress from the target, then run
copy jobs. Each job takes at most one offset range per source partition (so per-partition order holds and
progress never goes backwards) of at most ``mm2py.batch.max.records`` records. ``--once`` copies what the
source partitions held when the run started; continuous mode keeps going until asked to stop, then lets the
job in flight finish so its progress is recorded.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mm2py.checkpoints import (
    CheckpointWriter,
    FlowTranslator,
    GroupOffset,
    merged_group_offsets,
    now_ms,
    sync_group_offsets,
)
from mm2py.config.flow import FlowConfig
from mm2py.engine.copy import CopyResult, CopySpec, PartitionRange
from mm2py.engine.spark import SparkRunner
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.heartbeats import HeartbeatWriter
from mm2py.plan import AdminPool, FlowPlan, ReplicationPlan, build_plan, flow_policy
from mm2py.progress import progress_topic, read_progress
from mm2py.topics import (
    ensure_internal_topics,
    ensure_remote_topics,
    internal_topics,
    offset_syncs_topic,
    sync_topic_configs,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# mm2py's throughput defaults; anything the user sets for the client wins.
# isolation.level: librdkafka defaults to read_committed, Java (and so MM2) to read_uncommitted.
CONSUMER_DEFAULTS = {"isolation.level": "read_uncommitted", "fetch.queue.backoff.ms": "10",
                     "queued.max.messages.kbytes": "65536", "fetch.wait.max.ms": "100"}
PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "10", "batch.size": "1000000",
                     "batch.num.messages": "10000", "queue.buffering.max.messages": "200000"}
# Forced: the copy task relies on partition EOF to finish ranges that end in transaction markers, and the
# progress record needs Connect's key->partition mapping.
CONSUMER_FORCED = {"enable.partition.eof": "true", "enable.auto.commit": "false"}
PRODUCER_FORCED = {"partitioner": "murmur2_random"}


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

    def add(self, results: list[CopyResult], seconds: float) -> None:
        records = sum(r.records for r in results)
        nbytes = sum(r.bytes for r in results)
        self.records += records
        self.bytes += nbytes
        self.jobs += 1
        if seconds > 0:
            self.last_rate = records / seconds
            self.last_mb_rate = nbytes / seconds / 1e6


class FlowRunner:
    """Replicates one flow ``source->target`` through a shared SparkRunner."""

    def __init__(self, flow: FlowConfig, plan: FlowPlan, spark: SparkRunner, pool: AdminPool) -> None:
        self.flow = flow
        self.plan = plan
        self.spark = spark
        self.pool = pool
        self.stats = FlowStats(flow.name)
        self.positions: dict[tuple[str, int], int] = {}
        self.remote: dict[str, str] = {t.topic: t.remote_topic for t in plan.topics}
        self.spec = self._spec()
        self._heartbeats: HeartbeatWriter | None = None
        self._checkpoints: CheckpointWriter | None = None
        self.group_offsets: list[GroupOffset] = []  # the latest translation of every group, for group sync
        self.coordinator: GroupSyncCoordinator | None = None

    @property
    def exactly_once(self) -> bool:
        """MM2's per-target worker key ``<target>.exactly.once.source.support = enabled``."""
        return self.flow.exactly_once_source_support == "enabled"

    def _spec(self) -> CopySpec:
        f = self.flow
        assert f.source_consumer and f.target_producer and f.offset_syncs_producer
        consumer = {**CONSUMER_DEFAULTS, **f.source_consumer.settings(), **CONSUMER_FORCED,
                    "group.id": f"mm2py-{f.source}-{f.target}"}
        producer = {**PRODUCER_DEFAULTS, **f.target_producer.settings(), **PRODUCER_FORCED}
        if self.exactly_once:
            # Only committed source records are copied, and each range commits with its progress.
            consumer["isolation.level"] = "read_committed"
            producer.setdefault("transaction.timeout.ms", "300000")
        return CopySpec(
            flow=f.name, source=f.source, target=f.target,
            consumer_settings=consumer,
            producer_settings=producer,
            syncs_producer_settings=({**PRODUCER_DEFAULTS, **f.offset_syncs_producer.settings()}
                                     if f.emit_offset_syncs_enabled else None),
            syncs_topic=offset_syncs_topic(f) if f.emit_offset_syncs_enabled else None,
            progress_topic=progress_topic(f.source),
            offset_lag_max=f.offset_lag_max,
            dense_offset_syncs=f.dense_offset_syncs,
            provenance=f.provenance_header_enabled,
            exactly_once=self.exactly_once,
            poll_timeout_s=max(f.consumer_poll_timeout_ms / 1000, 0.1),
        )

    # -- preparation (driver, admin calls only) ---------------------------------------------------------

    def prepare(self) -> None:
        f = self.flow
        admins = {f.source: self.pool.admin(f.source, f), f.target: self.pool.admin(f.target, f)}
        ensure_internal_topics(admins, internal_topics(f))
        ensure_remote_topics(f, self.plan, admins[f.source], admins[f.target])
        self.sync_configs()
        assert f.target_consumer is not None
        progress = read_progress(f.target, f.target_consumer.settings(), f.source)
        self._set_positions(progress)
        if f.emit_checkpoints_enabled and f.emit_offset_syncs_enabled:
            self._checkpoints = CheckpointWriter(f)
        if f.emit_heartbeats_enabled:
            assert f.target_producer is not None
            self._heartbeats = HeartbeatWriter(f.source, f.target, flow_policy(f).heartbeats_topic(),
                                               {**f.target_producer.settings()})

    def _partitions(self) -> list[tuple[str, int]]:
        return [(t.topic, p) for t in self.plan.topics for p in range(t.partitions)]

    def _read_committed(self) -> bool:
        return self.spec.consumer_settings.get("isolation.level") == "read_committed"

    def _set_positions(self, progress: dict[tuple[str, int], int]) -> None:
        """Where each partition resumes: after its recorded progress, else where auto.offset.reset says."""
        admin = self.pool.admin(self.flow.source, self.flow)
        partitions = [tp for tp in self._partitions() if tp not in self.positions]
        earliest = admin.list_offsets(partitions, "earliest")
        latest = admin.list_offsets(partitions, "latest", self._read_committed())
        assert self.flow.source_consumer is not None
        reset = self.flow.source_consumer.settings().get("auto.offset.reset", "earliest")
        for tp in partitions:
            low, high = earliest[tp], latest[tp]
            where = f"flow={self.flow.name} topic={tp[0]} partition={tp[1]}"
            if tp not in progress:
                self.positions[tp] = high if reset in ("latest", "largest", "end") else low
                continue
            start = progress[tp] + 1
            if start < low:
                log.warning("%s: offsets %d..%d were deleted from the source before they were replicated; "
                            "resuming at %d", where, start, low - 1, low)
                start = low
            elif start > high:
                log.warning("%s: the source partition ends at %d, before the recorded progress %d: the topic was "
                            "re-created or truncated; replicating it again from offset %d", where, high,
                            start - 1, low)
                start = low
            self.positions[tp] = start

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
        results = self.spark.copy(self.spec, ranges)
        for r in results:
            self.positions[(r.topic, r.partition)] = max(self.positions.get((r.topic, r.partition), 0), r.next_offset)
        self.stats.add(results, time.monotonic() - started)
        self.stats.lag = sum(max(0, end - self.positions.get(tp, end)) for tp, end in ends.items())
        log.info("copied flow=%s ranges=%d records=%d", self.flow.name, len(results), sum(r.records for r in results))
        return len(ranges)

    def _check_truncation(self, ends: dict[tuple[str, int], int]) -> None:
        """A source partition that now ends below what was replicated was deleted, re-created or truncated:
        say so, and replicate it again from its start rather than skip what it holds now."""
        shrunk = {tp: end for tp, end in ends.items() if end < self.positions.get(tp, 0)}
        if not shrunk:
            return
        earliest = self.pool.admin(self.flow.source, self.flow).list_offsets(list(shrunk), "earliest")
        for tp, end in shrunk.items():
            log.warning("flow=%s topic=%s partition=%d: the source partition ends at %d, below the replicated "
                        "position %d: the topic was deleted, re-created or truncated; replicating it again from "
                        "offset %d", self.flow.name, tp[0], tp[1], end, self.positions[tp], earliest[tp])
            self.positions[tp] = earliest[tp]

    def run_once(self, stop: threading.Event) -> None:
        ends = self._retrying(self.end_offsets, stop)
        while self._retrying(lambda: self.copy_round(ends), stop):
            pass
        self.emit_heartbeat()
        self.checkpoint()

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
        """Translate every selected source group and write the checkpoints that moved (§4.9)."""
        if self._checkpoints is None:
            return
        listed_at = now_ms()
        translator = FlowTranslator(self.flow, self.plan, self.pool.admin(self.flow.source, self.flow))
        rows = [row for group in translator.groups() for row in translator.translate(group)]
        written = self._checkpoints.emit(rows, listed_at)
        self.group_offsets = rows
        log.info("checkpoints flow=%s groups=%d written=%d", self.flow.name, len({r.group for r in rows}),
                 len(written))

    def run_continuous(self, stop: threading.Event) -> None:
        interval = self.flow.emit_heartbeats_interval_seconds
        refresh = self.flow.refresh_topics_interval_seconds if self.flow.refresh_topics_enabled else None
        next_heartbeat = 0.0
        next_refresh = time.monotonic() + refresh if refresh else None
        next_checkpoint = time.monotonic() + self.flow.emit_checkpoints_interval_seconds
        configs = self.flow.sync_topic_configs_interval_seconds if self.flow.sync_topic_configs_enabled else None
        next_configs = time.monotonic() + configs if configs else None
        idle = max(self.flow.consumer_poll_timeout_ms / 1000, 0.1)
        while not stop.is_set():
            now = time.monotonic()
            if self._heartbeats is not None and now >= next_heartbeat:
                self._retrying(self.emit_heartbeat, stop)
                next_heartbeat = now + interval
            if next_refresh is not None and now >= next_refresh:
                self._retrying(self.refresh_topics, stop)
                next_refresh = now + (refresh or 0)
            if next_configs is not None and now >= next_configs:
                self._retrying(self.sync_configs, stop)
                next_configs = now + (configs or 0)
            if now >= next_checkpoint:
                self._retrying(self.checkpoint, stop)
                if self.coordinator is not None:
                    self._retrying(functools.partial(self.coordinator.maybe_sync, self.flow.target), stop)
                next_checkpoint = now + self.flow.emit_checkpoints_interval_seconds
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

    def emit_heartbeat(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.emit()


class GroupSyncCoordinator:
    """Commits translated group offsets per target cluster, across every flow into it.

    A merged remote topic is fed by several flows; the offset committed for a group must be safe for all
    of them, so the sync looks at the latest translations of every flow with the same target.
    """

    def __init__(self, runners: list[FlowRunner], pool: AdminPool) -> None:
        self.runners = [r for r in runners if r.flow.sync_group_offsets_enabled]
        self.pool = pool
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}

    def maybe_sync(self, target: str, force: bool = False) -> None:
        runners = [r for r in self.runners if r.flow.target == target]
        if not runners:
            return
        with self._lock:
            now = time.monotonic()
            if not force and now < self._next.get(target, 0.0):
                return
            self._next[target] = now + runners[0].flow.sync_group_offsets_interval_seconds
            offsets = merged_group_offsets(row for r in runners for row in r.group_offsets)
            outcome = sync_group_offsets(self.pool.admin(target, runners[0].flow), offsets)
        for group, what in outcome.items():
            log.info("group offset sync target=%s group=%s %s", target, group, what)

    def sync_all(self) -> None:
        for target in sorted({r.flow.target for r in self.runners}):
            self.maybe_sync(target, force=True)


def run_flows(flows: list[FlowConfig], spark_factory: Callable[[], SparkRunner], *, once: bool,
              stop: threading.Event, on_progress: Callable[[list[FlowStats]], None] | None = None) -> list[FlowStats]:
    """Plan every flow together (to see N->1 merges), then replicate each flow in its own thread."""
    pool = AdminPool()
    plan: ReplicationPlan = build_plan(flows, pool)
    spark = spark_factory()
    runners = [FlowRunner(f, p, spark, pool) for f, p in zip(flows, plan.flows, strict=True)]
    coordinator = GroupSyncCoordinator(runners, pool)
    for runner in runners:
        runner.coordinator = coordinator
    errors: list[BaseException] = []
    try:
        for runner in runners:
            runner.prepare()

        def work(runner: FlowRunner) -> None:
            try:
                if once:
                    runner.run_once(stop)
                else:
                    runner.run_continuous(stop)
            except BaseException as exc:  # reported by the main thread; other flows stop too
                errors.append(exc)
                stop.set()

        threads = [threading.Thread(target=work, args=(r,), name=f"flow {r.flow.name}", daemon=True)
                   for r in runners]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=1.0)
            if on_progress is not None:
                on_progress([r.stats for r in runners])
        if once and not errors:
            coordinator.sync_all()
    finally:
        spark.stop()
    if errors:
        raise errors[0]
    return [r.stats for r in runners]

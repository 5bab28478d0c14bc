"""``mm2py run``: flows in threads with their leases and heartbeats, and signals that end a run cleanly.

``run`` installs the signal handlers and starts Spark through ``run_flows``; ``run_flows`` plans every flow
together (to see N->1 merges), takes or waits for each flow's lease, writes heartbeats from their own thread and
runs one ``FlowRunner`` per flow in a thread of its own.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import FrameType

from mm2py.config import LoadedConfig
from mm2py.config.flow import FlowConfig
from mm2py.config.spark_security import SPARK_SECURITY_KEYS, warn_if_spark_unprotected
from mm2py.control.admin_pool import AdminPool
from mm2py.control.cutover_mark import refuse_cut_over_flows
from mm2py.control.features import SkippedFeature, topic_grant, without
from mm2py.control.group_sync import GroupSyncCoordinator
from mm2py.control.heartbeats import HeartbeatEmitter, heartbeat_flows
from mm2py.control.plan import FlowPlan, build_plan
from mm2py.control.topics import (
    InternalTopic,
    ensure_internal_topics,
    ensure_remote_topics,
    heartbeats_topics,
    internal_topics,
)
from mm2py.engine.driver import FlowRunner
from mm2py.engine.flow_sync import say_skipped
from mm2py.engine.flow_thread import flow_lease, skip_held, work
from mm2py.engine.retry import Retrier
from mm2py.engine.spark import JobsCancelled, SparkRunner
from mm2py.engine.stats import FlowStats
from mm2py.engine.task_control import TaskControl
from mm2py.errors import ClusterUnreachableError, KafkaOperationError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger(__name__)


def run(
    loaded: LoadedConfig,
    *,
    once: bool,
    master: str | None,
    deploy_mode: str | None,
    spark_conf: dict[str, str],
    on_progress: Callable[[list[FlowStats]], None] | None = None,
    metrics: RunMetrics | None = None,
    from_timestamp_ms: int | None = None,
) -> list[FlowStats]:
    """Replicate until done (``once``) or until SIGTERM/SIGINT, after which the job in flight finishes.

    ``from_timestamp_ms`` (``run --from-timestamp``) is every flow's ``mm2py.start.timestamp`` for this run."""
    flows = list(loaded.flows)
    if from_timestamp_ms is not None:
        flows = [replace(f, start_timestamp_ms=from_timestamp_ms) for f in flows]
    first = flows[0]
    conf = {**dict(first.spark_conf), **spark_conf}
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.warning(
            "received %s: finishing the copy in flight (for at most task.shutdown.graceful.timeout.ms), then stopping",
            signal.Signals(signum).name,
        )
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    names = ", ".join(f.name for f in loaded.flows)

    def start_spark() -> SparkRunner:
        runner = SparkRunner.start(
            f"mm2py {names}",
            master or first.spark_master,
            deploy_mode or first.spark_deploy_mode,
            conf,
            flows=len(loaded.flows),
        )
        # PySpark's SparkContext takes SIGINT over to cancel every job at once; Ctrl-C must finish the batch.
        signal.signal(signal.SIGINT, on_signal)
        warn_if_spark_unprotected(str(runner.sc.master), runner.settings(SPARK_SECURITY_KEYS))
        return runner

    try:
        return run_flows(
            flows,
            start_spark,
            once=once,
            stop=stop,
            on_progress=on_progress,
            metrics=metrics,
            heartbeat_pairs=heartbeat_flows(loaded.mm, loaded.flows, loaded.clusters),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def copy_once(loaded: LoadedConfig) -> list[str]:
    """``cutover``'s copy to lag 0: the flows run once, in this process, exactly as ``run --once`` runs them
    (Spark as the file configures it). Returns the holders of flows another run held, which were not copied."""
    stats = run(loaded, once=True, master=None, deploy_mode=None, spark_conf={})
    return [f"{s.flow}: held by {s.held_by}" for s in stats if s.held_by]


def _heartbeats(
    flows: list[FlowConfig], heartbeat_pairs: Sequence[FlowConfig], once: bool, metrics: RunMetrics | None
) -> HeartbeatEmitter:
    """A --once run writes the heartbeats that go into its flows' sources once, before the flows read their end
    offsets, so it copies them too and leaves no lag behind; a continuous run writes every pair on its timer."""
    sources = {f.source for f in flows}
    once_only = {(p.source, p.target) for p in heartbeat_pairs if p.target in sources} if once else set()
    return HeartbeatEmitter(
        heartbeat_pairs, on_emit=metrics.heartbeat_written if metrics else None, once_only=once_only
    )


def _expect(metrics: RunMetrics, flows: Sequence[FlowConfig], heartbeat_pairs: Sequence[FlowConfig]) -> None:
    """What /health and /ready wait for: every flow of the run, and every heartbeat pair on its interval."""
    for flow in flows:
        metrics.health.starting(flow.name)
        metrics.set_metric_names_formats(flow.source, flow.target, flow.metric_names_formats)
        metrics.set_throughput_limit(flow.source, flow.target, flow.throughput_max_bytes_per_second)
    for pair in heartbeat_pairs:
        metrics.health.heartbeats_expected(pair.source, pair.target, pair.emit_heartbeats_interval_seconds)


def ensure_heartbeats_topics(
    pairs: Sequence[FlowConfig],
    pool: AdminPool,
    stop: threading.Event,
    metrics: RunMetrics | None = None,
    refused: set[tuple[str, str]] | None = None,
) -> list[FlowConfig]:
    """Heartbeats topics before the plan: the reverse pairs' topic on a source (MM2 creates it there too) is then
    part of the plan, and replicated, from the very first run on. Returns the pairs that can write heartbeats.

    The listing is asked once, so a target that does not answer is named at once (README: within 30 s). A
    creation call that goes unanswered, which only a first run can meet, is retried like a flow's steps: the node
    KRaft names as controller may be one that was killed a moment ago and is not fenced yet, and waiting for a
    node that is up cures that. A creation the cluster refuses for its settings (a replication factor above its
    broker count) stops the run with the line that says what to fix; one an ACL refuses drops that pair's
    heartbeats with one line naming the ACL (``refused`` collects its topic), as MM2 logs it and goes on.
    """
    kept = []
    for pair in pairs:
        admin = pool.admin(pair.target, pair)
        existing = admin.list_topics()
        missing = [t for t in heartbeats_topics(pair) if t.name not in existing]
        denied: list[tuple[InternalTopic, KafkaOperationError]] = []
        if missing:
            create = functools.partial(ensure_internal_topics, {pair.target: admin}, missing)
            retrier = Retrier(pair, FlowStats(pair.name), retries=lambda exc: isinstance(exc, ClusterUnreachableError))
            denied = retrier(create, stop)
        for topic, error in denied:
            say_skipped(_skipped(pair, topic, error), metrics)
            if refused is not None:
                refused.add((topic.cluster, topic.name))
        if not denied:
            kept.append(pair)
    return kept


def ensure_flow_internal_topics(
    flow: FlowConfig, pool: AdminPool, stop: threading.Event, metrics: RunMetrics | None, said: set[tuple[str, str]]
) -> FlowConfig:
    """The flow's internal topics, created where missing (retried while a node is away, as every step); returns
    the flow without the optional features whose topics an ACL refused, each said once (``said``: topics
    already named)."""
    admins = {flow.source: pool.admin(flow.source, flow), flow.target: pool.admin(flow.target, flow)}
    create = functools.partial(ensure_internal_topics, admins, internal_topics(flow))
    refused = Retrier(flow, FlowStats(flow.name), metrics)(create, stop)
    for topic, error in refused:
        assert topic.feature is not None  # only optional topics come back refused
        flow = without(flow, topic.feature)
        if (topic.cluster, topic.name) not in said:
            said.add((topic.cluster, topic.name))
            say_skipped(_skipped(flow, topic, error), metrics)
    return flow


def _skipped(flow: FlowConfig, topic: InternalTopic, error: KafkaOperationError) -> SkippedFeature:
    assert topic.feature is not None
    return SkippedFeature(flow.source, flow.target, topic.feature, topic_grant(topic.cluster, topic.name), error)


def _ensure_remote_topics(flow: FlowConfig, plan: FlowPlan, pool: AdminPool) -> None:
    """Create or grow the flow's remote topics on the target (its internal topics are made before the plan)."""
    ensure_remote_topics(flow, plan, pool.admin(flow.source, flow), pool.admin(flow.target, flow))


def _internal_topics(
    flows: list[FlowConfig],
    pairs: Sequence[FlowConfig],
    pool: AdminPool,
    stop: threading.Event,
    metrics: RunMetrics | None,
) -> tuple[list[FlowConfig], list[FlowConfig]]:
    """Every internal topic of the run: the flows and heartbeat pairs without what an ACL refused, each said once;
    ``/health`` expects the heartbeats of the pairs that can write them."""
    said: set[tuple[str, str]] = set()  # internal topics an ACL refused, each named once
    kept = ensure_heartbeats_topics(pairs, pool, stop, metrics, said)
    if metrics is not None:
        _expect(metrics, (), kept)
    return [ensure_flow_internal_topics(f, pool, stop, metrics, said) for f in flows], kept


def run_flows(
    flows: list[FlowConfig],
    spark_factory: Callable[[], SparkRunner],
    *,
    once: bool,
    stop: threading.Event,
    on_progress: Callable[[list[FlowStats]], None] | None = None,
    heartbeat_pairs: Sequence[FlowConfig] = (),
    metrics: RunMetrics | None = None,
) -> list[FlowStats]:
    """Plan every flow together (to see N->1 merges), then replicate each flow in its own thread.

    Continuous runs start Spark first and wait for their leases as hot standbys; ``--once`` takes the leases
    first, so a run whose flows are all held elsewhere exits at once without starting Spark.
    """
    pool = AdminPool()
    if metrics is not None:  # from the first moment: /health is not 200 before the flows are known
        _expect(metrics, flows, ())
    refuse_cut_over_flows(flows, pool)  # before anything is created on a target that applications may use now
    flows, heartbeat_pairs = _internal_topics(flows, heartbeat_pairs, pool, stop, metrics)
    plans = {f.name: p for f, p in zip(flows, build_plan(flows, pool).flows, strict=True)}
    stats = {f.name: FlowStats(f.name, path=plans[f.name].copy_path) for f in flows}
    leases = {f.name: flow_lease(f) for f in flows}
    heartbeats = _heartbeats(flows, heartbeat_pairs, once, metrics)
    active = threading.Event()  # some flow of this run holds its lease: heartbeats are this run's to write
    errors: list[BaseException] = []
    spark: SparkRunner | None = None
    control: TaskControl | None = None
    coordinator = GroupSyncCoordinator(pool)  # each flow's sync adds itself
    try:
        for f in flows:  # a node down at start-up must not end the run
            Retrier(f, stats[f.name], metrics)(functools.partial(_ensure_remote_topics, f, plans[f.name], pool), stop)
        working = skip_held(flows, stats, leases, stop, metrics) if once else flows
        if not working:
            return list(stats.values())
        if once:
            heartbeats.start()  # this run holds a lease: its heartbeats are due now, before any end offset
        spark = spark_factory()
        control = None if once else TaskControl(spark.driver_host, spark.driver_bind_address)  # tasks report there
        if control is not None and metrics is not None:
            metrics.health.task_control_at(control.url)
        runners = [
            FlowRunner(f, plans[f.name], spark, pool, coordinator, metrics, control=control, stats=stats[f.name])
            for f in working
        ]

        def copy_flow(runner: FlowRunner) -> None:
            try:
                work(runner, leases[runner.flow.name], once, stop, active)
            except JobsCancelled as exc:  # the run stops; the next one copies again what was not recorded
                log.warning("flow=%s: %s", runner.flow.name, exc)
            except BaseException as exc:  # reported by the main thread; other flows stop too
                errors.append(exc)
                stop.set()

        threads = _started_threads(copy_flow, runners)
        grace = _GracePeriod(stop, max(f.task_shutdown_graceful_timeout_ms for f in working) / 1000)
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.2)
            grace.cancel_when_over(spark, time.monotonic())
            if active.is_set() and not heartbeats.started:
                heartbeats.start()
            if on_progress is not None:
                on_progress(list(stats.values()))
        if once and not errors and not spark.cancelled:
            coordinator.sync_all()
    finally:
        if heartbeats.started:
            heartbeats.stop()
        for lease in leases.values():
            if lease is not None:
                lease.release()
        if spark is not None:
            spark.stop()
        if control is not None:
            control.close()
    if errors:
        raise errors[0]
    return list(stats.values())


def _started_threads(copy_flow: Callable[[FlowRunner], None], runners: list[FlowRunner]) -> list[threading.Thread]:
    """One daemon thread per flow, started."""
    threads = [threading.Thread(target=copy_flow, args=(r,), name=f"flow {r.flow.name}", daemon=True) for r in runners]
    for thread in threads:
        thread.start()
    return threads


class _GracePeriod:
    """How long a stopping run waits for its copy tasks to end on their own (they record their progress on the
    way out) before it cancels them: Connect's ``task.shutdown.graceful.timeout.ms``, counted from the stop."""

    def __init__(self, stop: threading.Event, seconds: float) -> None:
        self.stop = stop
        self.seconds = seconds
        self.stopped_at: float | None = None

    def over(self, now: float) -> bool:
        if not self.stop.is_set():
            return False
        if self.stopped_at is None:
            self.stopped_at = now
        return now - self.stopped_at >= self.seconds

    def cancel_when_over(self, spark: SparkRunner, now: float) -> None:
        if spark.cancelled or not self.over(now):
            return
        log.warning(
            "the copy tasks did not end within task.shutdown.graceful.timeout.ms (%.0f ms) of the stop: cancelling "
            "them; what they copied since their last progress record is copied again by the next run",
            self.seconds * 1000,
        )
        spark.cancel_jobs()

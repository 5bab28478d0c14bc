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
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import FrameType

from mm2py.config import LoadedConfig
from mm2py.config.flow import FlowConfig
from mm2py.config.spark_security import SPARK_SECURITY_KEYS, warn_if_spark_unprotected
from mm2py.control.admin_pool import AdminPool
from mm2py.control.cutover_mark import refuse_cut_over_flows
from mm2py.control.features import LEASE, SkippedFeature, topic_grant, without
from mm2py.control.group_sync import GroupSyncCoordinator
from mm2py.control.handover import FlowHandoverWatch
from mm2py.control.heartbeats import HeartbeatEmitter, heartbeat_flows
from mm2py.control.lease import FlowLease, lease_group
from mm2py.control.plan import ReplicationPlan, build_plan
from mm2py.control.topics import LEASE_TOPIC, InternalTopic, ensure_internal_topics, heartbeats_topics, internal_topics
from mm2py.engine.driver import FlowRunner
from mm2py.engine.flow_sync import say_skipped
from mm2py.engine.retry import Retrier
from mm2py.engine.spark import SparkRunner
from mm2py.engine.stats import FlowStats
from mm2py.engine.task_control import TaskControl
from mm2py.errors import ClusterUnreachableError, KafkaOperationError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger(__name__)
HANDOVER_POLL_S = 2.0  # how often a flow handed over to a cut-over reads whether it has ended


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
        log.warning("received %s: finishing the batch in flight, then stopping", signal.Signals(signum).name)
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


def _lease(flow: FlowConfig) -> FlowLease | None:
    if not flow.lease_enabled:
        return None
    return FlowLease(
        flow.source,
        flow.target,
        flow.target_consumer.settings(),
        flow.target_producer.settings(),
        flow.lease_session_timeout_ms,
        FlowHandoverWatch(flow),
    )


def _work(
    runner: FlowRunner, lease: FlowLease | None, once: bool, stop: threading.Event, active: threading.Event
) -> None:
    """One flow's thread: take the lease (or stand by for it), then copy; back to standby if it is lost, and out
    of the lease group while a cut-over has the flow (to the end of this run if it cut the flow over)."""
    never_lost = threading.Event()
    health = runner.metrics.health if runner.metrics is not None else None
    on_standby = functools.partial(health.standing_by, runner.flow.name) if health is not None else None
    while not stop.is_set():
        if health is not None:
            health.starting(runner.flow.name)
        if lease is not None:
            if not _take(runner, lease, stop, wait=not once, on_standby=on_standby):
                if lease.handed_over.is_set() and not once and not _wait_out_handover(runner, lease, stop):
                    continue  # given back: take the lease again
                return
            lease = lease if lease.held.is_set() else None  # refused by an ACL: the flow runs without it
        active.set()
        if health is not None:
            health.starting(runner.flow.name)  # holding the lease now: placing its partitions
        runner.retrying(runner.prepare, stop)
        if health is not None:
            health.copying(runner.flow.name)
        try:
            if once:
                runner.run_once(stop)
                return
            runner.run_continuous(stop, lease.lost if lease is not None else never_lost)
        finally:
            runner.save_tails()
        if lease is not None and lease.handed_over.is_set():
            if _wait_out_handover(runner, lease, stop):
                return
        elif lease is not None and lease.lost.is_set():
            log.warning("flow=%s: lease lost; standing by until it can be taken again", runner.flow.name)


def _wait_out_handover(runner: FlowRunner, lease: FlowLease, stop: threading.Event) -> bool:
    """Out of the lease group until the cut-over that asked for the flow ends: True once it cut the flow over
    (this run copies nothing more for it) or the run stops, False when it gave the flow back."""
    flow, by = runner.flow, lease.requested_by or "`mm2py cutover`"
    lease.release()
    log.warning("flow=%s: handed over to %s; standing by until it cuts the flow over or gives it back", flow.name, by)
    if runner.metrics is not None:
        runner.metrics.health.handed_over(flow.name, by)
    claims = FlowHandoverWatch(flow).wait_for_end(stop, HANDOVER_POLL_S)
    if claims is None:  # the run stops
        return True
    if claims.mark is None:
        log.warning("flow=%s: %s gave the flow back; taking the lease again", flow.name, by)
        return False
    log.warning("flow=%s was %s; this run copies nothing more for it", flow.name, claims.mark.describe())
    if runner.metrics is not None:
        runner.metrics.health.cut_over(flow.name, claims.mark.describe())
    return True


def _skip_held(
    runners: list[FlowRunner], leases: dict[str, FlowLease | None], stop: threading.Event
) -> list[FlowRunner]:
    """``--once``: take each flow's lease before Spark starts; a flow another run holds is reported, not copied."""
    for lease in leases.values():
        if lease is not None:
            lease.join()
    free = []
    for runner in runners:
        lease = leases[runner.flow.name]
        if lease is None or _take(runner, lease, stop, wait=False):
            if lease is not None and not lease.held.is_set():
                leases[runner.flow.name] = None  # refused by an ACL: the flow runs without it
            free.append(runner)
            continue
        if lease.handed_over.is_set():  # a cut-over has the flow
            runner.stats.held_by = str(lease.requested_by)
        else:
            holder = lease.current_holder()
            runner.stats.held_by = holder.describe() if holder else "another run"
        if runner.metrics is not None:
            runner.metrics.health.standing_by(runner.flow.name, runner.stats.held_by)
        log.warning(
            "flow=%s is being replicated by %s; this run copies nothing for it", runner.flow.name, runner.stats.held_by
        )
        lease.release()
    return free


def _take(
    runner: FlowRunner,
    lease: FlowLease,
    stop: threading.Event,
    *,
    wait: bool,
    on_standby: Callable[[str], None] | None = None,
) -> bool:
    """Take the flow's lease (``FlowLease.acquire``); when an ACL refuses the lease group or topic the flow runs
    without a lease, said once, as with ``mm2py.lease.enabled = false`` (True, and the lease not held)."""
    try:
        return lease.acquire(stop, wait=wait, on_standby=on_standby)
    except KafkaOperationError as exc:
        if not exc.refused:
            raise
        lease.release()
        f = runner.flow
        grant = f"Read on group {lease_group(f.source, f.target)} and {topic_grant(f.target, LEASE_TOPIC)}"
        say_skipped(SkippedFeature(f.source, f.target, LEASE, grant, exc), runner.metrics)
        return True


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
    plan: ReplicationPlan = build_plan(flows, pool)
    runners = [FlowRunner(f, p, None, pool, metrics=metrics) for f, p in zip(flows, plan.flows, strict=True)]
    coordinator = GroupSyncCoordinator([(r.flow, r.sync.latest_group_offsets) for r in runners], pool)
    leases = {r.flow.name: _lease(r.flow) for r in runners}
    heartbeats = _heartbeats(flows, heartbeat_pairs, once, metrics)
    active = threading.Event()  # some flow of this run holds its lease: heartbeats are this run's to write
    errors: list[BaseException] = []
    spark: SparkRunner | None = None
    control: TaskControl | None = None
    try:
        for runner in runners:
            runner.sync.coordinator = coordinator
            runner.retrying(runner.ensure_topics, stop)  # a node down at start-up must not end the run
        working = _skip_held(runners, leases, stop) if once else runners
        if not working:
            return [r.stats for r in runners]
        if once:
            heartbeats.start()  # this run holds a lease: its heartbeats are due now, before any end offset
        spark = spark_factory()
        # Following tasks report there.
        control = None if once else TaskControl(spark.driver_host, spark.driver_bind_address)
        if control is not None and metrics is not None:
            metrics.health.task_control_at(control.url)
        for runner in working:
            runner.rounds.spark = spark
            runner.control = control

        def work(runner: FlowRunner) -> None:
            try:
                _work(runner, leases[runner.flow.name], once, stop, active)
            except BaseException as exc:  # reported by the main thread; other flows stop too
                errors.append(exc)
                stop.set()

        threads = [threading.Thread(target=work, args=(r,), name=f"flow {r.flow.name}", daemon=True) for r in working]
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
        if control is not None:
            control.close()
    if errors:
        raise errors[0]
    return [r.stats for r in runners]

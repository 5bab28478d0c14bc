"""One flow's life in a run: its lease taken (or stood by for), its copy, its hand-over to a cut-over.

Why apart from :mod:`mm2py.engine.run`: the run starts things (Spark, heartbeats, the threads) and stops them;
what a flow does with its lease while it runs, and what a ``--once`` run does with a flow another run holds, are
the lease's rules, read here in one place.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence

from mm2py.config.flow import FlowConfig
from mm2py.control.features import LEASE, SkippedFeature, topic_grant
from mm2py.control.handover import FlowHandoverWatch
from mm2py.control.lease import FlowLease, lease_group
from mm2py.control.topics import LEASE_TOPIC
from mm2py.engine.driver import FlowRunner
from mm2py.engine.flow_sync import say_skipped
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger(__name__)
HANDOVER_POLL_S = 2.0  # how often a flow handed over to a cut-over reads whether it has ended


def flow_lease(flow: FlowConfig) -> FlowLease | None:
    """The flow's lease (one run per flow), or None when ``mm2py.lease.enabled`` is false."""
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


def work(
    runner: FlowRunner, lease: FlowLease | None, once: bool, stop: threading.Event, active: threading.Event
) -> None:
    """One flow's thread: take the lease (or stand by for it), then copy; back to standby if it is lost, and out
    of the lease group while a cut-over has the flow (to the end of this run if it cut the flow over)."""
    never_lost = threading.Event()
    flow, metrics = runner.flow, runner.metrics
    health = metrics.health if metrics is not None else None
    on_standby = functools.partial(health.standing_by, flow.name) if health is not None else None
    while not stop.is_set():
        if health is not None:
            health.starting(flow.name)
        if lease is not None:
            if not take(flow, metrics, lease, stop, wait=not once, on_standby=on_standby):
                if lease.handed_over.is_set() and not once and not _wait_out_handover(runner, lease, stop):
                    continue  # given back: take the lease again
                return
            lease = lease if lease.held.is_set() else None  # refused by an ACL: the flow runs without it
        active.set()
        if health is not None:
            health.starting(flow.name)  # holding the lease now: placing its partitions
        try:
            runner.retrying(runner.prepare, stop)
            if health is not None:
                health.copying(flow.name)
            if once:
                runner.run_once(stop)
                return
            runner.run_continuous(stop, lease.lost if lease is not None else never_lost)
        except (KafkaOperationError, ReplicationError) as exc:
            # A continuous run ends by a stop. One that comes while a failure that may pass is being retried (its
            # source gone, say, while the flow starts or copies) ends the flow as a stop, as Connect's worker ends
            # at SIGTERM: the failure was logged at each retry, and what was in flight is copied again by the next
            # run. A permanent one stays, and so does any failure of --once: its copy up to its ends did not finish.
            if once or not (stop.is_set() and runner.retrying.retriable(exc)):
                raise
            log.warning("flow=%s: stopped while retrying: %s", flow.name, exc)
            return
        finally:
            runner.save_tails()
        if lease is not None and lease.handed_over.is_set():
            if _wait_out_handover(runner, lease, stop):
                return
        elif lease is not None and lease.lost.is_set():
            log.warning("flow=%s: lease lost; standing by until it can be taken again", flow.name)


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


def skip_held(
    flows: Sequence[FlowConfig],
    stats: dict[str, FlowStats],
    leases: dict[str, FlowLease | None],
    stop: threading.Event,
    metrics: RunMetrics | None,
) -> list[FlowConfig]:
    """``--once``: take each flow's lease before Spark starts; a flow another run holds is reported (in its
    ``stats``, on ``/health`` and in one line), not copied. Returns the flows to copy."""
    for lease in leases.values():
        if lease is not None:
            lease.join()
    free = []
    for flow in flows:
        lease = leases[flow.name]
        if lease is None or take(flow, metrics, lease, stop, wait=False):
            if lease is not None and not lease.held.is_set():
                leases[flow.name] = None  # refused by an ACL: the flow runs without it
            free.append(flow)
            continue
        held = stats[flow.name]
        if lease.handed_over.is_set():  # a cut-over has the flow
            held.held_by = str(lease.requested_by)
        else:
            holder = lease.current_holder()
            held.held_by = holder.describe() if holder else "another run"
        if metrics is not None:
            metrics.health.standing_by(flow.name, held.held_by)
        log.warning("flow=%s is being replicated by %s; this run copies nothing for it", flow.name, held.held_by)
        lease.release()
    return free


def take(
    flow: FlowConfig,
    metrics: RunMetrics | None,
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
        grant = f"Read on group {lease_group(flow.source, flow.target)} and {topic_grant(flow.target, LEASE_TOPIC)}"
        say_skipped(SkippedFeature(flow.source, flow.target, LEASE, grant, exc), metrics)
        return True

"""The broker-failure scenarios of issue 20, each one ``mm2py run`` of the default copy path between a three-node
source and a three-node target (``fault_bed``), with every record checked afterwards (``record_check``).

Why one module for tests and campaign: ``tests/realkafka/test_broker_failures.py`` runs each scenario once,
scaled down, and asserts; ``bench/broker_faults.py`` runs the same code at full size, many times, and reports. So
what the campaign measures is exactly what the tests prove.

Every scenario leaves both clusters as it found them: each node running, every partition in sync.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from confluent_kafka import KafkaException

from tests.harness.broker_faults import (
    LeaderChurn,
    await_in_sync,
    bounce,
    busiest_leader,
    down,
    freeze,
    reassign,
    thaw,
)
from tests.harness.fault_bed import (
    PARTITIONS,
    VALUE_SIZE,
    Bed,
    Flow,
    Landed,
    Outcome,
    caught_up,
    outcome,
    pause,
    wait_exit,
)
from tests.harness.faults import MirrorRun
from tests.harness.polling import ConditionNotMet, poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.record_check import PacedProducer, digest_topic, high_watermarks, load

ONCE_TIMEOUT = 900.0  # a --once run that has not exited by then is killed and reported with exit None
LANDING_TIMEOUT = 240.0  # Spark's start and the flow's preparation, on two busy cores


@contextmanager
def _restarted_afterwards(cluster: KafkaCluster) -> Iterator[None]:
    """Whatever happens, every node of ``cluster`` runs again (and is thawed) when the block ends."""
    try:
        yield
    finally:
        for node in cluster.nodes:
            if node.running:
                node.send_signal(signal.SIGCONT)  # a node left frozen by a failure
            else:
                cluster.restart_node(node.node_id)


def leader_kill(bed: Bed, records: int, *, side: str = "target", at: float = 0.4, how: str = "sigkill") -> Outcome:
    """``--once`` of ``records``; at ``at`` of the copy the node leading most partitions of the topic on ``side``
    (the remote topic on the target, the copied one on the source) goes down; it is started again only once the
    run has exited."""
    topic, source = bed.dataset(records)
    flow = bed.flow(topic, f"{side}-leader-{how}")
    cluster = bed.cluster(side)
    landed = Landed(bed.target, flow.remote_topic, records)
    bed.begin()
    try:
        with _restarted_afterwards(cluster), MirrorRun(flow.config, flow.log, "--once", verbose=True) as run:
            copied = landed.wait_for(run, at, LANDING_TIMEOUT)
            victim = busiest_leader(cluster, flow.remote_topic if side == "target" else topic)
            down(cluster, victim, how)
            bed.event(copied, side, victim, how)
            exit_code = wait_exit(run, ONCE_TIMEOUT)
            seconds = time.monotonic() - bed.started
    finally:
        landed.close()
    return outcome(bed, f"{side}-leader-{how}", flow, run, exit_code, source, seconds)


def _roll(bed: Bed, run: MirrorRun, share: Callable[[], float], side: str, how: str, gap_s: float) -> None:
    """Each node of ``side`` in turn: down, started again, back in sync; ``gap_s`` from one node to the next.
    A ``--once`` run that finished meanwhile ends the roll (the nodes not rolled are named as skipped)."""
    cluster = bed.cluster(side)
    for node in cluster.nodes:
        if run.proc.poll() is not None:
            bed.event(share(), side, node.node_id, "skipped (the run had exited)")
            continue
        began = time.monotonic()
        bed.event(share(), side, node.node_id, how)
        bounce(cluster, node.node_id, how)
        bed.event(share(), side, node.node_id, "restarted")
        await_in_sync(cluster)
        bed.event(share(), side, node.node_id, "in sync")
        if node is not cluster.nodes[-1]:
            pause(run, gap_s - (time.monotonic() - began))


def rolling_once(bed: Bed, records: int, *, side: str, how: str, gap_s: float = 20.0, start_at: float = 0.1) -> Outcome:
    """``--once`` of ``records`` at full speed while each node of ``side`` in turn goes down and comes back."""
    topic, source = bed.dataset(records)
    flow = bed.flow(topic, f"rolling-{how}-{side}-once")
    landed = Landed(bed.target, flow.remote_topic, records)
    bed.begin()
    try:
        with _restarted_afterwards(bed.cluster(side)), MirrorRun(flow.config, flow.log, "--once", verbose=True) as run:
            landed.wait_for(run, start_at, LANDING_TIMEOUT)
            _roll(bed, run, landed.fraction, side, how, gap_s)
            exit_code = wait_exit(run, ONCE_TIMEOUT)
            seconds = time.monotonic() - bed.started
    finally:
        landed.close()
    return outcome(bed, f"rolling-{how}-{side}-once", flow, run, exit_code, source, seconds)


@contextmanager
def _continuous(bed: Bed, name: str, rate: float) -> Iterator[tuple[Flow, MirrorRun, Landed, PacedProducer]]:
    """A new source topic written at ``rate`` records/s and a continuous run copying it, records landing."""
    topic = bed.new_source_topic(name)
    flow = bed.flow(topic, name)
    producer = PacedProducer(bed.source.bootstrap, topic, rate, partitions=PARTITIONS, value_size=VALUE_SIZE)
    landed = Landed(bed.target, flow.remote_topic, 0)
    bed.begin()
    try:
        with MirrorRun(flow.config, flow.log, verbose=True) as run:
            producer.start()
            run.wait_for(lambda: landed.records() > 0, LANDING_TIMEOUT, "records landing on the target")
            yield flow, run, landed, producer
    finally:
        landed.close()
        producer.stop()


def _finish_continuous(bed: Bed, name: str, flow: Flow, run: MirrorRun, producer: PacedProducer) -> Outcome:
    """Stop writing, wait until the target holds what the source does, stop the run with SIGTERM, compare."""
    produced = producer.stop()
    run.wait_for(
        lambda: caught_up(bed.source, flow.source_topic, bed.target, flow.remote_topic),
        ONCE_TIMEOUT,
        f"the target holding all {produced} records",
    )
    alive = run.proc.poll() is None
    exit_code = run.stop()
    seconds = time.monotonic() - bed.started
    source = digest_topic(bed.source.bootstrap, flow.source_topic, PARTITIONS)
    result = outcome(bed, name, flow, run, exit_code, source, seconds)
    result.notes.update(produced=produced, alive_until_stopped=alive)
    return result


def rolling_continuous(
    bed: Bed, rolls: list[tuple[str, str]], *, rate: float = 4000.0, gap_s: float = 20.0, name: str = ""
) -> Outcome:
    """A continuous run copying ``rate`` records/s while, for each (side, how) of ``rolls`` in turn, each node of
    that side goes down that way and comes back; then the load stops, the target catches up and the run is
    stopped with SIGTERM (it must have stayed up, and exit 0)."""
    name = name or "rolling-" + "-".join(f"{how}-{side}" for side, how in rolls) + "-continuous"
    sides = {side for side, _how in rolls}
    with contextlib.ExitStack() as stack:
        for side in sorted(sides):
            stack.enter_context(_restarted_afterwards(bed.cluster(side)))
        flow, run, landed, producer = stack.enter_context(_continuous(bed, name, rate))
        for side, how in rolls:
            _roll(bed, run, lambda: landed.records() / max(1, producer.sent), side, how, gap_s)
            pause(run, gap_s)  # the next cluster's roll starts as the next node of a roll would
        return _finish_continuous(bed, name, flow, run, producer)


def stall_leader(
    bed: Bed, records: int, *, seconds: float = 60.0, at: float = 0.3, request_timeout_s: float = 30.0
) -> Outcome:
    """``--once``; at ``at`` of the copy the node leading most remote partitions is SIGSTOPped for ``seconds``
    (longer than the target producer's ``request_timeout_s``, Java's default 30 s unless given: its requests time
    out, its partitions get new leaders), then SIGCONT."""
    topic, source = bed.dataset(records)
    flow = bed.flow(topic, "stall", target={"producer.request.timeout.ms": str(int(request_timeout_s * 1000))})
    landed = Landed(bed.target, flow.remote_topic, records)
    bed.begin()
    try:
        with _restarted_afterwards(bed.target), MirrorRun(flow.config, flow.log, "--once", verbose=True) as run:
            copied = landed.wait_for(run, at, LANDING_TIMEOUT)
            victim = busiest_leader(bed.target, flow.remote_topic)
            freeze(bed.target, victim)
            bed.event(copied, "target", victim, "sigstop")
            pause(run, seconds)
            thaw(bed.target, victim)
            bed.event(landed.fraction(), "target", victim, "sigcont")
            exit_code = wait_exit(run, ONCE_TIMEOUT)
            seconds_taken = time.monotonic() - bed.started
    finally:
        landed.close()
    return outcome(bed, "stall", flow, run, exit_code, source, seconds_taken)


def churn_once(bed: Bed, records: int, *, interval_s: float = 3.0, start_at: float = 0.02) -> Outcome:
    """``--once`` of ``records`` while the remote topic's leaders and replicas move every ``interval_s``."""
    topic, source = bed.dataset(records)
    flow = bed.flow(topic, "churn")
    landed = Landed(bed.target, flow.remote_topic, records)
    bed.begin()
    try:
        with MirrorRun(flow.config, flow.log, "--once", verbose=True) as run:
            landed.wait_for(run, start_at, LANDING_TIMEOUT)
            churn = LeaderChurn(bed.target, flow.remote_topic, interval_s).start()
            try:
                exit_code = wait_exit(run, ONCE_TIMEOUT)
                seconds = time.monotonic() - bed.started
            finally:
                events = churn.stop()
    finally:
        landed.close()
    result = outcome(bed, "churn", flow, run, exit_code, source, seconds)
    result.notes["churn"] = [vars(e) for e in events]
    return result


def churn_continuous(bed: Bed, *, rate: float = 4000.0, seconds: float = 30.0, interval_s: float = 3.0) -> Outcome:
    """A continuous run copying ``rate`` records/s while the remote topic's leaders and replicas move every
    ``interval_s`` for ``seconds``."""
    with _continuous(bed, "churn-continuous", rate) as (flow, run, _landed, producer):
        churn = LeaderChurn(bed.target, flow.remote_topic, interval_s).start()
        try:
            pause(run, seconds)
        finally:
            events = churn.stop()
        result = _finish_continuous(bed, "churn-continuous", flow, run, producer)
    result.notes["churn"] = [vars(e) for e in events]
    return result


def _offline_topic(bed: Bed, node: int) -> str:
    """A new source topic whose partition 0 lives on ``node`` alone (so one node down is all its replicas down);
    min.insync.replicas 1 for it, else it could not be written at all."""
    topic = bed.new_source_topic("offline", {"min.insync.replicas": "1"})
    reassign(bed.source, topic, {0: [node]})
    return topic


def _others_caught_up(bed: Bed, flow: Flow, timeout: float, ends: dict[int, int] | None = None) -> float | None:
    """Seconds until partitions 1.. of the remote topic held ``ends`` (by default what the source's held when
    asked); None if not within ``timeout`` (they did not keep copying)."""
    others = range(1, PARTITIONS)
    started = time.monotonic()
    try:
        if ends is None:
            ends = high_watermarks(bed.source.bootstrap, flow.source_topic, others)

        def copied() -> bool:
            try:
                now = high_watermarks(bed.target.bootstrap, flow.remote_topic, others, timeout=5)
            except KafkaException:  # the run has not created the remote topic yet
                return False
            return all(now[p] >= ends[p] for p in others)

        poll_until(copied, timeout, "the other partitions copied while partition 0 is offline")
    except (ConditionNotMet, KafkaException):
        return None
    return round(time.monotonic() - started, 1)


def partition_offline_once(
    bed: Bed, records: int, *, seconds: float = 60.0, node: int = 3, hold_s: float | None = None
) -> Outcome:
    """A source topic whose partition 0 lives on ``node`` alone. A first ``--once`` run copies ``records`` (the flow
    exists, as after a run by cron); ``records`` more arrive, ``node`` is SIGKILLed, and the next ``--once`` run
    starts while partition 0 has no replica left (the others lost one). It should copy the other partitions
    meanwhile, partition 0 once ``node`` is back after ``seconds``, and exit 0 (the outage being shorter than
    ``mm2py.retry.timeout.seconds``). With ``hold_s``, ``node`` comes back ``hold_s`` after the others were
    copied (the run, with nothing left but partition 0, must keep waiting for it that long), ``seconds`` at the
    latest. ``notes["others_copied_after_s"]`` says whether and when the others were copied while partition 0
    was away."""
    topic = _offline_topic(bed, node)
    load(bed.source.bootstrap, topic, records, partitions=PARTITIONS, value_size=VALUE_SIZE, seed=7)
    flow = bed.flow(topic, "offline-once")
    bed.begin()
    with MirrorRun(flow.config, flow.log, "--once", verbose=True) as first:
        first_exit = wait_exit(first, ONCE_TIMEOUT)
    load(bed.source.bootstrap, topic, records, partitions=PARTITIONS, value_size=VALUE_SIZE, seed=8)
    source = digest_topic(bed.source.bootstrap, topic, PARTITIONS)
    landed = Landed(bed.target, flow.remote_topic, 2 * records)
    bed.begin()
    with _restarted_afterwards(bed.source):
        bed.source.kill_node(node)
        killed = time.monotonic()
        bed.event(landed.fraction(), "source", node, "sigkill")
        try:
            with MirrorRun(flow.config, flow.log, "--once", verbose=True) as run:
                # The source's ends as digested before the kill: asking its nodes now would meet leaders that
                # are still moving off the killed node.
                ends = {p: len(source[p]) for p in range(1, PARTITIONS)}
                others_done = _others_caught_up(bed, flow, seconds, ends)
                outage = seconds
                if hold_s is not None and others_done is not None:
                    outage = min(seconds, time.monotonic() - killed + hold_s)
                pause(run, outage - (time.monotonic() - killed))
                bed.source.restart_node(node)
                bed.event(landed.fraction(), "source", node, "restarted")
                exit_code = wait_exit(run, ONCE_TIMEOUT)
                seconds_taken = time.monotonic() - bed.started
        finally:
            landed.close()
    result = outcome(bed, "offline-once", flow, run, exit_code, source, seconds_taken)
    result.notes.update(first_run_exit=first_exit, others_copied_after_s=others_done, offline_s=round(outage, 1))
    return result


def partition_offline_continuous(bed: Bed, *, seconds: float = 60.0, rate: float = 4000.0, node: int = 3) -> Outcome:
    """A continuous run copying ``rate`` records/s of a topic whose partition 0 lives on ``node`` alone; ``node`` is
    SIGKILLed for ``seconds`` while the load goes on (the producer's writes to partition 0 wait in its queue). The
    other partitions must keep copying meanwhile (``notes["others_copied_after_s"]``: how long after the kill
    they held what the source held then), partition 0 once ``node`` is back; the run stays up."""
    topic = _offline_topic(bed, node)
    flow = bed.flow(topic, "offline-continuous")
    producer = PacedProducer(bed.source.bootstrap, topic, rate, partitions=PARTITIONS, value_size=VALUE_SIZE)
    landed = Landed(bed.target, flow.remote_topic, 0)
    bed.begin()
    with _restarted_afterwards(bed.source), MirrorRun(flow.config, flow.log, verbose=True) as run:
        try:
            producer.start()
            run.wait_for(lambda: landed.records() > 0, LANDING_TIMEOUT, "records landing on the target")
            pause(run, 3.0)  # let the load run a little before the fault (the scenario's shape, not a sync)
            bed.source.kill_node(node)
            killed = time.monotonic()
            bed.event(landed.records() / max(1, producer.sent), "source", node, "sigkill")
            pause(run, seconds / 2)  # the others must be copied while partition 0 stays away
            others_done = _others_caught_up(bed, flow, seconds / 2)
            pause(run, seconds - (time.monotonic() - killed))
            bed.source.restart_node(node)
            bed.event(landed.records() / max(1, producer.sent), "source", node, "restarted")
        finally:
            landed.close()
        result = _finish_continuous(bed, "offline-continuous", flow, run, producer)
    result.notes.update(others_copied_after_s=others_done, offline_s=seconds)
    return result

"""Broker failures on real three-node Kafka clusters: nodes killed, stopped, stalled and restarted, leaders
elected, partitions reassigned or placed on one node, while ``mm2py run`` copies.

Why real clusters: the batch path's wire client follows Kafka's Java clients through every such failure, and its
unit tests prove the rules against a fake cluster (``fake_cluster.py``); only real brokers show what they really
answer (which errors, in which order, how fast a new leader takes over, what a stale leader does with requests
it finds in its socket after a stall).

Every cluster here is RF 3 with ``min.insync.replicas`` 2, as production clusters are: one node may go at any
time and acks=all writes go on; two down stop writes to the partitions they shared. A test that stops a node
restarts it before it ends, and waits for every partition to be back in sync (``await_in_sync``), as an operator
rolling a cluster does before the next node.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as LibraryTopicPartition  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from tests.harness.kafka_harness import client_config
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaNode, KafkaRuntime

_log = logging.getLogger(__name__)

# Cluster-wide, so mm2py's own topics (progress, offset syncs, heartbeats, leases) are as safe as the copies.
FAULT_BROKER_CONFIG = {"min.insync.replicas": "2"}
IN_SYNC_TIMEOUT = 120.0


def fault_cluster(work_dir: Path, runtime: KafkaRuntime | None = None, jvm_options: Iterable[str] = ()) -> KafkaCluster:
    """Three nodes (broker and controller each), RF 3 and min.insync.replicas 2 for every topic; not started.
    ``jvm_options`` as KafkaCluster's (bench/broker_costs.py tries JIT settings with them)."""
    return KafkaCluster(work_dir, 3, runtime=runtime, broker_config=FAULT_BROKER_CONFIG, jvm_options=jvm_options)


# -- what the cluster says ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    leader: int  # -1: none
    replicas: tuple[int, ...]  # preferred leader first
    isr: tuple[int, ...]


def partition_states(
    cluster: KafkaCluster, topic: str | None = None, *, bootstrap: str | None = None
) -> dict[tuple[str, int], PartitionState]:
    """Every partition of ``topic`` (or of every topic) from a fresh Metadata request: to a live node of the
    cluster, or to ``bootstrap`` (a fresh client asks its one bootstrap broker first)."""
    admin = AdminClient(client_config(bootstrap or cluster.bootstrap))
    metadata = admin.list_topics(topic, timeout=10)
    return {
        (name, p.id): PartitionState(p.leader, tuple(p.replicas), tuple(p.isrs))
        for name, t in metadata.topics.items()
        if t.error is None
        for p in t.partitions.values()
    }


def leaders(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    return {partition: state.leader for (_t, partition), state in partition_states(cluster, topic).items()}


def busiest_leader(cluster: KafkaCluster, topic: str) -> int:
    """The node that leads most partitions of ``topic`` (the lowest id of a tie)."""
    counts: dict[int, int] = {}
    for leader in leaders(cluster, topic).values():
        if leader >= 0:
            counts[leader] = counts.get(leader, 0) + 1
    if not counts:
        raise LookupError(f"no partition of {topic} has a leader")
    return min(counts, key=lambda node: (-counts[node], node))


def in_sync(cluster: KafkaCluster, topics: Iterable[str] | None = None) -> bool:
    """Every running node says that every partition (of ``topics``, or of the whole cluster) has a leader and all
    its replicas in sync.

    Why every node: a node just restarted answers Metadata while it still replays the metadata log, and may say
    "all in sync" from a state long gone; one that kept running tells the truth. Trusting any one answer let a
    rolling restart take the next node down while the partitions had a single replica left (seen: an ISR that
    went empty, and Kafka 4's recovery from its last known eligible leader)."""
    try:
        views = [
            partition_states(cluster, bootstrap=node.address()) if topics is None else _states_of(cluster, topics, node)
            for node in cluster.nodes
            if node.running
        ]
    except KafkaException:
        return False
    return bool(views) and all(
        bool(states) and all(s.leader >= 0 and set(s.isr) == set(s.replicas) for s in states.values())
        for states in views
    )


def _states_of(cluster: KafkaCluster, topics: Iterable[str], node: KafkaNode) -> dict[tuple[str, int], PartitionState]:
    states: dict[tuple[str, int], PartitionState] = {}
    for topic in topics:
        states |= partition_states(cluster, topic, bootstrap=node.address())
    return states


def await_in_sync(cluster: KafkaCluster, topics: Iterable[str] | None = None, timeout: float = IN_SYNC_TIMEOUT) -> None:
    topics = None if topics is None else list(topics)
    poll_until(lambda: in_sync(cluster, topics), timeout, f"every partition of {topics or 'the cluster'} in sync")


# -- nodes --------------------------------------------------------------------------------------------------------


def _process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def freeze(cluster: KafkaCluster, node_id: int) -> None:
    """SIGSTOP: the node keeps its sockets and answers nothing, like a machine that stalls (a long GC pause, a
    hung disk); returns once the kernel shows it stopped."""
    node = cluster.node(node_id)
    node.send_signal(signal.SIGSTOP)
    poll_until(lambda: _process_state(node.pid) == "T", 10, f"node {node_id} stopped", interval=0.01)


def thaw(cluster: KafkaCluster, node_id: int) -> None:
    node = cluster.node(node_id)
    node.send_signal(signal.SIGCONT)
    poll_until(lambda: _process_state(node.pid) not in ("T", ""), 10, f"node {node_id} running", interval=0.01)


def down(cluster: KafkaCluster, node_id: int, how: str) -> None:
    """Take a node down: ``sigterm`` (a controlled shutdown: its leaderships move first) or ``sigkill`` (a crash)."""
    if how == "sigterm":
        cluster.stop_node(node_id)
    elif how == "sigkill":
        cluster.kill_node(node_id)
    else:
        raise ValueError(f"unknown way down {how!r} (sigterm, sigkill)")


def bounce(cluster: KafkaCluster, node_id: int, how: str) -> None:
    """Take a node down (see ``down``) and start it again on its data; returns once it is a registered broker
    again (not yet in sync: see ``await_in_sync``)."""
    down(cluster, node_id, how)
    cluster.restart_node(node_id)


# -- leaders and replicas -------------------------------------------------------------------------------------------


def elect_preferred(cluster: KafkaCluster, topic: str, partitions: Iterable[int]) -> None:
    """A preferred-leader election (what auto.leader.rebalance and kafka-leader-election.sh do); a partition whose
    preferred replica leads already needs none, which is not an error."""
    admin = AdminClient(client_config(cluster.bootstrap))
    asked = [TopicPartition(topic, p) for p in partitions]
    # No keyword arguments: confluent-kafka 2.16.1 raises SystemError for any ("more argument specifiers than
    # keyword list entries"), a bug in its C binding.
    results = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=60)
    for tp, error in results.items():
        if error is not None and "ELECTION_NOT_NEEDED" not in str(error):
            raise RuntimeError(f"preferred-leader election of {tp.topic}-{tp.partition} failed: {error}")


def reassign(cluster: KafkaCluster, topic: str, assignment: dict[int, list[int]], timeout: float = 120.0) -> None:
    """Give partitions of ``topic`` new replica lists (preferred leader first); returns once the reassignment is
    complete (new replicas caught up, removed ones gone). confluent-kafka 2.16 has no AlterPartitionReassignments,
    kafka-python's admin client (mm2py's own dependency) sends it as kafka-reassign-partitions.sh would."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        answers = admin.alter_partition_reassignments(
            {LibraryTopicPartition(topic, p): replicas for p, replicas in assignment.items()}, timeout_ms=30_000
        )
        failed = {tp: error for tp, error in answers.items() if error is not None}
        if failed:
            raise RuntimeError(f"reassignment of {topic} refused: {failed}")

        def done() -> bool:
            ongoing = admin.list_partition_reassignments({topic: list(assignment)}, timeout_ms=10_000)
            states = partition_states(cluster, topic)
            return not ongoing and all(list(states[(topic, p)].replicas) == r for p, r in assignment.items())

        poll_until(done, timeout, f"reassignment of {topic} {assignment}", interval=0.2)
    finally:
        admin.close()


@dataclass
class ChurnEvent:
    at_s: float
    action: str  # "rotate", "shrink", "grow" (reassignments), "elect" (preferred-leader election)
    partition: int
    replicas: list[int]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]


@dataclass
class LeaderChurn:
    """Moves leaders and replicas of ``topic`` every ``interval_s``, in a thread, until stopped.

    Each turn takes the next partition and either reverses its replica order (a reassignment that completes at
    once and makes another node its preferred leader) or, every third turn, drops its preferred replica and, the
    turn after, adds it back in front (a reassignment that copies the partition's log to the new replica, which
    then leads); then runs a preferred-leader election on every partition, so leaders really move while the copy
    writes to them."""

    cluster: KafkaCluster
    topic: str
    interval_s: float = 3.0
    events: list[ChurnEvent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _error: BaseException | None = None
    _thread: threading.Thread | None = None

    def start(self) -> LeaderChurn:
        self._thread = threading.Thread(target=self._run, name="leader-churn", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[ChurnEvent]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)
        if self._error is not None:
            raise RuntimeError(f"leader churn on {self.topic} failed") from self._error
        return self.events

    def _run(self) -> None:
        started = time.monotonic()
        shrunk: tuple[int, int] | None = None  # (partition, the replica taken from it), added back the next turn
        turn = 0
        try:
            while not self._stop.wait(self.interval_s):  # the churn's pace, not synchronisation
                states = partition_states(self.cluster, self.topic)
                partitions = sorted(p for _t, p in states)
                if shrunk is not None:
                    partition, removed = shrunk
                    action, new = "grow", [removed, *states[(self.topic, partition)].replicas]
                    shrunk = None
                else:
                    partition = partitions[turn % len(partitions)]
                    replicas = list(states[(self.topic, partition)].replicas)
                    if turn % 3 == 2 and len(replicas) == 3:
                        action, new = "shrink", replicas[1:]
                        shrunk = (partition, replicas[0])
                    else:
                        action, new = "rotate", replicas[::-1]
                before = leaders(self.cluster, self.topic)
                reassign(self.cluster, self.topic, {partition: new})
                elect_preferred(self.cluster, self.topic, partitions)
                after = leaders(self.cluster, self.topic)
                self.events.append(ChurnEvent(time.monotonic() - started, action, partition, new, before, after))
                turn += 1
            if shrunk is not None:  # leave every partition with three replicas
                partition, removed = shrunk
                replicas = list(partition_states(self.cluster, self.topic)[(self.topic, partition)].replicas)
                reassign(self.cluster, self.topic, {partition: [removed, *replicas]})
        except BaseException as exc:  # reported by stop()
            _log.exception("leader churn on %s", self.topic)
            self._error = exc

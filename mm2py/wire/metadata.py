"""Which broker leads each partition, kept current the way Kafka's Java clients keep their metadata.

The rules, from Kafka's clients (``org.apache.kafka.clients``):

- an update is *requested*, not made at once (``Metadata.requestUpdate``): on an error that means stale metadata
  (an ``InvalidMetadataException``: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, a lost connection, ...), on a
  disconnect from any broker (``NetworkClient.DefaultMetadataUpdater.handleServerDisconnect``: "the disconnect
  may be the result of stale metadata"), and while a partition has no known leader;
- one Metadata request is in flight at a time, sent to a broker that is connected and has not just failed
  (``leastLoadedNode``), never more often than the retry backoff allows;
- a partition's leader is replaced only by an answer with a leader epoch at least as new as the one known
  (``Metadata.updateLatestMetadata``), so a lagging broker's answer never moves a partition back to a leader it
  has lost;
- a broker that disconnected leads nothing until a Metadata answer says otherwise: every partition it led is
  looked up again, so no request for them goes to it meanwhile.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable

from mm2py.backoff import RETRY_BACKOFF_S, ExponentialBackoff
from mm2py.errors import ReplicationError
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import Cluster, ClusterMetadata, Pending
from mm2py.wire.errors import WireError

log = logging.getLogger(__name__)


class Leaders:
    """The leaders of ``topics``' partitions on ``cluster``, refreshed from the cluster's own thread by
    :meth:`poll` (non-blocking: a Metadata request is a :class:`Pending` like any other)."""

    def __init__(
        self,
        cluster: Cluster,
        topics: Iterable[str],
        clock: Callable[[], float] = time.monotonic,
        backoff: ExponentialBackoff | None = None,
    ) -> None:
        self.cluster = cluster
        self.topics = set(topics)
        self._clock = clock
        self._leaders: dict[TopicPartition, int] = {}
        self._epochs: dict[TopicPartition, int] = {}
        self.errors: dict[TopicPartition, WireError] = {}  # partitions (or topics, as partition -1) in error
        self._failed_nodes: dict[int, float] = {}  # node -> when it last failed
        self._pending: Pending[ClusterMetadata] | None = None
        self._update_requested = True
        self._next_attempt = 0.0
        # Java's Metadata backs its refreshes off by retry.backoff.ms and retry.backoff.max.ms too.
        self._backoff = backoff or ExponentialBackoff()
        self._failed_attempts = 0
        self.updates = 0  # answers taken in, for tests and logs

    # -- what the fetcher and the sender ask ------------------------------------------------------------------

    def leader(self, tp: TopicPartition) -> int | None:
        """The partition's leader, or None (not known, none alive, or its broker just failed)."""
        node = self._leaders.get(tp)
        if node is None or node < 0:
            return None
        return node

    def epoch(self, tp: TopicPartition) -> int:
        return self._epochs.get(tp, -1)

    def request_update(self) -> None:
        self._update_requested = True

    def node_failed(self, node: int) -> None:
        """``node`` disconnected or timed out: the partitions it led are looked up again before anything else
        goes to them."""
        self._failed_nodes[node] = self._clock()
        for tp, leader in list(self._leaders.items()):
            if leader == node:
                self._leaders[tp] = -1
        self._update_requested = True

    def settled(self) -> bool:
        """No update requested or in flight."""
        return not self._update_requested and self._pending is None

    # -- refreshing ------------------------------------------------------------------------------------------

    def poll(self) -> None:
        """Take in a Metadata answer that came, or send the next request when one is due."""
        if self._pending is not None:
            if not self._pending.done:
                return
            pending, self._pending = self._pending, None
            answer, node = pending.result(), pending.node
            if isinstance(answer, WireError):
                log.info("metadata from node %d of %s failed: %s", node, self.cluster.alias, answer)
                self._failed_nodes[node] = self._clock()
                self._retry_later()
                return
            self._absorb(answer)
            return
        now = self._clock()
        if not self._update_requested or now < self._next_attempt:
            return
        chosen = self._choose_node(now)
        if chosen is None:
            self._retry_later()
            return
        self._update_requested = False
        self._pending = self.cluster.metadata(chosen, sorted(self.topics))

    def _retry_later(self) -> None:
        self._update_requested = True
        self._next_attempt = self._clock() + self._backoff.backoff(self._failed_attempts)
        self._failed_attempts += 1

    def _choose_node(self, now: float) -> int | None:
        """The connected broker with the fewest requests in flight that has not failed lately, else any that has
        not, else the one that failed longest ago (Java's ``NetworkClient.leastLoadedNode``: ready nodes first,
        fewest in-flight requests, none in reconnect backoff). A broker that stopped answering has requests
        waiting on it, so it is the last one asked."""
        known = sorted(self.cluster.brokers())
        if not known:
            return None
        fresh = [n for n in known if now - self._failed_nodes.get(n, -1e9) > self.cluster.request_timeout_s]
        ready = [n for n in fresh if self.cluster.ready(n)]
        if ready:
            least = min(self.cluster.in_flight(n) for n in ready)
            return random.choice([n for n in ready if self.cluster.in_flight(n) == least])
        if fresh:
            return random.choice(fresh)
        return min(known, key=lambda n: self._failed_nodes.get(n, 0.0))

    def _absorb(self, answer: ClusterMetadata) -> None:
        self.updates += 1
        self._failed_attempts = 0
        self.errors = {(topic, -1): error for topic, error in answer.topic_errors.items()}
        missing_leader = False
        for tp, part in answer.partitions.items():
            known_epoch = self._epochs.get(tp, -1)
            if part.epoch >= 0 and part.epoch < known_epoch:
                continue  # an older view than ours (Metadata.updateLatestMetadata)
            if part.epoch >= 0:
                self._epochs[tp] = part.epoch
            alive = part.leader >= 0 and part.leader in answer.brokers and part.error is None
            self._leaders[tp] = part.leader if alive else -1
            if part.error is not None:
                self.errors[tp] = part.error
            missing_leader = missing_leader or not alive
        for node in {leader for leader in self._leaders.values() if leader >= 0}:
            self._failed_nodes.pop(node, None)  # a fresh answer names it leader: it is back
        if missing_leader or answer.topic_errors:
            self._retry_later()  # keep looking until every partition has a leader


def partition_count(cluster: Cluster, topic: str, timeout_s: float) -> int:
    """How many partitions ``topic`` has (a Metadata request from any answering broker, retried until
    ``timeout_s``); raises ``mm2py.errors.ReplicationError`` if no answer names it."""
    deadline = time.monotonic() + timeout_s
    last: object = "no broker answered"
    while time.monotonic() < deadline:
        for node in sorted(cluster.brokers()):
            pending = cluster.metadata(node, [topic])
            while not pending.done and time.monotonic() < deadline:
                cluster.poll(0.05)
            answer = pending.result() if pending.done else None
            if isinstance(answer, ClusterMetadata):
                count = sum(1 for t, _p in answer.partitions if t == topic)
                if count:
                    return count
                last = answer.topic_errors.get(topic, "no partitions")
            elif answer is not None:
                last = answer
        cluster.poll(RETRY_BACKOFF_S)
    raise ReplicationError(f"the partitions of {topic} on {cluster.alias} are not known: {last}")

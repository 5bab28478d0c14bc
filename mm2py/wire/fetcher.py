"""The fetch side of the batch path: every partition of a copy task fetched from its leader, and kept fetched
through leader moves, lost brokers and stalls, the way Kafka's Java consumer does it.

The rules, from Kafka's clients (``clients/consumer/internals``: AbstractFetch, FetchCollector, Fetcher):

- one Fetch in flight per broker, carrying every partition it leads that has no fetch in flight
  (``AbstractFetch.prepareFetchRequests`` skips nodes with a pending fetch); a partition is in one fetch at a
  time, so no offset is ever fetched twice at once;
- each partition carries its leader epoch (KIP-320), so a broker that lost the leadership answers
  FENCED_LEADER_EPOCH rather than data;
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR,
  REPLICA_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE, UNKNOWN_LEADER_EPOCH, a lost connection or a timed-out request:
  the partition is fetched again at the same offset, from the leader a metadata refresh names
  (``FetchCollector.handleInitializeErrors``), after the retry backoff; nothing is skipped, nothing re-read;
- partitions that returned data move to the end of the fetch order (KIP-74), so a broker that fills a response
  in request order does not starve the others;
- each broker is fetched from through an incremental fetch session (KIP-227, :mod:`mm2py.wire.fetch_session`):
  a request names only the partitions whose position moved, an answer only those with something new; an error
  of the session's own is answered by fetching everything again at once, in a full request;
- OFFSET_OUT_OF_RANGE (the records were deleted before they were copied) and errors that waiting cannot fix stop
  that partition, with the error; a partition whose leader stays away longer than the stall timeout stops with
  a retriable error. The other partitions go on either way.

Turning fetched record sets into batches to send is :mod:`mm2py.wire.forwarding`'s; this module only moves
positions it is told about.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mm2py.backoff import RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, ExponentialBackoff
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import Cluster, FetchAnswer, FetchedPartition, FetchPosition, Pending
from mm2py.wire.errors import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT,
    WireError,
)
from mm2py.wire.fetch_session import FetchSession
from mm2py.wire.metadata import Leaders

DEFAULT_PARTITION_BYTES = 4 * 1024 * 1024
# A fetch session's own errors: answered by a full request at once (no backoff, no metadata refresh)
_SESSION = frozenset({FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH})


@dataclass(eq=False)
class FetchPartition:
    """What the fetcher knows of one source partition; the caller moves ``position`` and sets ``done``."""

    topic: str
    partition: int
    position: int
    end: int  # fetching stops once the position reaches it
    fetch_bytes: int = DEFAULT_PARTITION_BYTES
    done: bool = False
    failure: WireError | None = None  # why it stopped early; the caller counts what was copied before
    node: int | None = None  # the broker its fetch is in flight at
    retry_at: float = 0.0
    attempts: int = 0
    last_progress: float = -1.0  # when it last moved (or was caught up); set by the fetcher's clock
    source_end: int = -1  # the end the last answer reported (the last stable offset under read_committed)
    log_start: int = -1

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def active(self) -> bool:
        return not self.done and self.failure is None

    @property
    def caught_up(self) -> bool:
        return 0 <= self.source_end <= self.position


@dataclass(frozen=True)
class FetcherSettings:
    read_committed: bool
    stall_timeout_s: float = 120.0  # a partition without progress (and not caught up) this long stops
    max_wait_ms: int = 100
    max_bytes: int = 64 * 1024 * 1024
    retry_backoff_s: float = RETRY_BACKOFF_S
    retry_backoff_max_s: float = RETRY_BACKOFF_MAX_S


class Fetcher:
    """Fetches the given partitions from ``cluster`` (one thread; the cluster is not shared)."""

    def __init__(
        self,
        cluster: Cluster,
        partitions: Iterable[FetchPartition],
        settings: FetcherSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.clock = clock
        self.partitions = {p.key: p for p in partitions}
        for p in self.partitions.values():
            p.last_progress = clock()
        self.order: dict[TopicPartition, None] = dict.fromkeys(self.partitions)  # KIP-74 rotation
        self.backoff = ExponentialBackoff(settings.retry_backoff_s, settings.retry_backoff_max_s)
        self.leaders = Leaders(cluster, {p.topic for p in self.partitions.values()}, clock, self.backoff)
        self.in_flight: dict[int, tuple[Pending[FetchAnswer], list[TopicPartition]]] = {}
        self.sessions: dict[int, FetchSession] = {}  # per broker, as AbstractFetch keeps them

    def active(self) -> list[FetchPartition]:
        """The partitions still to fetch, in fetch order."""
        return [self.partitions[key] for key in self.order if self.partitions[key].active]

    def step(self, wait_s: float = 0.1) -> list[tuple[FetchPartition, FetchedPartition]]:
        """Send what may go, wait up to ``wait_s`` for answers; returns each partition answered with data (or
        none: its ``source_end`` still moved), for the caller to take batches from and move positions."""
        now = self.clock()
        self.leaders.poll()
        self._send(now)
        self.cluster.poll(wait_s if self.in_flight else min(wait_s, self.settings.retry_backoff_s))
        answered = self._collect()
        self._stop_stalled(self.clock())
        return answered

    # -- sending ----------------------------------------------------------------------------------------------

    def _send(self, now: float) -> None:
        by_node: dict[int, list[FetchPartition]] = collections.defaultdict(list)
        for state in self.active():
            if state.node is not None or now < state.retry_at:
                continue
            leader = self.leaders.leader(state.key)
            if leader is None:
                self.leaders.request_update()
                continue
            if leader in self.in_flight:
                continue
            if not self.cluster.ready(leader):
                self.leaders.request_update()  # connecting, or gone (see Sender._destination)
                continue
            by_node[leader].append(state)
        for node, states in by_node.items():
            session = self.sessions.setdefault(node, FetchSession(node))
            data = session.build(
                FetchPosition(s.topic, s.partition, s.position, s.fetch_bytes, self.leaders.epoch(s.key))
                for s in states
            )
            pending = self.cluster.fetch(
                node,
                data.to_send,
                read_committed=self.settings.read_committed,
                max_wait_ms=self.settings.max_wait_ms,
                max_bytes=self.settings.max_bytes,
                session=(data.metadata.session_id, data.metadata.epoch),
                forgotten=data.to_forget,
            )
            self.in_flight[node] = (pending, [s.key for s in states])
            for s in states:
                s.node = node

    # -- answers ----------------------------------------------------------------------------------------------

    def _collect(self) -> list[tuple[FetchPartition, FetchedPartition]]:
        answered: list[tuple[FetchPartition, FetchedPartition]] = []
        for node in [n for n, (pending, _keys) in self.in_flight.items() if pending.done]:
            pending, keys = self.in_flight.pop(node)
            for key in keys:
                self.partitions[key].node = None
            answer = pending.result()
            now = self.clock()
            session = self.sessions[node]
            if not isinstance(answer, WireError) and answer.error is not None and answer.error.kind not in _SESSION:
                answer = answer.error  # an error for the whole request that is not the session's: as a lost one
            if isinstance(answer, WireError):
                session.handle_error(answer)
                self.leaders.node_failed(node)  # its partitions are looked up again before the next fetch
                for key in keys:
                    self._retry(self.partitions[key], answer, now)
                continue
            if not session.handle_answer(answer):
                continue  # AbstractFetch.handleFetchSuccess: fetched again, from the same positions
            for part in answer.partitions:
                state = self.partitions.get((part.topic, part.partition))
                if state is None or not state.active:
                    continue
                if part.error is not None:
                    self._failed(state, part.error, now)
                    continue
                state.attempts = 0
                state.source_end = part.last_stable_offset if self.settings.read_committed else part.high_watermark
                state.log_start = part.log_start_offset
                if state.caught_up or part.records:
                    state.last_progress = now
                if part.records:
                    self.order.pop(state.key)
                    self.order[state.key] = None
                answered.append((state, part))
        return answered

    def _failed(self, state: FetchPartition, error: WireError, now: float) -> None:
        if error.kind is OFFSET_OUT_OF_RANGE or not error.retriable:
            state.failure = WireError(error.kind, f"fetching offset {state.position}: {error.detail or error.name}")
            return
        if error.invalid_metadata:
            self.leaders.request_update()
        self._retry(state, error, now)

    def _retry(self, state: FetchPartition, error: WireError, now: float) -> None:
        """Fetch the same offset again after the backoff (from the leader metadata names by then)."""
        state.attempts += 1
        state.retry_at = now + self.backoff.backoff(state.attempts - 1)

    def close(self, timeout_s: float = 1.0) -> None:
        """Close the fetch sessions the brokers hold for this fetcher (AbstractFetch's
        ``prepareCloseFetchSessionRequests``), waiting up to ``timeout_s`` for the answers; a broker that cannot
        be reached is skipped (it evicts the session in time)."""
        closing = []
        for node, session in self.sessions.items():
            data = session.closing()
            if data is None or not self.cluster.ready(node):
                continue
            closing.append(
                self.cluster.fetch(
                    node,
                    [],
                    read_committed=self.settings.read_committed,
                    max_wait_ms=0,
                    max_bytes=self.settings.max_bytes,
                    session=(data.metadata.session_id, data.metadata.epoch),
                )
            )
        deadline = self.clock() + timeout_s
        while any(not p.done for p in closing) and self.clock() < deadline:
            self.cluster.poll(max(0.0, deadline - self.clock()))

    def _stop_stalled(self, now: float) -> None:
        for state in self.active():
            if state.caught_up:
                state.last_progress = now  # nothing to wait for: not a stall
            elif now - state.last_progress > self.settings.stall_timeout_s:
                state.failure = WireError(
                    REQUEST_TIMED_OUT,
                    f"no records from offset {state.position} for {self.settings.stall_timeout_s:.0f} s "
                    f"(its leader: {self.leaders.leader(state.key)})",
                )

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
- a fetch to a broker starts ``min_interval_s`` after the last one at the earliest (mm2py's, not the Java
  consumer's: 0 there; a following task spaces its fetches so that records arriving a few at a time come in
  fewer, fuller answers, :mod:`mm2py.executor.batch_fetching`);
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
    sent: FetchPosition | None = None  # what the last fetch asked for (reused while nothing in it changed)

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
    min_bytes: int = 1
    retry_backoff_s: float = RETRY_BACKOFF_S
    retry_backoff_max_s: float = RETRY_BACKOFF_MAX_S
    # The least time between the starts of two fetches to one broker (0: the next goes as soon as an answer is
    # taken). Not a Java consumer setting: mm2py's following tasks set it (mm2py.continuous.fetch.min.interval.ms)
    # so that records arriving a few at a time come in fewer, fuller answers.
    min_interval_s: float = 0.0


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
        self.in_flight: dict[int, tuple[Pending[FetchAnswer], dict[TopicPartition, FetchPartition]]] = {}
        self.sessions: dict[int, FetchSession] = {}  # per broker, as AbstractFetch keeps them
        # Looking for partitions to send costs a pass over all of them; it is done only when one may be sendable:
        # after an answer, a metadata update, a backoff's end, or while a leader is unknown or not connected.
        self._look_at = 0.0
        self._leader_updates = -1
        self._stall_check_at = 0.0
        self._again: dict[int, tuple[dict[TopicPartition, FetchPartition], list[TopicPartition]]] = {}
        self._rescan_after: set[int] = set()  # brokers whose answer calls for a pass over every partition
        self._sent_at: dict[int, float] = {}  # when the last fetch to each broker went
        # When the first fetch held back by min_interval_s may go: kept until then, so that a poll that returns
        # early (another broker's answer) still wakes the fetcher in time for a pass it deferred (``_look_at``).
        self._held_until = float("inf")

    def active(self) -> list[FetchPartition]:
        """The partitions still to fetch, in fetch order."""
        return [self.partitions[key] for key in self.order if self.partitions[key].active]

    def any_active(self) -> bool:
        """Whether a partition is still to fetch (without listing them)."""
        return any(p.active for p in self.partitions.values())

    def step(self, wait_s: float = 0.1) -> list[tuple[FetchPartition, FetchedPartition]]:
        """Send what may go, wait up to ``wait_s`` for answers; returns each partition answered with data (or
        none: its ``source_end`` still moved), for the caller to take batches from and move positions."""
        now = self.clock()
        self.leaders.poll()
        self._send(now)
        wait_s = wait_s if self.in_flight else min(wait_s, self.settings.retry_backoff_s)
        self.cluster.poll(min(wait_s, max(0.0, self._held_until - now)))
        answered = self._collect()
        self._stop_stalled(self.clock())
        return answered

    # -- sending ----------------------------------------------------------------------------------------------

    def _send(self, now: float) -> None:
        """Send a fetch to every broker that leads a partition to fetch and has none in flight. Finding those
        partitions costs a pass over all of them, made only when one may have become sendable (``_look_at``);
        after a clean answer the broker is fetched from again with the same partitions, less those the answer
        finished, at a cost of what changed (``_again``)."""
        if now >= self._held_until:
            self._held_until = float("inf")
        if self.leaders.updates != self._leader_updates:
            self._leader_updates, self._look_at = self.leaders.updates, now
        if now >= self._look_at:
            self._again.clear()
            for node, members in self._scan(now).items():
                if self._held(node, now):
                    self._look_at = min(self._look_at, self._held_until)
                else:
                    self._fetch(node, members, None)
            return
        for node, (members, touched) in list(self._again.items()):
            if self._held(node, now):
                continue
            if not self.cluster.ready(node):
                self._look_at = now  # connecting, or gone: the next pass finds out
                continue
            del self._again[node]
            removed = [key for key in touched if key in members and not members[key].active]
            for key in removed:
                del members[key]
            if members:
                changed = [self._position(members[key]) for key in touched if key in members]
                self._fetch(node, members, (changed, removed))

    def _held(self, node: int, now: float) -> bool:
        """Whether the next fetch to ``node`` waits for ``min_interval_s`` since the last one went (and until when,
        in ``_held_until``, for the step's wait)."""
        due = self._sent_at.get(node, -float("inf")) + self.settings.min_interval_s
        if now >= due:
            return False
        self._held_until = min(self._held_until, due)
        return True

    def _scan(self, now: float) -> dict[int, dict[TopicPartition, FetchPartition]]:
        """Every partition that may be fetched now, by the broker to fetch it from."""
        self._look_at = float("inf")
        by_node: dict[int, dict[TopicPartition, FetchPartition]] = collections.defaultdict(dict)
        ready: dict[int, bool] = {}
        for state in self.active():
            if state.node is not None:
                continue  # in a fetch in flight
            if now < state.retry_at:
                self._look_at = min(self._look_at, state.retry_at)
                continue
            leader = self.leaders.leader(state.key)
            if leader is None:
                self.leaders.request_update()
                self._look_at = now
                continue
            if leader in self.in_flight:
                self._rescan_after.add(leader)  # not in that fetch: look again once it is answered
                continue
            if not ready.setdefault(leader, self.cluster.ready(leader)):
                self.leaders.request_update()  # connecting, or gone (see Sender._destination)
                self._look_at = now
                continue
            by_node[leader][state.key] = state
        return by_node

    def _fetch(
        self,
        node: int,
        members: dict[TopicPartition, FetchPartition],
        changes: tuple[list[FetchPosition], list[TopicPartition]] | None,
    ) -> None:
        """One Fetch to ``node`` for ``members``; ``changes`` (positions that may have moved, partitions that
        left) when only those may differ from the last fetch to it."""
        session = self.sessions.setdefault(node, FetchSession(node))
        if changes is None:
            data = session.build([self._position(s) for s in members.values()])
        else:
            data = session.build_changes(*changes)
        pending = self.cluster.fetch(
            node,
            data.to_send,
            read_committed=self.settings.read_committed,
            max_wait_ms=self.settings.max_wait_ms,
            max_bytes=self.settings.max_bytes,
            session=(data.metadata.session_id, data.metadata.epoch),
            forgotten=data.to_forget,
            min_bytes=self.settings.min_bytes,
        )
        self.in_flight[node] = (pending, members)
        self._sent_at[node] = self.clock()
        for s in members.values():
            s.node = node

    def _position(self, state: FetchPartition) -> FetchPosition:
        """What to ask for ``state``: the same object as last time while nothing in it changed, so that the
        fetch session finds the unchanged partitions at once."""
        epoch, sent = self.leaders.epoch(state.key), state.sent
        if sent is None or (sent.offset, sent.max_bytes, sent.leader_epoch) != (
            state.position,
            state.fetch_bytes,
            epoch,
        ):
            sent = state.sent = FetchPosition(state.topic, state.partition, state.position, state.fetch_bytes, epoch)
        return sent

    # -- answers ----------------------------------------------------------------------------------------------

    def _collect(self) -> list[tuple[FetchPartition, FetchedPartition]]:
        answered: list[tuple[FetchPartition, FetchedPartition]] = []
        for node in [n for n, (pending, _members) in self.in_flight.items() if pending.done]:
            pending, members = self.in_flight.pop(node)
            for state in members.values():
                state.node = None
            clean = self._take_answer(node, pending.result(), members, answered)
            if clean is None or node in self._rescan_after or self.sessions[node].next_metadata.full:
                # Something changed beyond the partitions answered, or the next request lists them all (in
                # fetch order: KIP-74): look at every partition.
                self._rescan_after.discard(node)
                self._look_at = 0.0
            else:
                self._again[node] = (members, clean)
        return answered

    def _take_answer(
        self,
        node: int,
        answer: FetchAnswer | WireError,
        members: dict[TopicPartition, FetchPartition],
        answered: list[tuple[FetchPartition, FetchedPartition]],
    ) -> list[TopicPartition] | None:
        """Take in ``node``'s answer, adding each partition answered with data to ``answered``; the partitions
        it named, or None if it was not a clean answer (an error, a partition's error, the session's error)."""
        now = self.clock()
        session = self.sessions[node]
        if not isinstance(answer, WireError) and answer.error is not None and answer.error.kind not in _SESSION:
            answer = answer.error  # an error for the whole request that is not the session's: as a lost one
        if isinstance(answer, WireError):
            session.handle_error(answer)
            self.leaders.node_failed(node)  # its partitions are looked up again before the next fetch
            for member in members.values():
                self._retry(member, answer, now)
            return None
        if not session.handle_answer(answer):
            return None  # AbstractFetch.handleFetchSuccess: fetched again, from the same positions
        named, clean = [], True
        for part in answer.partitions:
            key = (part.topic, part.partition)
            named.append(key)
            state = self.partitions.get(key)
            if state is None or not state.active:
                continue
            if part.error is not None:
                self._failed(state, part.error, now)
                clean = False
                continue
            state.attempts = 0
            state.source_end = part.last_stable_offset if self.settings.read_committed else part.high_watermark
            state.log_start = part.log_start_offset
            if state.caught_up or part.records:
                state.last_progress = now
            if part.records:
                self.order.pop(key)
                self.order[key] = None
            answered.append((state, part))
        return named if clean else None

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
        if now < self._stall_check_at:
            return
        self._stall_check_at = now + 1.0  # stall timeouts are seconds long: a look a second is enough
        self._look_at = min(self._look_at, now)  # and a pass a second finds what the caller stopped meanwhile
        for state in self.active():
            if state.caught_up:
                state.last_progress = now  # nothing to wait for: not a stall
            elif now - state.last_progress > self.settings.stall_timeout_s:
                state.failure = WireError(
                    REQUEST_TIMED_OUT,
                    f"no records from offset {state.position} for {self.settings.stall_timeout_s:.0f} s "
                    f"(its leader: {self.leaders.leader(state.key)})",
                )

"""A fake Kafka cluster of several brokers, in virtual time, for the wire client's unit tests.

It implements :class:`mm2py.wire.cluster.Cluster` and keeps the rules of a real cluster that the fetcher and the
sender depend on, so each of their failure rules can be shown to matter:

- a partition has a leader and a leader epoch; Produce and Fetch to any other broker answer
  NOT_LEADER_OR_FOLLOWER, a Fetch with an older leader epoch FENCED_LEADER_EPOCH;
- an idempotent producer's batches are checked as ``ProducerStateManager`` checks them: the last five batches
  per producer and partition are remembered (a resent one is answered with its original offset), a sequence
  that does not follow is OUT_OF_ORDER_SEQUENCE_NUMBER, an older one no longer remembered
  DUPLICATE_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, a newer epoch must start at sequence 0, and
  a producer the partition has no state for (a new one, or one whose first batches the leader lost) is taken at
  whatever sequence it starts with, as a real broker takes it;
- a request reaches its broker after a latency and is answered after another; a broker that is killed fails
  every request on its connections (NETWORK_EXCEPTION), one that is stopped answers nothing, and a request
  unanswered after the request timeout fails with REQUEST_TIMED_OUT and closes the connection, failing the
  others on it (kafka-python's and Java's behaviour);
- a killed or stopped broker loses its leaderships after the controller's session timeout, to the next alive
  replica, with a new leader epoch; what it appended but never acknowledged is lost with it unless
  ``keep_unacknowledged`` (the followers had fetched it);
- faults can be scheduled at a virtual time, or injected into the answer of chosen requests.

Everything happens in :meth:`FakeCluster.poll`, which moves the virtual clock; the code under test gets
:meth:`FakeCluster.clock` as its clock, so a test of minutes of faults runs in milliseconds.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import RecordBatch, split_batches
from mm2py.wire.cluster import (
    ClusterMetadata,
    FetchAnswer,
    FetchedPartition,
    FetchPosition,
    PartitionLeader,
    ProducedPartition,
    ProducerIds,
    RecordSetPieces,
    TopicPartition,
)
from mm2py.wire.errors import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_NOT_AVAILABLE,
    DUPLICATE_SEQUENCE_NUMBER,
    FENCED_LEADER_EPOCH,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCER_FENCED,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    WireError,
    disconnected,
    timed_out,
)
from tests.harness.fake_fetch_sessions import BrokerFetchSessions

LATENCY_S = 0.001
SESSION_TIMEOUT_S = 3.0  # how long a dead or stopped broker keeps its leaderships


@dataclass
class Appended:
    """One batch in a partition's log."""

    base_offset: int
    raw: bytes  # the batch as the broker keeps it (base offset rewritten)
    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    acknowledged: bool = False
    transaction: str = "none"  # "open", "committed" or "aborted" for a transactional batch


@dataclass
class _Transaction:
    """A transactional.id at its coordinator: the producer id, epoch and the open transaction's partitions."""

    producer_id: int
    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    last_epoch: int = -1  # the epoch before an expected-epoch bump; -1 after any other InitProducerId or fence


@dataclass
class _ProducerState:
    epoch: int
    batches: collections.deque[tuple[int, int, int]] = field(default_factory=lambda: collections.deque(maxlen=5))

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass
class FakePartition:
    topic: str
    partition: int
    replicas: list[int]
    leader: int
    epoch: int = 0
    log: list[Appended] = field(default_factory=list)
    producers: dict[int, _ProducerState] = field(default_factory=dict)

    @property
    def end(self) -> int:
        if not self.log:
            return 0
        last = self.log[-1]
        return last.base_offset + RecordBatch(memoryview(last.raw)).record_count

    def load(self, batches: Iterable[bytes]) -> None:
        """Batches written by some producer before the test (a source partition's data)."""
        for raw in batches:
            base = self.end
            stored = bytearray(raw)
            stored[0:8] = base.to_bytes(8, "big", signed=True)
            batch = RecordBatch(memoryview(stored))
            self.log.append(Appended(base, bytes(stored), -1, -1, -1, -1, acknowledged=True))
            assert batch.record_count > 0

    def records(self) -> list[tuple[int, bytes]]:
        """(offset, batch bytes) of every batch in the log."""
        return [(a.base_offset, a.raw) for a in self.log]


@dataclass
class _Broker:
    node: int
    alive: bool = True
    stopped: bool = False
    down_since: float | None = None


@dataclass(eq=False)
class FakePending:
    node: int
    sent_at: float
    arrive: Callable[[], Any] | None  # runs when the request reaches the broker; returns the answer
    answer: Any = None
    arrived: bool = False
    outcome: Any = None
    finished: bool = False
    kind: str = ""

    @property
    def done(self) -> bool:
        return self.finished

    def result(self) -> Any:
        assert self.finished, "result() before done"
        return self.outcome

    def finish(self, outcome: Any) -> None:
        if not self.finished:
            self.finished, self.outcome = True, outcome


class FakeCluster:
    """Brokers 1..n; topics created with :meth:`create`; faults with :meth:`kill`, :meth:`stop`, :meth:`elect`."""

    def __init__(self, brokers: int = 3, *, request_timeout_s: float = 30.0, alias: str = "fake") -> None:
        self.alias = alias
        self.request_timeout_s = request_timeout_s
        self.now = 0.0
        self._brokers = {n: _Broker(n) for n in range(1, brokers + 1)}
        self.partitions: dict[TopicPartition, FakePartition] = {}
        self._pending: list[FakePending] = []
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self.next_producer_id = 1000
        self.transactions: dict[str, _Transaction] = {}
        self.coordinator_key: TopicPartition = ("__transaction_state", 0)  # its leader coordinates every id
        self.keep_unacknowledged = False
        # inject(request kind, node, key) -> an error to answer for that partition instead of handling it;
        # after_append(node, key) -> an error to answer for a batch the leader did append (acks=all not met)
        self.inject: Callable[[str, int, TopicPartition], WireError | None] = lambda kind, node, key: None
        self.after_append: Callable[[int, TopicPartition], WireError | None] = lambda node, key: None
        self.latency: dict[int, float] = {}  # a broker's own latency (default LATENCY_S): a slow disk
        self.fill_limit: int | None = None  # a Fetch answer carries data for at most this many partitions
        self.requests: list[tuple[float, str, int, tuple[TopicPartition, ...]]] = []  # what was sent, for tests
        self.produced_batches: list[tuple[TopicPartition, int, int, int]] = []  # (key, pid, epoch, first seq)
        self.fetch_sessions = {n: BrokerFetchSessions() for n in self._brokers}
        # each Fetch sent: (node, (session id, epoch), partitions named, partitions forgotten)
        self.fetch_requests: list[
            tuple[int, tuple[int, int], tuple[TopicPartition, ...], tuple[TopicPartition, ...]]
        ] = []
        self.fetch_limits: list[tuple[int, int, int]] = []  # each Fetch's (max wait ms, min bytes, max bytes)

    # -- the test's controls --------------------------------------------------------------------------------

    def clock(self) -> float:
        return self.now

    def create(self, topic: str, partitions: int, replication: int = 3) -> None:
        nodes = sorted(self._brokers)
        for p in range(partitions):
            replicas = [nodes[(p + i) % len(nodes)] for i in range(min(replication, len(nodes)))]
            self.partitions[(topic, p)] = FakePartition(topic, p, replicas, replicas[0])

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` once the virtual clock reaches ``when``."""
        heapq.heappush(self._events, (when, next(self._sequence), action))

    def kill(self, node: int) -> None:
        """SIGKILL: connections close at once; its leaderships move after the session timeout."""
        broker = self._brokers[node]
        broker.alive, broker.down_since = False, self.now
        self.fetch_sessions[node].clear()  # a restarted broker knows no fetch session
        for pending in [p for p in self._pending if p.node == node]:
            pending.finish(disconnected(node, "killed"))
        self._pending = [p for p in self._pending if not p.finished]
        self.at(self.now + SESSION_TIMEOUT_S, lambda: self._fence(node))

    def stop(self, node: int) -> None:
        """SIGSTOP: nothing is answered; its leaderships move after the session timeout."""
        broker = self._brokers[node]
        broker.stopped, broker.down_since = True, self.now
        self.at(self.now + SESSION_TIMEOUT_S, lambda: self._fence(node))

    def resume(self, node: int) -> None:
        """SIGCONT, or a restart after a kill: the broker serves again (as a follower)."""
        broker = self._brokers[node]
        broker.alive, broker.stopped, broker.down_since = True, False, None

    def elect(self, key: TopicPartition, leader: int) -> None:
        """A leader election (preferred leader, reassignment): a new leader and leader epoch."""
        part = self.partitions[key]
        part.leader, part.epoch = leader, part.epoch + 1

    def _fence(self, node: int) -> None:
        broker = self._brokers[node]
        if broker.alive and not broker.stopped:
            return
        for part in self.partitions.values():
            if part.leader != node:
                continue
            if not self.keep_unacknowledged:
                part.log = [a for a in part.log if a.acknowledged]
                _rebuild_producers(part)
            alive = [r for r in part.replicas if self._serving(r)]
            part.leader = alive[0] if alive else -1
            part.epoch += 1

    def _serving(self, node: int) -> bool:
        broker = self._brokers.get(node)
        return broker is not None and broker.alive and not broker.stopped

    # -- Cluster --------------------------------------------------------------------------------------------

    def bootstrap(self, timeout_s: float) -> None:
        pass

    def brokers(self) -> frozenset[int]:
        return frozenset(n for n, b in self._brokers.items() if b.alive)

    def ready(self, node: int) -> bool:
        return node in self._brokers and self._brokers[node].alive

    def in_flight(self, node: int) -> int:
        return sum(1 for p in self._pending if p.node == node)

    def close(self) -> None:
        pass

    def _send(self, node: int, kind: str, keys: Iterable[TopicPartition], arrive: Callable[[], Any]) -> FakePending:
        pending = FakePending(node, self.now, arrive, kind=kind)
        self.requests.append((self.now, kind, node, tuple(keys)))
        if not self.ready(node):
            pending.finish(disconnected(node, "not connected"))
        else:
            self._pending.append(pending)
        return pending

    def metadata(self, node: int, topics: Iterable[str]) -> FakePending:
        wanted = set(topics)

        def arrive() -> ClusterMetadata:
            parts = {
                key: PartitionLeader(p.leader if self._serving(p.leader) else -1, p.epoch)
                for key, p in self.partitions.items()
                if key[0] in wanted
            }
            topic_errors = {
                t: WireError(UNKNOWN_TOPIC_OR_PARTITION) for t in wanted if not any(k[0] == t for k in parts)
            }
            return ClusterMetadata(self.brokers(), parts, topic_errors)

        return self._send(node, "metadata", (), arrive)

    def init_producer_id(
        self,
        node: int,
        *,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = -1,
        expected: ProducerIds | None = None,
    ) -> FakePending:
        def arrive() -> ProducerIds | WireError:
            if transactional_id is None:
                self.next_producer_id += 1
                return ProducerIds(self.next_producer_id, 0)
            if not self._coordinates(node):
                return WireError(NOT_COORDINATOR)
            txn = self.transactions.get(transactional_id)
            if txn is None:
                self.next_producer_id += 1
                txn = self.transactions[transactional_id] = _Transaction(self.next_producer_id, -1)
            return _init_transactional(txn, expected, lambda: self._complete(txn, commit=False))

        return self._send(node, "init_producer_id", (), arrive)

    # -- transactions ---------------------------------------------------------------------------------------

    def find_coordinator(self, node: int, transactional_id: str) -> FakePending:
        def arrive() -> int | WireError:
            leader = self.partitions[self.coordinator_key].leader if self.coordinator_key in self.partitions else 1
            return leader if self._serving(leader) else WireError(COORDINATOR_NOT_AVAILABLE)

        return self._send(node, "find_coordinator", (), arrive)

    def add_partitions_to_txn(
        self, node: int, transactional_id: str, producer: ProducerIds, partitions: Sequence[TopicPartition]
    ) -> FakePending:
        def arrive() -> dict[TopicPartition, WireError | None] | WireError:
            error = self._check_transaction(node, transactional_id, producer)
            if error is not None:
                return error
            injected = self.inject("add_partitions_to_txn", node, partitions[0])
            if injected is not None:
                return dict.fromkeys(partitions, injected)
            self.transactions[transactional_id].partitions.update(partitions)
            return dict.fromkeys(partitions)

        return self._send(node, "add_partitions_to_txn", partitions, arrive)

    def end_txn(self, node: int, transactional_id: str, producer: ProducerIds, *, commit: bool) -> FakePending:
        def arrive() -> WireError | None:
            error = self._check_transaction(node, transactional_id, producer)
            if error is not None:
                return error
            injected = self.inject("end_txn", node, ("", 0))
            if injected is not None:
                return injected
            if not self.transactions[transactional_id].partitions:
                return WireError(INVALID_TXN_STATE)  # nothing open (Kafka: state Empty or CompleteCommit)
            self._complete(self.transactions[transactional_id], commit=commit)
            return None

        return self._send(node, "end_txn", (), arrive)

    def _coordinates(self, node: int) -> bool:
        leader = self.partitions[self.coordinator_key].leader if self.coordinator_key in self.partitions else 1
        return node == leader

    def _check_transaction(self, node: int, transactional_id: str, producer: ProducerIds) -> WireError | None:
        if not self._coordinates(node):
            return WireError(NOT_COORDINATOR)
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer.producer_id or txn.epoch != producer.epoch:
            return WireError(PRODUCER_FENCED)
        return None

    def _complete(self, txn: _Transaction, *, commit: bool) -> None:
        """Write the transaction's markers: its batches become visible to read_committed, or aborted."""
        for key in txn.partitions:
            for appended in self.partitions[key].log:
                if appended.producer_id == txn.producer_id and appended.transaction == "open":
                    appended.transaction = "committed" if commit else "aborted"
        txn.partitions = set()

    def committed(self, key: TopicPartition) -> list[tuple[int, bytes]]:
        """(offset, batch) of what a read_committed consumer reads: no open or aborted transaction's batches."""
        return [(a.base_offset, a.raw) for a in self.partitions[key].log if a.transaction in ("none", "committed")]

    def produce(
        self,
        node: int,
        record_sets: Mapping[TopicPartition, RecordSetPieces],
        *,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> FakePending:
        sets = {key: b"".join(bytes(piece) for piece in pieces) for key, pieces in record_sets.items()}

        def arrive() -> list[ProducedPartition]:
            return [self._append(node, key, raw) for key, raw in sets.items()]

        return self._send(node, "produce", sets, arrive)

    def fetch(
        self,
        node: int,
        positions: Sequence[FetchPosition],
        *,
        read_committed: bool,
        max_wait_ms: int,
        max_bytes: int,
        session: tuple[int, int] = (0, -1),
        forgotten: Sequence[TopicPartition] = (),
        min_bytes: int = 1,
    ) -> FakePending:
        wanted, gone = list(positions), list(forgotten)

        def arrive() -> FetchAnswer:
            filled = 0

            def read(position: FetchPosition) -> FetchedPartition:
                # A broker fills an answer in its order up to its size limit (fill_limit partitions here).
                nonlocal filled
                part = self._read(node, position)
                if part.records and self.fill_limit is not None and filled >= self.fill_limit:
                    part = dataclasses.replace(part, records=b"")
                filled += bool(part.records)
                return part

            return self.fetch_sessions[node].handle(session[0], session[1], wanted, gone, read)

        self.fetch_limits.append((max_wait_ms, min_bytes, max_bytes))
        self.fetch_requests.append((node, session, tuple((p.topic, p.partition) for p in wanted), tuple(gone)))
        return self._send(node, "fetch", [(p.topic, p.partition) for p in wanted], arrive)

    def poll(self, timeout_s: float) -> None:
        """Move the virtual clock up to ``timeout_s`` on; return as soon as a request is answered (or failed)."""
        until = self.now + max(timeout_s, 0.0)
        while True:
            candidates = (self._next_arrival(), self._next_answer(), self._next_timeout(), self._next_event())
            times = [t for t in candidates if t is not None]
            step = min(times) if times else None
            if step is None or step > until:
                self.now = until
                self._advance()
                return
            self.now = max(self.now, step)
            if self._advance():
                return

    def _latency(self, node: int) -> float:
        return self.latency.get(node, LATENCY_S)

    def _next_arrival(self) -> float | None:
        times = [p.sent_at + self._latency(p.node) for p in self._pending if not p.arrived and self._serving(p.node)]
        return min(times) if times else None

    def _next_answer(self) -> float | None:
        times = [p.sent_at + 2 * self._latency(p.node) for p in self._pending if p.arrived and self._serving(p.node)]
        return min(times) if times else None

    def _next_timeout(self) -> float | None:
        times = [p.sent_at + self.request_timeout_s for p in self._pending]
        return min(times) if times else None

    def _next_event(self) -> float | None:
        return self._events[0][0] if self._events else None

    def _advance(self) -> bool:
        """Deliver what is due; True if a request finished."""
        finished = False
        while self._events and self._events[0][0] <= self.now:
            _when, _seq, action = heapq.heappop(self._events)
            action()
        for pending in list(self._pending):
            if pending.finished:
                continue
            if self.now - pending.sent_at >= self.request_timeout_s:
                # The connection is closed: this request timed out, the others on it are disconnected.
                pending.finish(timed_out(pending.node, pending.kind, self.request_timeout_s))
                for other in self._pending:
                    if other.node == pending.node and not other.finished:
                        other.finish(disconnected(pending.node, "connection closed after a request timed out"))
                finished = True
                continue
            if not self._serving(pending.node):
                continue
            if not pending.arrived and self.now >= pending.sent_at + self._latency(pending.node):
                assert pending.arrive is not None
                pending.answer, pending.arrived = pending.arrive(), True
            if pending.arrived and self.now >= pending.sent_at + 2 * self._latency(pending.node):
                if isinstance(pending.answer, list):
                    for part in pending.answer:
                        if isinstance(part, ProducedPartition) and part.error is None:
                            self._acknowledge((part.topic, part.partition), part.base_offset)
                pending.finish(pending.answer)
                finished = True
        self._pending = [p for p in self._pending if not p.finished]
        return finished

    # -- the broker's side ------------------------------------------------------------------------------------

    def _append(self, node: int, key: TopicPartition, raw: bytes) -> ProducedPartition:
        topic, partition = key
        injected = self.inject("produce", node, key)
        if injected is not None:
            return ProducedPartition(topic, partition, injected, -1)
        part = self.partitions.get(key)
        if part is None or part.leader != node:
            return ProducedPartition(topic, partition, WireError(NOT_LEADER_OR_FOLLOWER), -1)
        batch = RecordBatch(memoryview(raw))
        assert batch.crc_ok(), "a produced batch with a bad CRC"
        pid, epoch, seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        self.produced_batches.append((key, pid, epoch, seq))
        txn = next((x for x in self.transactions.values() if x.producer_id == pid), None)
        if batch.is_transactional:
            if txn is None or epoch < txn.epoch:
                return ProducedPartition(topic, partition, WireError(INVALID_PRODUCER_EPOCH), -1)
            if key not in txn.partitions:
                return ProducedPartition(topic, partition, WireError(INVALID_TXN_STATE), -1)
        last_seq = seq + batch.record_count - 1
        state = part.producers.get(pid)
        if state is not None and epoch < state.epoch:
            return ProducedPartition(topic, partition, WireError(INVALID_PRODUCER_EPOCH), -1)
        if state is not None and epoch == state.epoch:
            for first, last, base in state.batches:
                if (first, last) == (seq, last_seq):
                    return ProducedPartition(topic, partition, None, base)  # a resent batch: its original offset
            if seq <= state.last_seq:
                return ProducedPartition(topic, partition, WireError(DUPLICATE_SEQUENCE_NUMBER), -1)
            if seq != state.last_seq + 1:
                return ProducedPartition(topic, partition, WireError(OUT_OF_ORDER_SEQUENCE_NUMBER), -1)
        elif seq != 0 and state is not None:  # a new epoch starts at sequence 0
            return ProducedPartition(topic, partition, WireError(OUT_OF_ORDER_SEQUENCE_NUMBER), -1)
        # A producer the partition has no state for is taken at any sequence, as Kafka takes it
        # (ProducerAppendInfo.checkSequence: no current producer epoch, "accept writes with any sequence number").
        if state is None or epoch > state.epoch:
            state = part.producers[pid] = _ProducerState(epoch)
        base = part.end
        stored = bytearray(raw)
        stored[0:8] = base.to_bytes(8, "big", signed=True)
        part.log.append(
            Appended(
                base, bytes(stored), pid, epoch, seq, last_seq, transaction="open" if batch.is_transactional else "none"
            )
        )
        state.batches.append((seq, last_seq, base))
        late = self.after_append(node, key)
        if late is not None:
            return ProducedPartition(topic, partition, late, -1)
        return ProducedPartition(topic, partition, None, base)

    def _acknowledge(self, key: TopicPartition, base_offset: int) -> None:
        for appended in self.partitions[key].log:
            if appended.base_offset == base_offset:
                appended.acknowledged = True

    def _read(self, node: int, position: FetchPosition) -> FetchedPartition:
        key = (position.topic, position.partition)
        injected = self.inject("fetch", node, key)
        part = self.partitions.get(key)
        if injected is None and (part is None or part.leader != node):
            injected = WireError(NOT_LEADER_OR_FOLLOWER)
        elif injected is None and part is not None and 0 <= position.leader_epoch < part.epoch:
            injected = WireError(FENCED_LEADER_EPOCH)
        elif injected is None and part is not None and position.leader_epoch > part.epoch:
            injected = WireError(UNKNOWN_LEADER_EPOCH)
        if injected is not None or part is None:
            return FetchedPartition(position.topic, position.partition, injected, -1, -1, -1, None, b"")
        data = b"".join(
            raw for base, raw in part.records() if base + RecordBatch(memoryview(raw)).record_count > position.offset
        )
        end = part.end
        return FetchedPartition(position.topic, position.partition, None, end, end, 0, None, data[: position.max_bytes])


def _rebuild_producers(part: FakePartition) -> None:
    """A new leader's producer state, from the batches its log holds (the last five per producer)."""
    part.producers = {}
    for a in part.log:
        state = part.producers.get(a.producer_id)
        if state is None or a.epoch > state.epoch:
            state = part.producers[a.producer_id] = _ProducerState(a.epoch)
        state.batches.append((a.first_seq, a.last_seq, a.base_offset))


def written(cluster: FakeCluster, key: TopicPartition) -> list[int]:
    """The source offsets of every record in the target partition, in order: what tests count records by
    (each test batch's records carry their source offset as the value)."""
    offsets: list[int] = []
    for _base, raw in cluster.partitions[key].records():
        for batch in split_batches(raw).batches:
            offsets.extend(int(r.value or b"-1") for r in decode_records(batch))
    return offsets


def _init_transactional(
    txn: _Transaction, expected: ProducerIds | None, abort_open: Callable[[], None]
) -> ProducerIds | WireError:
    """The coordinator's InitProducerId for a transactional.id, as Kafka's TransactionCoordinator
    (prepareInitProducerIdTransit) and TransactionMetadata (prepareIncrementProducerEpoch) decide it."""
    if expected is not None and txn.epoch != -1 and expected.producer_id != txn.producer_id:
        return WireError(PRODUCER_FENCED)
    if txn.partitions:  # an open transaction: fence its epoch, abort it, and let the client ask again
        txn.epoch += 1
        txn.last_epoch = -1
        abort_open()
        return WireError(CONCURRENT_TRANSACTIONS)
    if expected is None:
        txn.epoch += 1
        txn.last_epoch = -1
    elif txn.epoch == -1 or expected.epoch == txn.epoch:
        txn.last_epoch, txn.epoch = txn.epoch, txn.epoch + 1
    elif expected.epoch != txn.last_epoch:  # else: a retry of a bump that succeeded, answered again
        return WireError(PRODUCER_FENCED)
    return ProducerIds(txn.producer_id, txn.epoch)

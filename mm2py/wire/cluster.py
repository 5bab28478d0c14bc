"""The typed interface to one Kafka cluster that the fetcher and the sender use, and the data it answers with.

Why an interface of our own: the fetcher and the sender follow the Java clients' rules for every failure a
cluster goes through (a leader lost, a broker stalled, a rolling restart); those rules are proven in unit tests
against a fake cluster of several brokers (``tests/harness/fake_cluster.py``) that implements :class:`Cluster`,
and on real Kafka through :class:`mm2py.wire.connection.KafkaConnection`, which implements it over
kafka-python. Everything crossing it is mm2py's own plain data; errors are :class:`~mm2py.wire.errors.WireError`.

Every request is asynchronous (a :class:`Pending`), as in Java's NetworkClient: a broker that does not answer
holds up only the partitions it leads. A request unanswered after the request timeout fails with
REQUEST_TIMED_OUT and its connection is closed (Java's ``NetworkClient.handleTimedOutRequests``), so a late
answer is never taken for a new one; a closed connection fails every request on it with NETWORK_EXCEPTION.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.errors import WireError

Buffer = bytes | bytearray | memoryview
RecordSetPieces = Sequence[Buffer]  # one partition's record set, as pieces sent back to back
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class PartitionLeader:
    """A partition in a Metadata answer: its leader (-1: none alive) and leader epoch (-1: not known)."""

    leader: int
    epoch: int
    error: WireError | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """A Metadata answer: the brokers alive and, per partition of the topics asked for, its leader."""

    brokers: frozenset[int]
    partitions: Mapping[TopicPartition, PartitionLeader]
    topic_errors: Mapping[str, WireError]


@dataclass(frozen=True)
class FetchPosition:
    """Fetch ``topic``-``partition`` from ``offset``; ``leader_epoch`` (KIP-320) makes a broker that is no
    longer the leader of that epoch answer FENCED_LEADER_EPOCH instead of data."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class FetchedPartition:
    topic: str
    partition: int
    error: WireError | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]] | None  # (producer id, first offset); None: read_uncommitted
    records: Buffer


@dataclass(frozen=True)
class FetchAnswer:
    """A Fetch answer: an error for the whole request (a fetch session's), or one entry per partition (in an
    incremental fetch session, only the partitions with something new); ``session_id`` 0: no session."""

    partitions: list[FetchedPartition]
    session_id: int = 0
    throttle_time_ms: int = 0
    error: WireError | None = None


@dataclass(frozen=True)
class ProducedPartition:
    topic: str
    partition: int
    error: WireError | None
    base_offset: int
    log_start_offset: int = -1


@dataclass(frozen=True)
class ProducerIds:
    """What InitProducerId answers: the producer id and epoch to write with."""

    producer_id: int
    epoch: int


class Pending(Protocol[T_co]):
    """A request in flight to ``node``; once ``done``, ``result()`` is its answer or why there is none."""

    node: int

    @property
    def done(self) -> bool: ...

    def result(self) -> T_co | WireError: ...


class Cluster(Protocol):
    """One cluster's connections, used from one thread."""

    alias: str
    request_timeout_s: float

    def bootstrap(self, timeout_s: float) -> None:
        """Connect to a bootstrap broker; raises ``mm2py.errors.ReplicationError`` if none answers in time."""
        ...

    def brokers(self) -> frozenset[int]:
        """The brokers the last Metadata answer listed."""
        ...

    def ready(self, node: int) -> bool:
        """Whether a request to ``node`` would go out now; if not, a connection is started (never blocks)."""
        ...

    def in_flight(self, node: int) -> int:
        """How many requests to ``node`` await an answer (for choosing the least loaded broker)."""
        ...

    def metadata(self, node: int, topics: Iterable[str]) -> Pending[ClusterMetadata]:
        """Metadata of ``topics`` from ``node``; the answer also teaches the connections every broker's address."""
        ...

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
    ) -> Pending[FetchAnswer]:
        """One Fetch carrying the given partitions (all led by ``node``); ``session`` is the fetch session's
        (id, epoch) (KIP-227; (0, -1): none), ``forgotten`` the partitions that leave it; the broker answers once it has
        ``min_bytes`` for it or ``max_wait_ms`` passed."""
        ...

    def produce(
        self,
        node: int,
        record_sets: Mapping[TopicPartition, RecordSetPieces],
        *,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> Pending[list[ProducedPartition]]:
        """One Produce with acks=all carrying one record set per partition (all led by ``node``)."""
        ...

    def init_producer_id(
        self,
        node: int,
        *,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = -1,
        expected: ProducerIds | None = None,
    ) -> Pending[ProducerIds]:
        """InitProducerId: a producer id and epoch (for an idempotent producer when ``transactional_id`` is None;
        for a transactional one, sent to its coordinator, it fences every earlier epoch of that id). With
        ``expected`` (KIP-360, version 3 and later) the coordinator bumps the epoch only if it is still that one,
        and answers PRODUCER_FENCED if another producer initialized the id since."""
        ...

    def find_coordinator(self, node: int, transactional_id: str) -> Pending[int]:
        """FindCoordinator(TRANSACTION): the broker that coordinates ``transactional_id``'s transactions."""
        ...

    def add_partitions_to_txn(
        self, node: int, transactional_id: str, producer: ProducerIds, partitions: Sequence[TopicPartition]
    ) -> Pending[dict[TopicPartition, WireError | None]]:
        """AddPartitionsToTxn: ``partitions`` join the producer's open transaction (an error per partition)."""
        ...

    def end_txn(self, node: int, transactional_id: str, producer: ProducerIds, *, commit: bool) -> Pending[None]:
        """EndTxn: commit or abort the producer's open transaction."""
        ...

    def poll(self, timeout_s: float) -> None:
        """Serve the connections for up to ``timeout_s`` (less if an answer comes); fails requests past their
        timeout, closing their connections."""
        ...

    def close(self) -> None: ...

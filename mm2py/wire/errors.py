"""Kafka's errors as the wire client meets them, by name: kafka-python's error classes, never bare integers.

An answer carries an error code per partition (and a request can fail before any answer: a lost connection,
a timeout). :class:`WireError` holds the library's class for the code, so code reads
``error.kind is NOT_LEADER_OR_FOLLOWER`` and the Java client's rules (``Errors`` in Kafka's clients) can be
followed name for name. The names below are Kafka's own (``org.apache.kafka.common.protocol.Errors``); the
library's class names are older (``NotLeaderForPartitionError`` for NOT_LEADER_OR_FOLLOWER).

Whether an error is retriable and whether it means stale metadata is the library's classification
(``retriable``, ``invalid_metadata``), which mirrors Java's ``RetriableException`` and
``InvalidMetadataException``; the sender and the fetcher add their own rules on top where the Java clients do.
"""

from __future__ import annotations

from dataclasses import dataclass

import kafka.errors as kafka_errors  # type: ignore[import-untyped]

from mm2py.kafka_errors import kafka_error_name

ErrorKind = type  # one of kafka.errors' classes

NONE_CODE = 0
OFFSET_OUT_OF_RANGE: ErrorKind = kafka_errors.OffsetOutOfRangeError
CORRUPT_MESSAGE: ErrorKind = kafka_errors.CorruptRecordError
UNKNOWN_TOPIC_OR_PARTITION: ErrorKind = kafka_errors.UnknownTopicOrPartitionError
LEADER_NOT_AVAILABLE: ErrorKind = kafka_errors.LeaderNotAvailableError
NOT_LEADER_OR_FOLLOWER: ErrorKind = kafka_errors.NotLeaderForPartitionError
REQUEST_TIMED_OUT: ErrorKind = kafka_errors.RequestTimedOutError
REPLICA_NOT_AVAILABLE: ErrorKind = kafka_errors.ReplicaNotAvailableError
MESSAGE_TOO_LARGE: ErrorKind = kafka_errors.MessageSizeTooLargeError
NETWORK_EXCEPTION: ErrorKind = kafka_errors.NetworkExceptionError
COORDINATOR_LOAD_IN_PROGRESS: ErrorKind = kafka_errors.CoordinatorLoadInProgressError
COORDINATOR_NOT_AVAILABLE: ErrorKind = kafka_errors.CoordinatorNotAvailableError
NOT_COORDINATOR: ErrorKind = kafka_errors.NotCoordinatorError
RECORD_LIST_TOO_LARGE: ErrorKind = kafka_errors.RecordListTooLargeError
NOT_ENOUGH_REPLICAS: ErrorKind = kafka_errors.NotEnoughReplicasError
NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorKind = kafka_errors.NotEnoughReplicasAfterAppendError
TOPIC_AUTHORIZATION_FAILED: ErrorKind = kafka_errors.TopicAuthorizationFailedError
CLUSTER_AUTHORIZATION_FAILED: ErrorKind = kafka_errors.ClusterAuthorizationFailedError
UNSUPPORTED_VERSION: ErrorKind = kafka_errors.UnsupportedVersionError
OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorKind = kafka_errors.OutOfOrderSequenceNumberError
DUPLICATE_SEQUENCE_NUMBER: ErrorKind = kafka_errors.DuplicateSequenceNumberError
INVALID_PRODUCER_EPOCH: ErrorKind = kafka_errors.InvalidProducerEpochError
INVALID_TXN_STATE: ErrorKind = kafka_errors.InvalidTxnStateError
INVALID_PRODUCER_ID_MAPPING: ErrorKind = kafka_errors.InvalidProducerIdMappingError
CONCURRENT_TRANSACTIONS: ErrorKind = kafka_errors.ConcurrentTransactionsError
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorKind = kafka_errors.TransactionalIdAuthorizationFailedError
KAFKA_STORAGE_ERROR: ErrorKind = kafka_errors.KafkaStorageError
UNKNOWN_PRODUCER_ID: ErrorKind = kafka_errors.UnknownProducerIdError
FENCED_LEADER_EPOCH: ErrorKind = kafka_errors.FencedLeaderEpochError
UNKNOWN_LEADER_EPOCH: ErrorKind = kafka_errors.UnknownLeaderEpochError
OFFSET_NOT_AVAILABLE: ErrorKind = kafka_errors.OffsetNotAvailableError
PRODUCER_FENCED: ErrorKind = kafka_errors.ProducerFencedError
TRANSACTION_ABORTABLE: ErrorKind = kafka_errors.TransactionAbortableError
FETCH_SESSION_ID_NOT_FOUND: ErrorKind = kafka_errors.FetchSessionIdNotFoundError
INVALID_FETCH_SESSION_EPOCH: ErrorKind = kafka_errors.InvalidFetchSessionEpochError

# Errors the library does not mark retriable but that a new leader or a metadata refresh fixes (Java's
# NotLeaderOrFollowerException and UnknownTopicOrPartitionException are both InvalidMetadataExceptions, and
# retriable): kafka-python marks them so too; listed for the day a version does not.
_ALSO_RETRIABLE: frozenset[ErrorKind] = frozenset({NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(frozen=True)
class WireError:
    """A Kafka error: the library's class for its code, and what was happening (``detail``)."""

    kind: ErrorKind
    detail: str = ""

    @property
    def code(self) -> int:
        return int(getattr(self.kind, "errno", -1) or -1)

    @property
    def name(self) -> str:
        """Kafka's name for the code (``mm2py.kafka_errors``), not kafka-python's (``MESSAGE_SIZE_TOO_LARGE``)."""
        code = self.code
        return kafka_error_name(code) if code >= 0 else str(getattr(self.kind, "message", self.kind.__name__))

    @property
    def retriable(self) -> bool:
        """Waiting (and perhaps a metadata refresh) can fix it: Java's RetriableException."""
        return bool(getattr(self.kind, "retriable", False)) or self.kind in _ALSO_RETRIABLE

    @property
    def invalid_metadata(self) -> bool:
        """It means the client's metadata is stale (a leader moved, a broker went): Java's
        InvalidMetadataException, on which both Java clients request a metadata update."""
        return bool(getattr(self.kind, "invalid_metadata", False)) or self.kind in _ALSO_RETRIABLE

    def __str__(self) -> str:
        return f"{self.name} ({self.code}){': ' + self.detail if self.detail else ''}"


def broker_error(code: int, detail: str = "") -> WireError | None:
    """The error a broker answered with, or None for 0 (no error)."""
    if code == NONE_CODE:
        return None
    return WireError(kafka_errors.for_code(code), detail)


def disconnected(node: int, cause: object = "") -> WireError:
    """A request whose connection closed before its answer came (a broker that died or restarted): its fate is
    unknown, which is what Java's NetworkClient reports as NETWORK_EXCEPTION (``wasDisconnected``)."""
    return WireError(NETWORK_EXCEPTION, f"disconnected from node {node}{f': {cause}' if cause else ''}")


def timed_out(node: int, what: str, seconds: float) -> WireError:
    """A request without an answer after the request timeout: Java's REQUEST_TIMED_OUT (``wasTimedOut``), after
    which the connection is closed so that a late answer cannot be mistaken for a new one."""
    return WireError(REQUEST_TIMED_OUT, f"{what} to node {node} unanswered after {seconds:.0f} s")

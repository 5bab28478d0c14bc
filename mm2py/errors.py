"""One root exception, so the CLI has exactly one error boundary that maps failures to exit codes.

Library code raises; only ``mm2py.cli`` prints errors and picks exit codes (0 ok, 1 check failed,
2 usage or config error, 3 runtime failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mm2py.kafka_errors import client_error_name

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3


class Mm2pyError(Exception):
    """Root of every error mm2py raises on purpose; anything else is a bug and exits 3 as well."""

    exit_code = EXIT_RUNTIME

    def exit_line(self) -> str:
        """What the command line prints for it: the message and, when a Kafka error caused it, Kafka's name of
        that error in brackets at the end, the same on both copy paths (``[MESSAGE_TOO_LARGE]``) and the same as
        the ``error`` label of ``mm2py_retries_total``: always last, so a script finds it in one place."""
        code = self.kafka_error()
        return f"{self} [{code}]" if code else str(self)

    def kafka_error(self) -> str | None:
        """Kafka's name of the error that caused this one, if one did."""
        return None


class UsageError(Mm2pyError):
    """The command line itself is wrong (unknown flow in ``--flows``, conflicting options, ...)."""

    exit_code = EXIT_USAGE


class ConfigError(Mm2pyError):
    """A configuration problem that a user can fix in the file.

    Carries where (file and line), what (key and value) and what would be accepted, so the message teaches.
    ``value`` must already be masked by the raiser when the key holds a secret.
    """

    exit_code = EXIT_USAGE

    def __init__(
        self,
        reason: str,
        *,
        source: str | None = None,
        line: int | None = None,
        key: str | None = None,
        value: str | None = None,
        allowed: str | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.line = line
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(self.render())

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        # file:line key = value: reason (allowed: ...), the shape every config message has.
        where = ""
        if self.source is not None:
            where = f"{self.source}:{self.line}" if self.line is not None else self.source
        what = ""
        if self.key is not None:
            what = f"{self.key} = {self.value}" if self.value is not None else self.key
        head = " ".join(x for x in (where, what) if x)
        allowed = f" (allowed: {self.allowed})" if self.allowed else ""
        return f"{head}: {self.reason}{allowed}" if head else f"{self.reason}{allowed}"


# Kafka's answers that say the principal lacks an ACL (clients' common/protocol/Errors.java): waiting never
# changes them, so nothing retries them, and the line names who was refused what.
AUTHORIZATION_ERRORS = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    }
)


class KafkaOperationError(Mm2pyError):
    """A Kafka call failed; names the cluster alias and the operation ("listing topics on dc2").

    ``code`` is Kafka's error name when the cluster answered with one; ``principal`` is who mm2py connected as
    (``User:alice``), named in the line when the cluster refused an authorization.
    """

    exit_code = EXIT_RUNTIME

    def __init__(
        self, alias: str, operation: str, cause: str, *, code: str | None = None, principal: str | None = None
    ) -> None:
        self.alias = alias
        self.operation = operation
        self.cause = cause
        self.code = code
        self.principal = principal
        who = f" (principal {principal})" if principal and self.refused else ""
        super().__init__(f"{operation} on {alias} failed: {cause}{who}")

    def kafka_error(self) -> str | None:
        return self.code

    @property
    def refused(self) -> bool:
        """The cluster's authorizer said no: only an ACL changes that."""
        return self.code in AUTHORIZATION_ERRORS


class ClusterUnreachableError(KafkaOperationError):
    """No broker of a cluster answered within the bounded timeout."""


class KafkaErrorLike(Protocol):
    """What mm2py reads from a confluent-kafka ``KafkaError``; a Protocol, so this module needs no client."""

    def code(self) -> int: ...
    def name(self) -> str: ...
    def str(self) -> str: ...
    def retriable(self) -> bool: ...
    def fatal(self) -> bool: ...


# Kafka errors that waiting cannot fix, by name (mm2py.kafka_errors): the record is larger than the target accepts,
# access is denied, the topic or partition is not there (deleted, or never created). librdkafka flags only some
# errors (those of its transactional API) as retriable, so this set, not the flag, decides the rest.
PERMANENT_KAFKA_ERRORS = frozenset(
    {
        "MESSAGE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "INVALID_RECORD",
        "INVALID_TOPIC_EXCEPTION",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        # A refused login (librdkafka's _AUTHENTICATION too) and a failed TLS handshake (a certificate for another
        # host, no shared TLS version): waiting does not change the answer.
        "SASL_AUTHENTICATION_FAILED",
        "_SSL",
        "UNKNOWN_TOPIC_OR_PARTITION",
        # Another producer initialized the transactional.id (Kafka's Java TransactionManager: fatal); taking it
        # back would copy beside that producer.
        "PRODUCER_FENCED",
    }
)


def error_name(error: KafkaErrorLike) -> str:
    """A client error's name in mm2py's one vocabulary, Kafka's (:func:`mm2py.kafka_errors.client_error_name`)."""
    return client_error_name(error.code(), error.name())


def is_retriable(error: KafkaErrorLike) -> bool:
    """Whether trying again later can succeed where ``error`` failed.

    The client's own ``retriable()`` flag wins; then mm2py's permanent set; anything else (a stalled or
    restarted broker, a timed-out producer - fatal for that producer, which is replaced) is retried, within
    ``mm2py.retry.timeout.seconds``.
    """
    if error.retriable():
        return True
    return error_name(error) not in PERMANENT_KAFKA_ERRORS


# A copy task's failure meaning "the records at this position are gone" (Kafka's OFFSET_OUT_OF_RANGE: deleted by
# retention or DeleteRecords, or the partition was re-created): the driver counts the loss instead of retrying.
RECORDS_GONE = "OFFSET_OUT_OF_RANGE"


@dataclass(frozen=True)
class Failure:
    """A copy failure as plain data: what a Spark task returns instead of raising, so the driver learns
    whether to retry from a field, never from the text of an exception that crossed the JVM.

    ``code`` is the Kafka error's name (``MESSAGE_TOO_LARGE``, :mod:`mm2py.kafka_errors`) when a Kafka error caused
    it, else None.
    ``message`` names flow, topic, partition and offset, and never holds a secret (no client settings).
    """

    message: str
    code: str | None = None
    retriable: bool = True

    @classmethod
    def of_kafka(cls, message: str, error: KafkaErrorLike) -> Failure:
        return cls(message, error_name(error), is_retriable(error))

    @property
    def records_gone(self) -> bool:
        """The source no longer holds the records at the range's position (see RECORDS_GONE)."""
        return self.code == RECORDS_GONE


class ReplicationError(Mm2pyError):
    """Copying records failed (a task gave up, progress could not be written).

    ``retriable`` is False for failures that cannot go away by waiting (a record larger than the target
    accepts, a missing topic, a denied authorisation): the run then stops instead of retrying.
    """

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, *, code: str | None = None, retriable: bool = True) -> None:
        self.failure = Failure(message, code, retriable)
        super().__init__(message)

    @classmethod
    def of_kafka(cls, message: str, error: KafkaErrorLike) -> ReplicationError:
        return cls.of_failure(Failure.of_kafka(message, error))

    @classmethod
    def of_failure(cls, failure: Failure, context: str = "") -> ReplicationError:
        """The error for a failure a task reported, ``context`` (e.g. ``flow dc1->target: ``) in front."""
        return cls(f"{context}{failure.message}", code=failure.code, retriable=failure.retriable)

    @property
    def retriable(self) -> bool:
        return self.failure.retriable

    @property
    def code(self) -> str | None:
        return self.failure.code

    def kafka_error(self) -> str | None:
        return self.failure.code


class FlowCutOverError(Mm2pyError):
    """``run`` was asked for a flow that is marked as cut over on its target (``mm2py cutover``): starting it
    would write into a cluster that applications now use. A usage error: the operator clears the mark first."""

    exit_code = EXIT_USAGE


class CheckFailed(Mm2pyError):
    """A check ran fine and its answer is "no" (lag over threshold, verify mismatch, group busy)."""

    exit_code = EXIT_CHECK_FAILED

"""How the client's exceptions become mm2py's errors: which codes mean an unreachable cluster (exit 3 naming
it), a failed login or TLS handshake, or only one partition whose leader is away."""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaError, KafkaException

from mm2py.errors import ClusterUnreachableError, KafkaOperationError, error_name

UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
AUTH_ERRORS = {KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION, KafkaError._SSL}
# A partition's leader is away (its node died, an election is running): other partitions are unaffected.
LEADER_AWAY = {
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.KAFKA_STORAGE_ERROR,
}


def error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def timed_out(exc: BaseException) -> bool:
    """No answer in time, from the future's wait or from the client's own request timeout."""
    err = error_of(exc)
    return isinstance(exc, FutureTimeout) or (err is not None and err.code() == KafkaError._TIMED_OUT)


def leader_away(exc: BaseException) -> bool:
    """One partition's failure that says its leader is away (or did not answer in time), not that the call or
    the cluster failed: read together with the partitions that did answer."""
    err = error_of(exc)
    return timed_out(exc) or (err is not None and err.code() in LEADER_AWAY)


def reason_of(exc: BaseException) -> str:
    if isinstance(exc, FutureTimeout):
        return "no answer before the call's timeout"
    err = error_of(exc)
    return err.str() if err is not None else str(exc)


def wrap_kafka_error(
    alias: str, operation: str, exc: BaseException, detail: KafkaError | None = None, principal: str | None = None
) -> KafkaOperationError:
    """Turn a client exception into our error type; unreachable clusters get their own type (exit 3).

    ``detail`` is the client's own last error event, when known: a failed TLS handshake or login shows up
    as "transport failure" on the call, and only the event says why. The Kafka error's name goes with it, so
    callers tell an authorization refusal (never retried, names ``principal``) from a transient failure.
    """
    if detail is not None and detail.code() in AUTH_ERRORS:
        what = "TLS handshake failed" if detail.code() == KafkaError._SSL else "authentication failed"
        return KafkaOperationError(alias, operation, f"{what}: {detail.str()}")
    if isinstance(exc, FutureTimeout):
        return ClusterUnreachableError(alias, operation, "no answer before the call's timeout")
    err = error_of(exc)
    if err is not None and err.code() in UNREACHABLE:
        return ClusterUnreachableError(alias, operation, f"no broker answered ({err.str()})")
    if err is not None and err.code() in AUTH_ERRORS:
        return KafkaOperationError(alias, operation, f"authentication failed ({err.str()})")
    if err is None:
        return KafkaOperationError(alias, operation, str(exc))
    return KafkaOperationError(alias, operation, err.str(), code=error_name(err), principal=principal)

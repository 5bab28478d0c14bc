"""Creating confluent-kafka clients: logging routed through Python, and a per-process cache for executors.

Clients are never pickled. A Spark Python worker is reused across tasks (``spark.python.worker.reuse``), so
an executor keeps one producer and one consumer per distinct settings and reuses them for every task it
runs, instead of paying a connection set-up per batch.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from mm2py.librdkafka.tls_versions import without_pin

librdkafka_log = logging.getLogger("mm2py.librdkafka")

_lock = threading.Lock()
_producers: dict[tuple[tuple[str, str], ...], Producer] = {}
_consumers: dict[tuple[tuple[str, str], ...], Consumer] = {}
_login_errors: dict[tuple[tuple[str, str], ...], KafkaError] = {}
_last_used: dict[tuple[tuple[str, str], ...], float] = {}
_logs: dict[tuple[str, tuple[tuple[str, str], ...]], _ClientLog] = {}  # each cached client's, by kind and key
# A cached client that no task has asked for in this long is closed as the next record-path task starts: a
# Python worker outlives the flows it served (a flow stopped, a cluster gone), and every client keeps a thread
# per broker reconnecting to it. Kafka's clients close an idle connection after connections.max.idle.ms (9
# minutes); a client object costs more, and a task that finds its client closed pays one connection set-up.
IDLE_CLOSE_S = 120.0
# librdkafka reports as _AUTHENTICATION too a login that was cut short rather than refused: the connection dropped
# in the middle of the SASL handshake ("SASL OAUTHBEARER mechanism handshake failed: Local: Broker transport
# failure"), or a re-authentication met the broker in another SASL state ("... handshake failed: Broker: Request
# not valid in current SASL state"). Both were seen with OAUTHBEARER tokens of a few seconds, the broker ending
# each session at its token's expiry (connections.max.reauth.ms). The client reconnects and logs in again by
# itself; taking either for a refused login stopped a healthy run (exit 3).
_CUT_SHORT = ("Broker transport failure", "Request not valid in current SASL state")


class _ClientLog:
    """One client's ``logger``: its lines go to ``mm2py.librdkafka`` at their level until the idle closer retires
    the client, then at DEBUG.

    Why: librdkafka queues a client's lines until the client is next polled, and the close of an idle client serves
    every line since its last use: often hundreds of reconnect failures to the brokers of a flow that ended or a
    cluster that went away, logged beside the work of whatever task starts then. They are about no task's work."""

    def __init__(self) -> None:
        self.retired = False

    def log(self, level: int, msg: str, *args: object) -> None:
        librdkafka_log.log(logging.DEBUG if self.retired else level, msg, *args)


def _with_logger(settings: Mapping[str, str], log: _ClientLog | None) -> dict[str, Any]:
    # A TLS version pin is for the batch path (tls_versions); the record path refuses one, and the batch path's
    # own librdkafka producers (progress, offset syncs) reach brokers the driver's admin client checked.
    return {**without_pin(settings), "logger": log or librdkafka_log}


def new_producer(settings: Mapping[str, str], log: _ClientLog | None = None) -> Producer:
    return Producer(_with_logger(settings, log))


def new_consumer(settings: Mapping[str, str], log: _ClientLog | None = None) -> Consumer:
    return Consumer({**_with_logger(settings, log), "error_cb": _LoginErrors(_key(settings))})


def _cached_log(kind: str, key: tuple[tuple[str, str], ...]) -> _ClientLog:
    """A new cached client's logger, kept where the idle closer finds it."""
    _logs[kind, key] = log = _ClientLog()
    return log


class _LoginErrors:
    """A consumer's ``error_cb``: keeps its refused login or failed TLS handshake (librdkafka reports those only
    here, never to ``consume()``), so a copy task stops at once instead of waiting for records that cannot come."""

    def __init__(self, key: tuple[tuple[str, str], ...]) -> None:
        self.key = key

    def __call__(self, err: KafkaError) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED):
            if any(words in err.str() for words in _CUT_SHORT):
                return  # a login cut short (see _CUT_SHORT), not a refusal
            _login_errors[self.key] = err


def login_error(settings: Mapping[str, str]) -> KafkaError | None:
    """The refused login or failed TLS handshake of this process's consumer for ``settings`` since the last
    call, if it had one (taken: a later task with the same consumer starts with a clean slate)."""
    return _login_errors.pop(_key(settings), None)


def _key(settings: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in settings.items()))


def cached_producer(settings: Mapping[str, str]) -> Producer:
    """This process's producer for these settings (created on first use).

    A transactional producer is initialized when it is created (``init_transactions`` fences every earlier
    producer of its ``transactional.id`` and aborts what one left open) and is kept only for the task that
    created it, which drops it when it ends (``mm2py.executor.record_transactions.release``): the id belongs to
    whichever producer initialized it last, and by the next task that may be another Python worker's.
    """
    key = _key(settings)
    transactional = "transactional.id" in settings
    with _lock:
        _last_used[key] = time.monotonic()
        producer = _producers.get(key)
        if producer is None:
            producer = new_producer(settings, _cached_log("producer", key))
            if transactional:
                producer.init_transactions(30)
            _producers[key] = producer
        return producer


def drop_producer(settings: Mapping[str, str]) -> None:
    """Forget a producer that must not be reused (a failed delivery, a fatal error) and void what it still holds.

    Forgetting alone is not enough: the object lives on until Python frees it (an exception's traceback keeps
    the copy task's frame, and so the producer), and meanwhile librdkafka goes on sending its queue. After a
    record timed out, librdkafka's idempotent producer bumps its epoch and sends the records queued behind it
    (librdkafka's INTRODUCTION.md, *Idempotent Producer*: "1, 4, 5"), so the range's tail would land before
    the retried range copies its head again: the partition out of order. ``purge`` fails everything queued
    or in flight at once, so the producer sends nothing more."""
    with _lock:
        producer = _producers.pop(_key(settings), None)
        _logs.pop(("producer", _key(settings)), None)
    if producer is not None:
        producer.purge(in_queue=True, in_flight=True, blocking=True)
        producer.flush(0)  # serves the purged records' delivery reports


def cached_consumer(settings: Mapping[str, str]) -> Consumer:
    """This process's consumer for these settings; callers assign() what they read."""
    key = _key(settings)
    with _lock:
        _last_used[key] = time.monotonic()
        consumer = _consumers.get(key)
        if consumer is None:
            consumer = _consumers[key] = new_consumer(settings, _cached_log("consumer", key))
        return consumer


def drop_consumer(settings: Mapping[str, str]) -> None:
    """Close and forget this process's consumer for these settings (a caller done with a cluster)."""
    with _lock:
        consumer = _consumers.pop(_key(settings), None)
        _logs.pop(("consumer", _key(settings)), None)
    if consumer is not None:
        consumer.close()


def close_idle(now: float | None = None) -> int:
    """Forget every cached client not asked for in :data:`IDLE_CLOSE_S` and close it in the background; how many.
    Called as a task starts, when no client of this process is in use (a Python worker runs one task at a time).

    Why in the background: librdkafka's consumer close can wait without bound once its cluster is gone, and a task
    must never wait on a client it does not use."""
    now = time.monotonic() if now is None else now
    with _lock:
        idle = [key for key, used in _last_used.items() if now - used > IDLE_CLOSE_S]
        producers = [_producers.pop(key) for key in idle if key in _producers]
        consumers = [_consumers.pop(key) for key in idle if key in _consumers]
        for key in idle:
            del _last_used[key]
            _login_errors.pop(key, None)
            for kind in ("producer", "consumer"):
                if (log := _logs.pop((kind, key), None)) is not None:
                    log.retired = True
    count = len(producers) + len(consumers)
    if count:
        closing = threading.Thread(target=_close, args=(producers, consumers), name="mm2py-close-idle", daemon=True)
        closing.start()
    return count


def _close(producers: list[Producer], consumers: list[Consumer]) -> None:
    # Each let go of as soon as it is closed: a client kept alive beside a close that waits goes on reconnecting
    # (and logging) to its gone brokers.
    while producers:
        producers.pop().flush(0)  # a range flushes what it produced before it ends: nothing is left to send
    while consumers:
        consumers.pop().close()  # assign()ed, no group membership and no commits: usually at once


@atexit.register
def _close_all() -> None:
    with _lock:
        for producer in _producers.values():
            producer.flush(10)
        for consumer in _consumers.values():
            consumer.close()
        _producers.clear()
        _consumers.clear()
        _logs.clear()
        _last_used.clear()


def client_exception(exc: BaseException) -> KafkaException | None:
    """The client's own error behind ``exc``, or None if ``exc`` is not one.

    Why not just ``KafkaException``: when a producer turns fatal (fenced by a newer producer of its
    transactional.id, say), confluent-kafka raises the fatal error inside the poll or flush that met it, leaves it
    pending, and goes on serving delivery reports in that same call. The first call into C that a delivery callback
    then makes fails with a SystemError ("returned a result with an exception set") whose context is the fatal
    KafkaException, and the SystemError is what the poll or flush raises (shown on real Kafka by
    tests/realkafka/test_record_path_delivery.py)."""
    if isinstance(exc, KafkaException):
        return exc
    if isinstance(exc, SystemError) and isinstance(exc.__context__, KafkaException):
        return exc.__context__
    return None

"""How a batch copy task's producer is set up and wound down (executor side): its settings, its producer id,
and what a transaction that fails or is fenced leaves behind.

Kept apart from the copy loop (:mod:`mm2py.executor.batch_copy`) because these follow the target producer's
configuration and Kafka's rules, not the loop's flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import TypeVar

from mm2py.backoff import client_backoff, client_seconds
from mm2py.errors import Failure, ReplicationError
from mm2py.executor.contract import CopySpec
from mm2py.wire.cluster import Cluster, ProducerIds
from mm2py.wire.errors import WireError
from mm2py.wire.sender import SenderSettings
from mm2py.wire.transactions import TransactionError

log = logging.getLogger(__name__)

T = TypeVar("T")
# A client call in progress yields, whenever it waits for the network, how to serve its client for up to the
# given seconds (Sender.step, Cluster.poll): the copy loop serves it a turn at a time (no wait) between its own
# steps, so a recording never holds the copy up; everywhere else it is waited for (:func:`waited`).
Step = Callable[[float], None]
Steps = Generator[Step, None, T]
WAIT_S = 0.05  # how long a waited-for call serves its client per turn


def waited(steps: Steps[T]) -> T:
    """Run ``steps`` to its end, serving its client until each answer comes; its result."""
    while True:
        try:
            step = next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        step(WAIT_S)


MESSAGE_MAX_BYTES = "1000000"  # librdkafka's default message.max.bytes, which the record path's producer has
# Batches below this size waiting in one partition's queue are merged into one of at most MERGE_UP_TO bytes
# (or half of message.max.bytes): tiny batches would otherwise go one per partition per Produce request.
MERGE_BELOW = 16 * 1024
MERGE_UP_TO = 512 * 1024
LINGER_S = 0.005  # the Java producer's linger.ms since Kafka 4.0 (KIP-1030)
BATCH_BYTES = 16384  # and its batch.size


def max_batch_bytes(settings: Mapping[str, str]) -> int:
    """The largest batch a producer with ``settings`` sends: its ``message.max.bytes``."""
    return int(settings.get("message.max.bytes", MESSAGE_MAX_BYTES))


def sender_settings(
    spec: CopySpec,
    settings: Mapping[str, str],
    cluster: str,
    transactional_id: str | None = None,
    *,
    lingers: bool = False,
) -> SenderSettings:
    """A producer's ``settings`` that the sender honours, with the Java producer's defaults. Only the copy's
    own sender ``lingers`` (``linger.ms``, ``batch.size``): a recording is waited for, and sent at once."""
    backoff = client_backoff(settings)
    merge_up_to = min(MERGE_UP_TO, max_batch_bytes(settings) // 2)
    return SenderSettings(
        spec.flow,
        cluster,
        request_timeout_s=client_seconds(settings, 30.0, "request.timeout.ms", "socket.timeout.ms"),
        delivery_timeout_s=client_seconds(settings, 120.0, "delivery.timeout.ms", "message.timeout.ms"),
        retry_backoff_s=backoff.initial_s,
        retry_backoff_max_s=backoff.max_s,
        merge_below=MERGE_BELOW,
        merge_up_to=merge_up_to,
        # A partition's batches are "full" at batch.size, or at the largest batch small ones merge into.
        linger_s=client_seconds(settings, LINGER_S, "linger.ms", "queue.buffering.max.ms") if lingers else 0.0,
        batch_bytes=min(merge_up_to, _whole_number(settings, "batch.size", BATCH_BYTES)),
        transactional_id=transactional_id,
    )


def _whole_number(settings: Mapping[str, str], key: str, default: int) -> int:
    value = str(settings.get(key, "")).strip()
    return int(value) if value.isdigit() else default


def producer_ids(spec: CopySpec, cluster: Cluster) -> ProducerIds:
    """InitProducerId (idempotent), from any broker, retried until the stall timeout."""
    return waited(acquiring_producer_ids(spec, cluster))


def acquiring_producer_ids(spec: CopySpec, cluster: Cluster) -> Steps[ProducerIds]:
    """:func:`producer_ids` a step at a time (a recording's new producer after a failed write)."""
    deadline = time.monotonic() + spec.stall_timeout_s
    answer: ProducerIds | WireError | None = None
    for node in _cycle(cluster, deadline):
        pending = cluster.init_producer_id(node)
        while not pending.done and time.monotonic() < deadline:
            yield cluster.poll
        answer = pending.result() if pending.done else None
        if isinstance(answer, ProducerIds):
            return answer
        if isinstance(answer, WireError) and not answer.retriable:
            raise ReplicationError(
                f"flow={spec.flow}: InitProducerId on {cluster.alias} failed: {answer}",
                code=answer.name,
                retriable=False,
            )
    raise ReplicationError(f"flow={spec.flow}: InitProducerId on {cluster.alias} failed: {answer}")


def transaction_failure(spec: CopySpec, exc: TransactionError, transactional_id: str) -> Failure:
    if exc.fenced:
        return Failure(
            f"flow={spec.flow}: fenced: another producer took transactional.id {transactional_id} over (another "
            f"mm2py run, or MirrorMaker 2, copies {spec.flow} exactly-once): {exc.error}",
            exc.error.name,
            retriable=False,
        )
    return Failure(
        f"flow={spec.flow}: the transaction on {spec.target} failed: {exc.error}", exc.error.name, exc.retriable
    )


def _cycle(cluster: Cluster, deadline: float) -> Iterator[int]:
    """The cluster's brokers in turn, until ``deadline``."""
    while time.monotonic() < deadline:
        brokers = sorted(cluster.brokers())
        if not brokers:
            return
        for node in brokers:
            if time.monotonic() >= deadline:
                return
            if cluster.ready(node):
                yield node
        cluster.poll(0.1)

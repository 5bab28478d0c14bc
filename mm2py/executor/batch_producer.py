"""How a batch copy task's producer is set up and wound down (executor side): its settings, its producer id,
and what a transaction that fails or is fenced leaves behind.

Kept apart from the copy loop (:mod:`mm2py.executor.batch_copy`) because these follow the target producer's
configuration and Kafka's rules, not the loop's flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar

from mm2py.client_settings import COPY_BATCH_SIZE, COPY_LINGER_MS, ClientSettings
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


MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's default message.max.bytes, which the record path's producer has
# Batches below this size waiting in one partition's queue are merged into one of at most MERGE_UP_TO bytes
# (or half of message.max.bytes): tiny batches would otherwise go one per partition per Produce request.
MERGE_BELOW = 16 * 1024
MERGE_UP_TO = 512 * 1024


def max_batch_bytes(producer: ClientSettings) -> int:
    """The largest batch ``producer`` sends: its ``message.max.bytes``."""
    return MESSAGE_MAX_BYTES if producer.message_max_bytes is None else producer.message_max_bytes


def sender_settings(
    spec: CopySpec,
    producer: ClientSettings,
    cluster: str,
    transactional_id: str | None = None,
    *,
    lingers: bool = False,
) -> SenderSettings:
    """What of ``producer``'s settings the sender honours, with the Java producer's defaults, but mm2py's copy
    producers' ``linger.ms`` and ``batch.size`` (as on the record path). Only the copy's own sender ``lingers``:
    a recording is waited for, and sent at once. A following task that spaces its fetches
    (``mm2py.continuous.fetch.min.interval.ms``) lingers 0 unless the user set ``linger.ms``: each fetch answer
    already carries all a partition's records of an interval, so a linger would gather nothing more, only delay
    them and cost the copy loop a wake-up."""
    backoff = producer.backoff()
    default_linger_s = 0.0 if spec.fetch_min_interval_s > 0 else COPY_LINGER_MS / 1000
    merge_up_to = min(MERGE_UP_TO, max_batch_bytes(producer) // 2)
    ack_timeout_ms = producer.request_timeout_ms if producer.ack_timeout_ms is None else producer.ack_timeout_ms
    return SenderSettings(
        spec.flow,
        cluster,
        request_timeout_s=_seconds(ack_timeout_ms, 30.0),
        delivery_timeout_s=_seconds(producer.delivery_timeout_ms, 120.0),
        retry_backoff_s=backoff.initial_s,
        retry_backoff_max_s=backoff.max_s,
        merge_below=MERGE_BELOW,
        merge_up_to=merge_up_to,
        # A partition's batches are "full" at batch.size, or at the largest batch small ones merge into.
        linger_s=_seconds(producer.linger_ms, default_linger_s) if lingers else 0.0,
        batch_bytes=min(merge_up_to, COPY_BATCH_SIZE if producer.batch_size is None else producer.batch_size),
        transactional_id=transactional_id,
    )


def _seconds(milliseconds: int | None, default_s: float) -> float:
    return default_s if milliseconds is None else milliseconds / 1000


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

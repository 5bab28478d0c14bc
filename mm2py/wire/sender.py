"""The produce side of the batch path: forwarded batches to the target, pipelined, idempotent, and kept going
through whatever a Kafka cluster goes through in normal operation (a leader lost, a rolling restart, a stalled
broker, leader elections).

It follows Kafka's Java producer (``clients/producer/internals``: Sender, RecordAccumulator, TransactionManager)
rule for rule where they apply to batches that are already built:

- up to ``max.in.flight.requests.per.connection`` (5) Produce requests per broker, each with at most one batch
  per partition (``RecordAccumulator.drain``), so at most five batches of a partition are in flight: what a
  broker's duplicate detection remembers per producer and partition; but one alone until the partition's leader
  acknowledged one under the current producer id and epoch (stricter than Java: a broker without state for a
  producer takes its batches at any sequence, so one behind a refused batch would be written first);
- a partition's batches in flight are all at one broker: after its leader moves, nothing more goes to the new
  leader until every request at the old one is answered or timed out (stricter than Java, which lets a new
  batch go and fails it with OUT_OF_ORDER_SEQUENCE_NUMBER; never a sequence at two brokers at once);
- a retriable error, a lost connection or a timed-out request returns the partition's unacknowledged batches
  for a resend, in sequence order, with the same producer id, epoch and sequence, one batch at a time until
  they are acknowledged (``Sender.completeBatch`` -> ``reenqueueBatch``; ``shouldStopDrainBatchesForPartition``),
  after ``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, with jitter (KIP-580; :mod:`mm2py.backoff`);
- an error that means stale metadata, and any disconnect, requests a metadata refresh
  (:mod:`mm2py.wire.metadata`);
- DUPLICATE_SEQUENCE_NUMBER counts as acknowledged (``Sender.completeBatch``: the broker wrote it before and no
  longer knows where);
- OUT_OF_ORDER_SEQUENCE_NUMBER for the batch that follows the last acknowledged one (a gap: the broker lost our
  sequence), UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH bump the epoch for that partition and renumber its
  unacknowledged batches from 0 (KIP-360; ``TransactionManager.canRetry``, ``handleFailedBatch``,
  ``bumpIdempotentProducerEpoch``: an idempotent producer bumps its epoch itself, and asks InitProducerId for a
  new id only when the epoch is exhausted); an OUT_OF_ORDER_SEQUENCE_NUMBER for a later batch is only the echo
  of an earlier failure and is resent as it is;
- a partition's new batches wait up to ``linger.ms`` for more to join them unless they already fill a batch
  (``batch.size``, or the largest batch the sender merges small ones into), and a broker's request goes once
  one of its partitions is ready, carrying every partition that has something (``RecordAccumulator.ready``:
  full or expired; ``drainBatchesForOneNode``); :meth:`Sender.flush` sends everything at once until the sender
  is idle (``beginFlush``: the copy's end, a transaction's commit);
- the Produce request's timeout is the request timeout (``request.timeout.ms``), which is also how long its answer
  is awaited; ``delivery.timeout.ms`` bounds how long a batch may stay unacknowledged, after which its partition
  stops (its range is retried later from what was acknowledged);
- MESSAGE_TOO_LARGE and other non-retriable errors stop the partition with the error.

Nothing here raises for a partition's failure: a partition that stops says why in
:attr:`PartitionQueue.failure`, and the others go on.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mm2py.backoff import RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, ExponentialBackoff
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batches import RecordBatch
from mm2py.wire.cluster import Cluster, Pending, ProducedPartition, ProducerIds, RecordSetPieces
from mm2py.wire.errors import INVALID_PRODUCER_EPOCH, REQUEST_TIMED_OUT, WireError
from mm2py.wire.metadata import Leaders
from mm2py.wire.partition_queue import OFFSET_UNKNOWN, PartitionQueue, ProducerBatch, State
from mm2py.wire.produce_failures import Action, failure_action, too_large

log = logging.getLogger(__name__)

MAX_EPOCH = 32767  # Short.MAX_VALUE: past it, an idempotent producer needs a new id


@dataclass(frozen=True)
class SenderSettings:
    """The target producer's settings that the sender honours, with the Java producer's defaults."""

    flow: str
    target: str
    request_timeout_s: float = 30.0  # request.timeout.ms
    delivery_timeout_s: float = 120.0  # delivery.timeout.ms
    retry_backoff_s: float = RETRY_BACKOFF_S  # retry.backoff.ms
    retry_backoff_max_s: float = RETRY_BACKOFF_MAX_S  # retry.backoff.max.ms
    max_in_flight: int = 5  # max.in.flight.requests.per.connection (at most 5 with idempotence)
    request_bytes: int = 16 * 1024 * 1024  # a Produce request stops taking partitions here
    merge_below: int = 0  # small unsent batches of one partition are merged (0: never) ...
    merge_up_to: int = 0  # ... into one of at most this many bytes
    linger_s: float = 0.0  # linger.ms: how long a partition's new batches wait for more ...
    batch_bytes: int = 0  # ... unless they add up to this many bytes (0: they never wait)
    transactional_id: str | None = None  # batches go inside this id's transactions (mm2py.wire.transactions)


@dataclass(eq=False)
class _Request:
    node: int
    pending: Pending[list[ProducedPartition]]
    batches: dict[TopicPartition, ProducerBatch]


class Sender:
    """Moves the partition queues' batches to the target (one thread; the cluster is not shared)."""

    def __init__(
        self,
        cluster: Cluster,
        queues: Iterable[PartitionQueue],
        settings: SenderSettings,
        producer: ProducerIds,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.queues = {q.key: q for q in queues}
        # The partitions given batches and not yet found idle: a turn looks at these, not at every partition (a
        # task may follow hundreds of quiet ones). A partition becomes busy only through ``add``.
        self._busy: dict[TopicPartition, PartitionQueue] = {}
        self.producer = producer
        self.clock = clock
        self.backoff = ExponentialBackoff(settings.retry_backoff_s, settings.retry_backoff_max_s)
        self.leaders = Leaders(cluster, {q.topic for q in self.queues.values()}, clock, self.backoff)
        self.requests: dict[int, collections.deque[_Request]] = collections.defaultdict(collections.deque)
        self.epoch_bumps = 0  # how often the epoch was bumped, for logs and tests
        self._flushing = False

    def add(self, key: TopicPartition, batches: Iterable[ProducerBatch]) -> None:
        """Batches to send to partition ``key``, in order; their linger and delivery timeout start when they were
        created (``ProducerBatch.created``, on the sender's clock), or now."""
        q = self.queues[key]
        if q.failure is not None:
            return  # the partition stopped: its range is copied again from what was acknowledged
        now = self.clock()
        for batch in batches:
            if batch.created < 0:
                batch.created = now
            q.unsent.append(batch)
        self._busy[key] = q

    def busy(self) -> bool:
        """A partition still has batches to send or answers to wait for."""
        return bool(self._busy_queues())

    def _busy_queues(self) -> list[PartitionQueue]:
        """The partitions with batches to send or answers to wait for (those found idle leave the set)."""
        idle = [key for key, q in self._busy.items() if not q.busy]
        for key in idle:
            del self._busy[key]
        return list(self._busy.values())

    def flush(self) -> None:
        """Send what waits for ``linger.ms`` at once, from now until the sender is idle (Java's
        ``RecordAccumulator.beginFlush``, as ``KafkaProducer.flush`` and a transaction's commit call it)."""
        self._flushing = True

    def in_flight(self) -> int:
        return sum(len(r) for r in self.requests.values())

    def step(self, wait_s: float = 0.05) -> None:
        """One turn: take in metadata, send what may go, wait up to ``wait_s`` for answers, handle them."""
        now = self.clock()
        self.leaders.poll()
        self._expire(now)
        self._bump_epochs()
        sent = self._drain(now)
        self.cluster.poll(0.0 if sent else self._wait(now, wait_s))
        self._complete()
        if self._flushing and not self._busy_queues():
            self._flushing = False

    def _wait(self, now: float, wait_s: float) -> float:
        """How long to wait for answers when nothing was sent: until a backoff or a linger ends, at most
        ``wait_s``."""
        due = [wait_s]
        for q in self._busy_queues():
            if q.retry_at > now:
                due.append(q.retry_at - now)
            lingering = self._linger_left(q, now)
            if lingering > 0:
                due.append(lingering)
        return max(0.0, min(due))

    def _linger_left(self, q: PartitionQueue, now: float) -> float:
        """How much longer the partition's unsent batches wait for more (0: it is ready): until its oldest has
        waited ``linger.ms``, unless they fill a batch, a batch is to be resent, or the sender flushes
        (``RecordAccumulator.partitionReady``: sendable when full, expired or flushing)."""
        if self._flushing or self.settings.linger_s <= 0 or not q.unsent or q.first_returned() is not None:
            return 0.0
        left = q.unsent[0].created + self.settings.linger_s - now
        if left <= 0:
            return 0.0
        size = 0
        for batch in q.unsent:
            size += batch.batch.size
            if size >= self.settings.batch_bytes:
                return 0.0
        return left

    # -- sending --------------------------------------------------------------------------------------------

    def _drain(self, now: float) -> bool:
        by_node: dict[int, list[PartitionQueue]] = collections.defaultdict(list)
        for q in self._busy_queues():
            node = self._destination(q, now)
            if node is not None:
                by_node[node].append(q)
        sent = False
        for node, waiting in by_node.items():
            if all(self._linger_left(q, now) > 0 for q in waiting):
                continue  # no partition of this broker is ready yet
            while waiting and len(self.requests[node]) < self.settings.max_in_flight:
                record_sets: dict[TopicPartition, RecordSetPieces] = {}
                batches: dict[TopicPartition, ProducerBatch] = {}
                size = 0
                for q in list(waiting):  # at most one batch per partition per request
                    batch = self._peek(q)
                    if batch is None:
                        waiting.remove(q)
                        continue
                    if batches and size + batch.batch.size > self.settings.request_bytes:
                        continue  # first in the next request
                    self._commit(q, batch, node)
                    assert batch.wire is not None
                    record_sets[q.key], batches[q.key] = batch.wire, batch
                    size += batch.batch.size
                if not batches:
                    break
                timeout_ms = int(self.settings.request_timeout_s * 1000)
                pending = self.cluster.produce(
                    node, record_sets, timeout_ms=timeout_ms, transactional_id=self.settings.transactional_id
                )
                self.requests[node].append(_Request(node, pending, batches))
                sent = True
        return sent

    def _destination(self, q: PartitionQueue, now: float) -> int | None:
        """The broker the partition's next batch goes to now, or None (nothing to send, or not yet)."""
        if not q.busy or q.bump_epoch or now < q.retry_at:
            return None
        if not q.unsent and q.first_returned() is None:
            return None  # everything sent; waiting for answers
        leader = self.leaders.leader(q.key)
        if leader is None:
            self.leaders.request_update()
            return None
        if q.in_flight and q.node != leader:
            return None  # its batches in flight are at the old leader: one broker at a time
        if not self.cluster.ready(leader):
            # Connecting, or the leader is gone: Java's NetworkClient requests a metadata update on every
            # disconnect, including a connection attempt that failed (DefaultMetadataUpdater.handleServerDisconnect).
            self.leaders.request_update()
            return None
        return leader

    def _peek(self, q: PartitionQueue) -> ProducerBatch | None:
        """The partition's next batch to send, if it may go now."""
        returned = q.first_returned()
        if returned is not None:
            return None if q.in_flight else returned  # one at a time while earlier batches are resent
        if not q.unsent or q.in_flight >= self.settings.max_in_flight:
            return None
        if q.in_flight and q.last_acked_sequence < 0:
            # Nothing of this producer id and epoch acknowledged here yet, so the leader may have no state for it,
            # and then takes any sequence (ProducerAppendInfo.checkSequence): a batch behind one it refuses would
            # be written first. One at a time until the first is acknowledged; from then on a gap is refused.
            return None
        if q.producer != self.producer and q.sent:
            # The producer's epoch moved on (another partition bumped it): this partition switches to it, at
            # sequence 0, once none of its batches is unacknowledged (TransactionManager.maybeUpdateProducerIdAndEpoch;
            # the accumulator drains no new batch while in-flight ones have another epoch).
            return None
        if self.settings.merge_below and len(q.unsent) > 1:
            q.merge_unsent_head(self.settings.merge_below, self.settings.merge_up_to)
        return q.unsent[0]

    def _commit(self, q: PartitionQueue, batch: ProducerBatch, node: int) -> None:
        """``batch`` goes into a request to ``node``: a new one gets its sequence now, once."""
        if batch.base_sequence < 0:
            if q.producer != self.producer:
                q.producer, q.next_sequence, q.last_acked_sequence = self.producer, 0, -1
            q.unsent.popleft()
            q.assign_next(batch, self.producer, transactional=self.settings.transactional_id is not None)
            q.sent.append(batch)
        batch.state = State.IN_FLIGHT
        q.node = node

    # -- answers --------------------------------------------------------------------------------------------

    def _complete(self) -> None:
        for node, requests in self.requests.items():
            for request in [r for r in requests if r.pending.done]:
                requests.remove(request)
                self._answered(node, request)

    def _answered(self, node: int, request: _Request) -> None:
        now = self.clock()
        answer = request.pending.result()
        if isinstance(answer, WireError):
            # No answer at all (a lost connection, a timeout): the batches' fate is unknown, so they are resent
            # with the same sequences, and the broker's partitions are looked up again.
            self.leaders.node_failed(node)
            for key, batch in request.batches.items():
                self._failed(self.queues[key], batch, answer, now, -1)
            return
        parts = {(p.topic, p.partition): p for p in answer}
        for key, batch in request.batches.items():
            q = self.queues[key]
            part = parts.get(key)
            if part is None:
                self._failed(q, batch, WireError(REQUEST_TIMED_OUT, f"no answer for {key} from node {node}"), now, -1)
            elif part.error is None:
                self._acknowledged(q, batch, part.base_offset)
            else:
                self._failed(q, batch, part.error, now, part.log_start_offset)

    def _acknowledged(self, q: PartitionQueue, batch: ProducerBatch, base_offset: int) -> None:
        if batch.state is not State.IN_FLIGHT or q.failure is not None:
            return  # answered after its partition stopped: it stays uncounted (the range is copied again)
        latency_now = time.time() * 1000
        for done in q.acknowledged(batch, base_offset):
            q.measurer.acknowledged(latency_now, *batch_timestamps(done.batch))

    def _failed(self, q: PartitionQueue, batch: ProducerBatch, error: WireError, now: float, log_start: int) -> None:
        """Carry out what :func:`failure_action` decides for a batch that failed."""
        if q.failure is not None or batch.state is not State.IN_FLIGHT:
            return
        action = failure_action(
            error,
            next_sequence=q.is_next_sequence(batch),
            current_producer=batch.producer == q.producer,
            transactional=self.settings.transactional_id is not None,
        )
        if action is Action.ACKNOWLEDGE:
            self._acknowledged(q, batch, OFFSET_UNKNOWN)
            return
        if action is Action.STOP_TOO_LARGE:
            q.stop(too_large(self.settings.target, q.topic, batch, error))
            return
        if action is Action.STOP:
            q.stop(error)
            return
        if action is Action.BUMP_EPOCH_AND_RESEND:
            q.bump_epoch = True
        elif action is Action.REFRESH_METADATA_AND_RESEND:
            self.leaders.request_update()
        if q.failing_since is None:
            log.warning(
                "flow=%s %s: producing to %s failed (%s); resending its unacknowledged batches in order",
                self.settings.flow,
                q.where,
                self.settings.target,
                error,
            )
        batch.attempts += 1
        q.returned(batch, now, self.backoff.backoff(batch.attempts - 1))  # RecordAccumulator.shouldBackoff

    def _expire(self, now: float) -> None:
        """delivery.timeout.ms: a partition whose oldest unacknowledged batch is older stops (Java:
        ``RecordAccumulator.expiredBatches`` and ``Sender.getExpiredInflightBatches``)."""
        for q in self._busy_queues():
            oldest = q.oldest_unacknowledged()
            if oldest is not None and now - oldest.created > self.settings.delivery_timeout_s:
                q.stop(
                    WireError(
                        REQUEST_TIMED_OUT,
                        f"not acknowledged by {self.settings.target} within delivery.timeout.ms "
                        f"({self.settings.delivery_timeout_s:.0f} s)",
                    )
                )

    def _bump_epochs(self) -> None:
        """Renumber, under a bumped epoch, the partitions that asked for it and have nothing in flight any more
        (TransactionManager.bumpIdempotentProducerEpoch: the epoch is bumped by the producer itself)."""
        due = [q for q in self._busy_queues() if q.bump_epoch and not q.in_flight]
        if not due:
            return
        if self.producer.epoch >= MAX_EPOCH:
            for q in due:  # a new producer id is a task's business: the range is copied again from its progress
                q.stop(WireError(INVALID_PRODUCER_EPOCH, "the producer epoch is exhausted"))
            return
        self.producer = ProducerIds(self.producer.producer_id, self.producer.epoch + 1)
        self.epoch_bumps += 1
        for q in due:
            log.warning(
                "flow=%s %s: %s lost this producer's sequence; resending its unacknowledged batches under epoch %d",
                self.settings.flow,
                q.where,
                self.settings.target,
                self.producer.epoch,
            )
            q.renumber(self.producer)


def batch_timestamps(batch: RecordBatch) -> tuple[int, float, float, float, float]:
    """(records, min, max, sum, last) of a batch's record timestamps, from its header alone: the first and the
    newest are there; the sum assumes the records spread evenly between them (no record is decoded)."""
    count = batch.record_count
    low, high = float(batch.base_timestamp), float(batch.max_timestamp)
    if batch.has_delete_horizon or low > high:  # base_timestamp then holds the cleaner's delete horizon
        low = high
    return count, low, high, count * (low + high) / 2, high

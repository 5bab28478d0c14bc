"""The batch copy task (runs on executors): forward whole record batches from source to target.

Same contract as :func:`mm2py.executor.record_copy.copy_partitions` — a CopySpec and PartitionRanges in, one
CopyResult per range out — but instead of consuming and producing record by record it moves Kafka record
batches as bytes (keys, values, headers, timestamps and compression pass through untouched; the target
assigns offsets), serving all of a task's ranges at once with the batch path's own Kafka client
(:mod:`mm2py.wire`):

* a fetcher thread (:class:`~mm2py.wire.fetcher.Fetcher`) fetches every partition still to copy from its
  leader, and turns what comes into batches to send (:mod:`mm2py.wire.forwarding`);
* the task's thread sends them (:class:`~mm2py.wire.sender.Sender`): pipelined, idempotent, through leader
  moves, lost brokers and stalls, as Kafka's Java producer does;
* every copied record's upstream->downstream offset is known (record i of a contiguous batch lands at the
  acknowledged base offset + i): progress and offset syncs as the record path writes them, once acknowledged.

A partition that cannot go on (its leader away longer than the stall timeout, a batch not acknowledged within
``delivery.timeout.ms``, a record too large, its records deleted before they were copied) stops alone: its
range's result counts what the target acknowledged, records that as progress, and says why it stopped; the
other ranges of the task go on. So a broker failure never makes the task fail and Spark copy the task's ranges
again: only a crash of the task's process does (at-least-once).

A range may end inside a batch: that batch is rebuilt with the records before the range's end only, so a
range copies exactly its offsets, as the record copier does. Exactly-once flows (transactions) and provenance
headers (a header added to every record) need per-record work and use the record copier.

In continuous mode a task *follows* its partitions (``CopySpec.follow_s``): it keeps fetching what arrives for
that long, so a record written meanwhile is copied within a fetch wait and a produce instead of waiting for the
next Spark job. The ranges' ends are then caps: once one is reached (a backlog) the task ends early.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

from mm2py.errors import Failure, ReplicationError
from mm2py.executor import record_copy
from mm2py.executor.allocator import tune_for_large_buffers
from mm2py.executor.batch_results import BatchRange, finish
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.task_logging import executor_logging
from mm2py.executor.transactional_copy import TransactionalCopy
from mm2py.librdkafka.clients import cached_producer
from mm2py.wire.cluster import Cluster, FetchedPartition, ProducerIds
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.errors import WireError
from mm2py.wire.fetcher import Fetcher, FetcherSettings, FetchPartition
from mm2py.wire.forwarding import ForwardingError, batches_to_send
from mm2py.wire.partition_queue import PartitionQueue, ProducerBatch
from mm2py.wire.sender import Sender, SenderSettings, batch_timestamps
from mm2py.wire.transactions import TransactionError

log = logging.getLogger(__name__)

_MESSAGE_MAX_BYTES = "1000000"  # librdkafka's default message.max.bytes, which the record path's producer has
# Batches below this size waiting in one partition's queue are merged into one of at most _MERGE_UP_TO bytes
# (or half of message.max.bytes): tiny batches would otherwise go one per partition per Produce request.
_MERGE_BELOW = 16 * 1024
_MERGE_UP_TO = 512 * 1024
_QUEUED_FETCHES = 2  # fetch answers waiting for the sender (each up to the fetch's max bytes): bounds memory
_Fetched = list[tuple[BatchRange, list[ProducerBatch], int]]  # one answer's batches, and the position after them


def copy_partitions(
    spec: CopySpec, ranges: Iterator[PartitionRange], last_attempt: bool = False
) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy all ``ranges`` together, batch by batch.

    Failures travel as data, per range (``CopyResult.error``, with what was copied before it); the task itself
    raises only when it cannot record progress, and then Spark runs it again.
    """
    todo = [rng for rng in ranges if rng.start < rng.end]
    if spec.provenance:
        yield from record_copy.copy_partitions(spec, iter(todo), last_attempt=last_attempt)
        return
    executor_logging(spec)
    if todo:
        tune_for_large_buffers()
        yield from _BatchCopier(spec, todo).run()


def sender_settings(spec: CopySpec, max_batch_bytes: int, transactional_id: str | None = None) -> SenderSettings:
    """The target producer's settings the sender honours, with the Java producer's defaults."""
    settings = spec.producer_settings

    def seconds(default_ms: int, *keys: str) -> float:
        for key in keys:
            value = str(settings.get(key, "")).strip()
            if value.isdigit():
                return int(value) / 1000
        return default_ms / 1000

    return SenderSettings(
        spec.flow,
        spec.target,
        request_timeout_s=seconds(30_000, "request.timeout.ms", "socket.timeout.ms"),
        delivery_timeout_s=seconds(120_000, "delivery.timeout.ms", "message.timeout.ms"),
        retry_backoff_s=seconds(100, "retry.backoff.ms"),
        retry_backoff_max_s=seconds(1_000, "retry.backoff.max.ms"),
        merge_below=_MERGE_BELOW,
        merge_up_to=min(_MERGE_UP_TO, max_batch_bytes // 2),
        transactional_id=transactional_id,
    )


class _BatchCopier:
    def __init__(self, spec: CopySpec, ranges: list[PartitionRange]) -> None:
        self.spec = spec
        self.ranges = {
            (r.topic, r.partition): BatchRange(
                r,
                FetchPartition(r.topic, r.partition, r.start, r.end),
                PartitionQueue(r.remote_topic, r.partition, f"topic={r.topic} partition={r.partition}"),
            )
            for r in ranges
        }
        self.read_committed = spec.consumer_settings.get("isolation.level") == "read_committed"
        self.max_batch_bytes = int(spec.producer_settings.get("message.max.bytes", _MESSAGE_MAX_BYTES))
        self.started = time.monotonic()
        self.deadline = self.started + spec.follow_s
        self.inbox: queue.Queue[_Fetched | BaseException | None] = queue.Queue(_QUEUED_FETCHES)
        self.stop = threading.Event()

    # -- the task's thread: produce ------------------------------------------------------------------------
    def run(self) -> list[CopyResult]:
        # The producers of progress and offset syncs are needed only at the end, but a new idempotent producer
        # first waits for its producer id (about 0.5 s on a real broker, two of them in a row): created now,
        # that wait overlaps the copy instead of delaying the task's end, and in continuous mode the next job.
        cached_producer(self.spec.producer_settings)
        if self.spec.syncs_producer_settings is not None:
            cached_producer(self.spec.syncs_producer_settings)
        fetcher = threading.Thread(target=self._fetch_loop, name="mm2py-batch-fetch", daemon=True)
        failure: Failure | None = None
        target = KafkaConnection(self.spec.target, self.spec.producer_settings)
        eos: TransactionalCopy | None = None
        sender: Sender | None = None
        try:
            target.bootstrap(self.spec.stall_timeout_s)
            queues = [r.queue for r in self.ranges.values()]
            if self.spec.exactly_once:
                eos = TransactionalCopy(self.spec, target, self.ranges.values())
                producer = eos.initialize(self.spec.stall_timeout_s)
                queues += eos.queues()
            else:
                producer = self._producer_ids(target)
            settings = sender_settings(self.spec, self.max_batch_bytes, eos.transactional_id if eos else None)
            sender = Sender(target, queues, settings, producer)
            fetcher.start()
            self._copy(sender, eos)
        except TransactionError as exc:
            failure = _transaction_failure(self.spec, exc)
        except ReplicationError as exc:
            failure = exc.failure
        except Exception as exc:  # a bug or the library's: the acknowledged records still count
            log.exception("flow=%s: the batch copy task failed", self.spec.flow)
            failure = Failure(f"flow={self.spec.flow}: copying failed: {type(exc).__name__}: {exc}")
        finally:
            self.stop.set()
            if eos is not None and eos.txn.in_transaction:
                _abort_quietly(eos, sender, self.spec)
            if fetcher.is_alive():
                fetcher.join(timeout=self.spec.stall_timeout_s)
            target.close()
        seconds = time.monotonic() - self.started
        return finish(self.spec, self.ranges.values(), failure, seconds, eos.committed if eos else None)

    def _copy(self, sender: Sender, eos: TransactionalCopy | None) -> None:
        """Hand fetched batches to the sender until the fetcher is done and everything is acknowledged;
        exactly-once, commit a transaction whenever one is due, once the sender is drained."""
        fetching = True
        while fetching or sender.busy() or (eos is not None and eos.txn.in_transaction):
            if eos is None or not eos.committing:
                fetching = self._take_fetched(sender, block=not sender.busy(), fetching=fetching)
                self._stop_fetching_stopped_queues()
            if eos is not None:
                stopped = next((r.queue for r in self.ranges.values() if r.queue.failure is not None), None)
                if stopped is not None:
                    raise ReplicationError(  # the open transaction is aborted: only committed ones count
                        f"flow={self.spec.flow} {stopped.where}: producing to {self.spec.target} failed "
                        f"({stopped.failure}); the task's open transaction is aborted",
                        retriable=bool(stopped.failure and stopped.failure.retriable),
                    )
                eos.before_step(sender, self.spec.stall_timeout_s)
                eos.committing = eos.committing or eos.due(copying_done=not fetching)
                if eos.committing and not sender.busy():
                    eos.commit(sender, self.spec.stall_timeout_s)
                    continue
            if sender.busy():
                sender.step()

    def _producer_ids(self, target: Cluster) -> ProducerIds:
        """InitProducerId (idempotent), from any broker, retried until the stall timeout."""
        deadline = time.monotonic() + self.spec.stall_timeout_s
        answer: ProducerIds | WireError | None = None
        for node in _cycle(target, deadline):
            pending = target.init_producer_id(node)
            while not pending.done and time.monotonic() < deadline:
                target.poll(0.05)
            answer = pending.result() if pending.done else None
            if isinstance(answer, ProducerIds):
                return answer
            if isinstance(answer, WireError) and not answer.retriable:
                raise ReplicationError(
                    f"flow={self.spec.flow}: InitProducerId on {self.spec.target} failed: {answer}",
                    code=answer.name,
                    retriable=False,
                )
        raise ReplicationError(f"flow={self.spec.flow}: InitProducerId on {self.spec.target} failed: {answer}")

    def _take_fetched(self, sender: Sender, *, block: bool, fetching: bool) -> bool:
        """Move what the fetcher queued into the partition queues; False once the fetcher is done."""
        while fetching:
            try:
                item = self.inbox.get(block=block, timeout=0.1 if block else None)
            except queue.Empty:
                return fetching
            if item is None:
                return False
            if isinstance(item, BaseException):
                raise item
            for state, outgoing, position in item:
                sender.add(state.queue.key, outgoing)
                state.fetched_to = position
            block = False
        return fetching

    def _stop_fetching_stopped_queues(self) -> None:
        """A partition whose sending stopped is not fetched any further (what it fetched would not be sent)."""
        for state in self.ranges.values():
            if state.queue.failure is not None and state.fetch.failure is None:
                state.fetch.failure = state.queue.failure

    # -- the fetcher thread ----------------------------------------------------------------------------------
    def _fetch_loop(self) -> None:
        source: KafkaConnection | None = None
        try:
            source = KafkaConnection(self.spec.source, self.spec.consumer_settings)
            source.bootstrap(self.spec.stall_timeout_s)
            fetcher = Fetcher(
                source,
                [r.fetch for r in self.ranges.values()],
                FetcherSettings(self.read_committed, stall_timeout_s=self.spec.stall_timeout_s),
            )
            following = self.spec.follow_s > 0
            while not self.stop.is_set():
                active = fetcher.active()
                if not active or (following and self._follow_over(len(active))):
                    break
                self._forward(fetcher.step())
            self._put(None)
        except BaseException as exc:  # handed to the task's thread, which raises it
            self._put(exc)
        finally:
            if source is not None:
                source.close()

    def _follow_over(self, active: int) -> bool:
        """Following ends at the deadline, or once a range reached its cap: that partition has a backlog the
        next job copies, which must not wait for the deadline."""
        return time.monotonic() >= self.deadline or active < len(self.ranges)

    def _forward(self, answered: list[tuple[FetchPartition, FetchedPartition]]) -> None:
        """Turn fetched record sets into batches for the sender: one hand-over per fetch answer."""
        fetched: _Fetched = []
        now = time.time() * 1000
        for fetch, part in answered:
            state = self.ranges[fetch.key]
            state.source_end = fetch.source_end
            aborted = part.aborted_transactions if self.read_committed else None
            try:
                outgoing = batches_to_send(fetch, part.records, aborted, self.max_batch_bytes, self.spec.target)
            except ForwardingError as exc:
                fetch.failure = exc.error
                continue
            if outgoing is None:
                continue
            for item in outgoing:  # MM2 measures record age when the task reads the records
                count, low, high, total, last = batch_timestamps(item.batch)
                state.queue.measurer.read(now, count, low, high, total, last, item.batch.size)
            fetched.append((state, outgoing, fetch.position))
        if fetched:
            self._put(fetched)

    def _put(self, item: _Fetched | BaseException | None) -> None:
        while not self.stop.is_set():
            try:
                self.inbox.put(item, timeout=0.1)
                return
            except queue.Full:
                continue


def _transaction_failure(spec: CopySpec, exc: TransactionError) -> Failure:
    if exc.fenced:
        return Failure(
            f"flow={spec.flow}: fenced: another producer with this task's transactional.id took over (another mm2py "
            f"run, or MirrorMaker 2, copies {spec.flow} exactly-once): {exc.error}",
            exc.error.name,
            retriable=False,
        )
    return Failure(
        f"flow={spec.flow}: the transaction on {spec.target} failed: {exc.error}", exc.error.name, exc.retriable
    )


def _abort_quietly(eos: TransactionalCopy, sender: Sender | None, spec: CopySpec) -> None:
    """Abort the task's open transaction on the way out; if that fails too, the transaction timeout or the next
    task's InitProducerId aborts it (nothing of it is ever read as committed)."""
    try:
        if sender is not None:
            eos.abort(sender, min(spec.stall_timeout_s, 30.0))
        else:
            eos.txn.abort(min(spec.stall_timeout_s, 30.0))
    except (TransactionError, ReplicationError) as exc:
        log.warning("flow=%s: aborting the open transaction failed (%s); it ends with its timeout", spec.flow, exc)


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

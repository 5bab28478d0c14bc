"""The batch copy task (runs on executors): forward whole record batches from source to target.

Same contract as :func:`mm2py.executor.record_copy.copy_partitions` — a CopySpec and PartitionRanges in, one
CopyResult per range out — but instead of consuming and producing record by record it moves Kafka record
batches as bytes (keys, values, headers, timestamps and compression pass through untouched; the target
assigns offsets), serving all of a task's ranges at once with the batch path's own Kafka client
(:mod:`mm2py.wire`):

* a fetch thread (:mod:`mm2py.executor.batch_fetching`) fetches every partition still to copy from its leader and
  turns what comes into batches to send (:mod:`mm2py.wire.forwarding`);
* the task's thread sends them (:class:`~mm2py.wire.sender.Sender`): pipelined, idempotent, through leader
  moves, lost brokers and stalls, as Kafka's Java producer does — or, exactly-once, inside transactions
  (:mod:`mm2py.executor.transactional_copy`);
* every copied record's upstream->downstream offset is known (record i of a contiguous batch lands at the
  acknowledged base offset + i): progress and offset syncs in the record path's formats, through the same client
  (:mod:`mm2py.executor.batch_results`, :mod:`mm2py.executor.control_writes`), every
  ``CopySpec.progress_interval_s`` (following: every second) and at the end.

A partition that cannot go on (its leader away longer than the stall timeout, a batch not acknowledged within
``delivery.timeout.ms``, a record too large, its records deleted before they were copied) stops alone: its
range's result counts what was copied, records that as progress, and says why it stopped; the other ranges go
on. So a broker failure never makes the task fail and Spark copy the task's ranges again: only a crash of the
task's process does, and then Spark's next attempt starts from the progress its predecessor recorded.

In continuous mode (``CopySpec.control``) the task *follows* its partitions: it copies what arrives for as long as
the driver says so, reporting to it every second (:mod:`mm2py.executor.driver_link`), so a record written
meanwhile is on the target within a fetch wait and a produce, and the driver's lag and metrics stay current.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from mm2py.errors import Failure, ReplicationError
from mm2py.executor.allocator import tune_for_large_buffers
from mm2py.executor.batch_fetching import FetchThread
from mm2py.executor.batch_producer import (
    max_batch_bytes,
    producer_ids,
    sender_settings,
    transaction_failure,
)
from mm2py.executor.batch_results import BatchRange, Counted, ProgressRecorder, finish
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.control_writes import ControlWrites, ProgressLayout, SourceSyncs
from mm2py.executor.driver_link import REPORT_INTERVAL_S, DriverLink, report_row
from mm2py.executor.task_logging import executor_logging
from mm2py.executor.throttle import Throttle
from mm2py.executor.transactional_copy import TransactionalCopy
from mm2py.metrics.measurement import RangeMeasurer
from mm2py.mirror.progress import progress_of
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue, ProducerBatch
from mm2py.wire.sender import Sender
from mm2py.wire.topic_reader import read_topic
from mm2py.wire.transactions import FENCED, TransactionError

log = logging.getLogger(__name__)
# How often the task looks over every range for one whose sending stopped, to stop fetching it (what is fetched
# for it meanwhile is dropped by the sender): a pass over hundreds of ranges on every turn would cost more.
STOP_CHECK_INTERVAL_S = 0.25


def copy_partitions(spec: CopySpec, ranges: Iterator[PartitionRange], attempt: int = 0) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy all ``ranges`` together, batch by batch.

    Failures travel as data, per range (``CopyResult.error``, with what was copied before it); the task itself
    raises only when it cannot record progress, and then Spark runs it again (``attempt`` > 0), from the
    progress its predecessor recorded.
    """
    todo = [rng for rng in ranges if rng.start < rng.end]
    executor_logging(spec)
    if todo:
        tune_for_large_buffers()
        yield from _BatchCopier(spec, todo, retried=attempt > 0).run()


class _BatchCopier:
    def __init__(self, spec: CopySpec, ranges: list[PartitionRange], *, retried: bool = False) -> None:
        self.spec = spec
        self.retried = retried
        self.ranges = {
            (r.topic, r.partition): BatchRange(
                r,
                FetchPartition(r.topic, r.partition, r.start, r.end),
                PartitionQueue(r.remote_topic, r.partition, f"topic={r.topic} partition={r.partition}"),
            )
            for r in ranges
        }
        # Exactly-once copies committed records only (as the record path's consumer: librdkafka/defaults.py).
        self.read_committed = spec.exactly_once or spec.consumer_connection.isolation_level == "read_committed"
        self.max_batch_bytes = max_batch_bytes(spec.producer_connection)
        self.started = time.monotonic()
        self.measure_lock = threading.Lock()
        self.fetch = FetchThread(
            spec,
            self.ranges,
            read_committed=self.read_committed,
            max_batch_bytes=self.max_batch_bytes,
            measure_lock=self.measure_lock,
            throttle=Throttle(spec.task_throughput(len(ranges))),
        )
        self.recorder = ProgressRecorder(spec, self.ranges.values(), progress=not spec.exactly_once)
        task = ",".join(f"{r.topic}-{r.partition}" for r in ranges[:3])
        self.link = DriverLink(spec.control, spec.flow, task) if spec.control is not None else None
        # Each range's last row: records and bytes reported so far, and its (position, source end), None before
        # the first row.
        self.reported: dict[int, tuple[int, int, tuple[int, int] | None]] = {
            id(r): (0, 0, None) for r in self.ranges.values()
        }

    # -- the task's thread: produce ------------------------------------------------------------------------
    def run(self) -> list[CopyResult]:
        if self.retried and self.spec.exactly_once:
            # Spark's next attempt would write under the job's epoch, beside its predecessor's open transaction
            # (and a zombie predecessor could still commit): the ranges go back to the driver, which fences the
            # epoch and copies them in its next job from the committed progress.
            not_again = Failure(
                f"flow={self.spec.flow}: an exactly-once copy task is not run again within its job; the driver "
                "fences its predecessor and copies its ranges in the next job",
                retriable=True,
            )
            nothing = {id(r): Counted() for r in self.ranges.values()}
            results = finish(self.spec, self.recorder, None, not_again, 0.0, nothing)
            self._final_report(nothing, not_again)
            return results
        failure: Failure | None = None
        target = KafkaConnection(self.spec.target, self.spec.producer_connection)
        source_syncs = SourceSyncs(self.spec)
        eos: TransactionalCopy | None = None
        sender: Sender | None = None
        writes: ControlWrites | None = None
        try:
            try:
                target.bootstrap(self.spec.stall_timeout_s)
                rngs = [r.rng for r in self.ranges.values()]
                layout = ProgressLayout(self.spec, target, rngs, self.spec.stall_timeout_s)
                queues = [r.queue for r in self.ranges.values()]
                if self.spec.exactly_once:
                    eos = TransactionalCopy(self.spec, target, self.ranges.values(), layout)
                    producer = eos.initialize()  # the epoch the driver fenced every predecessor with
                    queues += eos.queues()
                    writes = ControlWrites(self.spec, layout, source_syncs)
                else:
                    producer = producer_ids(self.spec, target)
                    writes = ControlWrites(self.spec, layout, source_syncs, target, producer)
                if self.retried:
                    self._resume_from_recorded_progress()
                settings = sender_settings(
                    self.spec,
                    self.spec.producer_connection,
                    self.spec.target,
                    eos.transactional_id if eos else None,
                    lingers=True,
                )
                sender = Sender(target, queues, settings, producer)
                self.fetch.start()
                self._copy(sender, eos, writes)
            except TransactionError as exc:
                failure = transaction_failure(self.spec, exc, eos.transactional_id if eos else "")
            except ReplicationError as exc:
                failure = exc.failure
            except Exception as exc:  # a bug or the library's: what was copied still counts
                log.exception("flow=%s: the batch copy task failed", self.spec.flow)
                failure = Failure(f"flow={self.spec.flow}: copying failed: {type(exc).__name__}: {exc}")
            finally:
                self.fetch.join(self.spec.stall_timeout_s)
                if eos is not None and eos.txn.in_transaction:
                    eos.abort_quietly(sender)
            committed = eos.committed if eos is not None else None
            results = finish(self.spec, self.recorder, writes, failure, time.monotonic() - self.started, committed)
        finally:
            source_syncs.close()
            target.close()
        self._final_report(committed, failure)
        return results

    def _final_report(self, committed: dict[int, Counted] | None, failure: Failure | None) -> None:
        """Following: what the last report did not count; and a task-wide failure (a fenced or failed
        transaction) on every row, so the driver ends the generation instead of waiting on the other tasks."""
        if self.link is None:
            return
        self.link.settle()
        self.link.report(with_task_failure(self._rows(committed, full=True), failure), final=True)

    def _copy(self, sender: Sender, eos: TransactionalCopy | None, writes: ControlWrites) -> None:
        """Hand fetched batches to the sender until the fetcher is done (or the driver says stop) and everything
        is acknowledged; exactly-once, commit a transaction whenever one is due, once the sender is drained;
        following, report every second; record progress as often when following (else every
        ``progress_interval_s``), a turn at a time between the sender's steps."""
        fetching = True
        next_report = time.monotonic() + REPORT_INTERVAL_S
        # Following, as often as it reports: a task lost with its executor is run again from its last recording,
        # so it copies again about a second of its copy. A task copying ranges ends soon and records then.
        record_every = self.spec.progress_interval_s
        if self.link is not None:
            record_every = min(record_every, REPORT_INTERVAL_S)
        next_record = time.monotonic() + record_every
        next_stop_check = 0.0
        while fetching or sender.busy() or (eos is not None and eos.txn.in_transaction):
            if fetching and (eos is None or not eos.committing):
                wait_s = self._quiet_wait(eos, self._due(next_report, next_record))
                fetching = self.fetch.take(self._batches_for(sender), block=not sender.busy(), wait_s=wait_s)
                if time.monotonic() >= next_stop_check:  # a pass over every range: a few times a second
                    next_stop_check = time.monotonic() + STOP_CHECK_INTERVAL_S
                    self._stop_fetching_stopped_queues()
            if eos is not None and self._transaction_step(sender, eos, copying_done=not fetching):
                continue
            if not fetching or (eos is not None and eos.committing):
                sender.flush()  # nothing more will join what waits for linger.ms
            if sender.busy():
                sender.step()
            now = time.monotonic()
            if self.link is not None:
                if self.link.answer() is False and fetching:
                    self.fetch.stop.set()  # the driver ends this generation: finish what was fetched
                    fetching = False
                if now >= next_report and not self.link.in_flight:  # one on its way: sent once it is answered
                    next_report = now + REPORT_INTERVAL_S
                    self.link.send(self._rows(eos.committed if eos else None, full=self.link.full_due))
            if eos is None:
                self.recorder.step()
                if now >= next_record:
                    next_record = now + record_every
                    self.recorder.start({id(r): r.acknowledged() for r in self.ranges.values()}, writes)

    def _due(self, next_report: float, next_record: float) -> float | None:
        """When the loop has something to do besides copying, following: a report (unless one is on its way: the
        next goes once it is answered) or a recording."""
        if self.link is None:
            return None
        return next_record if self.link.in_flight else min(next_report, next_record)

    def _quiet_wait(self, eos: TransactionalCopy | None, due: float | None) -> float:
        """How long the loop may wait for fetched records while it has nothing to send: a following task with no
        recording in flight until its next report or recording is due (records that arrive end the wait at
        once), so quiet partitions cost a wake-up a second, not ten; otherwise 0.1 s."""
        if due is None or eos is not None or self.recorder.pending is not None:
            return 0.1
        return min(1.0, max(0.01, due - time.monotonic()))

    def _transaction_step(self, sender: Sender, eos: TransactionalCopy, copying_done: bool) -> bool:
        """Exactly-once: abort on a stopped partition, add partitions, commit when due; True if it committed."""
        stopped = next((r.queue for r in self.ranges.values() if r.queue.failure is not None), None)
        if stopped is not None and stopped.failure is not None and stopped.failure.kind in FENCED:
            raise TransactionError(stopped.failure, fenced=True)  # a producer with the same id took over
        if stopped is not None:
            raise ReplicationError(  # the open transaction is aborted: only committed ones count
                f"flow={self.spec.flow} {stopped.where}: producing to {self.spec.target} failed "
                f"({stopped.failure}); the task's open transaction is aborted",
                retriable=bool(stopped.failure and stopped.failure.retriable),
            )
        eos.before_step(sender, self.spec.stall_timeout_s)
        eos.committing = eos.committing or eos.due(copying_done)
        if eos.committing and not sender.busy():
            eos.commit(sender, self.spec.stall_timeout_s)
            return True
        return False

    def _batches_for(self, sender: Sender) -> Any:
        def hand_over(state: BatchRange, outgoing: list[ProducerBatch], position: int) -> None:
            sender.add(state.queue.key, outgoing)
            state.fetched_to = position

        return hand_over

    def _stop_fetching_stopped_queues(self) -> None:
        """A partition whose sending stopped is not fetched any further (what it fetched would not be sent)."""
        for state in self.ranges.values():
            if state.queue.failure is not None and state.fetch.failure is None:
                state.fetch.failure = state.queue.failure

    # -- resuming and reporting ----------------------------------------------------------------------------
    def _resume_from_recorded_progress(self) -> None:
        """Spark's next attempt of a task whose process died: its predecessor recorded progress (every few
        seconds, or in committed transactions) that the driver's range does not know; start after it. A range
        its predecessor copied to the end is done: nothing would ever be fetched below its end again. Read as the
        target consumer (MM2 reads its offsets topic with that client), read_committed: exactly-once progress
        counts once its transaction committed."""
        reader = KafkaConnection.connected(
            self.spec.target, self.spec.target_consumer_connection, self.spec.stall_timeout_s
        )
        try:
            records = read_topic(
                reader,
                self.spec.progress_topic,
                read_committed=True,
                timeout_s=self.spec.stall_timeout_s,
                purpose=f"flow={self.spec.flow}: resuming a copy task",
            )
        finally:
            reader.close()
        stored = progress_of(records, self.spec.source)
        for key, state in self.ranges.items():
            start = stored.get(key, -1) + 1
            if start > state.fetch.position:
                log.warning("flow=%s %s: resuming at offset %d", self.spec.flow, state.queue.where, start)
                state.fetch.position = start
                state.fetch.done = start >= state.fetch.end
                state.rng = PartitionRange(*key, state.rng.remote_topic, start, max(start, state.rng.end))

    def _rows(self, committed: dict[int, Counted] | None, *, full: bool) -> list[dict[str, Any]]:
        """What each range copied since the last report (its measurements handed over and started afresh); unless
        ``full``, a range with nothing new since its last row is left out (quiet partitions cost no work here or
        on the driver)."""
        rows = []
        for r in self.ranges.values():
            counted = committed[id(r)] if committed is not None else r.acknowledged()
            records, bytes_, last_state = self.reported[id(r)]
            error = r.own_failure(self.spec.exactly_once)  # fenced: the task's failure, in its last report
            rng = r.rng
            position = counted.next_offset if counted.next_offset >= rng.start else max(rng.start, counted.upstream + 1)
            state = (position, r.source_end)
            with self.measure_lock:
                quiet = error is None and counted.records == records and r.queue.measurer.empty()
                if quiet and not full and last_state == state:
                    continue
                measurer, r.queue.measurer = r.queue.measurer, RangeMeasurer()
            measurement = measurer.measurement(
                self.spec.source, self.spec.target, rng.topic, rng.remote_topic, rng.partition
            )
            failure = {"message": f"{r.queue.where}: {error}", "retriable": error.retriable} if error else None
            rows.append(
                report_row(
                    rng.topic,
                    rng.partition,
                    position,
                    counted.records - records,
                    counted.bytes - bytes_,
                    r.source_end,
                    measurement,
                    failure,
                )
            )
            self.reported[id(r)] = (counted.records, counted.bytes, state)
        return rows


def with_task_failure(rows: list[dict[str, Any]], failure: Failure | None) -> list[dict[str, Any]]:
    """A following task's last report rows, each carrying the task's own failure unless it has one already."""
    if failure is None:
        return rows
    task_failure = {"message": failure.message, "retriable": failure.retriable}
    return [{**row, "failure": row.get("failure") or task_failure} for row in rows]

"""Exactly-once on the batch path (executor side): a task's forwarded batches, the progress of its ranges and,
when the syncs topic is on the target, their offset syncs, committed in one transaction at a time.

Why whole batches in transactions: MirrorMaker 2 (KIP-618) writes records and source offsets in one transaction
but decodes and re-encodes every record; the batch path forwards the source's batches as they are, with the
transactional bit and the task's own producer id, epoch and sequences in their headers, so exactly-once costs a
few requests per transaction instead of work per record.

A transaction is committed every ``COMMIT_INTERVAL_S`` and when the task has copied everything: the sender is
first drained (every batch acknowledged), then each range's progress record goes into the transaction (and its
offset syncs, on the target), then EndTxn. Only what a committed transaction holds counts as copied
(:class:`~mm2py.executor.batch_results.Counted`): a task that fails, is fenced or is killed leaves an
open transaction that is aborted — by itself, by the transaction timeout, or by its successor's InitProducerId —
and the range is copied again from the last committed progress, which a read_committed consumer of the target
sees together with the records.

One transactional.id per task slot (:meth:`CopySpec.slot_transactional_id`), written with the epoch the driver
initialized for the job (:mod:`mm2py.control.fencing`): a task never initializes its id, so a task of a run whose
id another producer took cannot take it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from mm2py.errors import ReplicationError
from mm2py.executor.batch_results import BatchRange, Counted
from mm2py.executor.contract import CopySpec
from mm2py.executor.control_writes import ProgressLayout, control_batches
from mm2py.executor.sync_records import offset_sync_records
from mm2py.mirror.offset_syncs import PartitionOffsetSyncState, runs_after
from mm2py.mirror.progress import progress_record
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import Cluster, ProducerIds
from mm2py.wire.errors import INVALID_PRODUCER_EPOCH, WireError
from mm2py.wire.partition_queue import PartitionQueue, ProducerBatch
from mm2py.wire.sender import Sender
from mm2py.wire.transactions import TransactionError, TransactionManager

log = logging.getLogger(__name__)

COMMIT_INTERVAL_S = 1.0  # how long a transaction stays open at most while a task copies (MM2: a poll's worth)


class TransactionalCopy:
    """The transactions of one batch copy task (its thread only)."""

    def __init__(
        self,
        spec: CopySpec,
        target: Cluster,
        ranges: Iterable[BatchRange],
        layout: ProgressLayout,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.target = target
        self.ranges = list(ranges)
        self.layout = layout
        self.clock = clock
        slots = {spec.slot_of(r.rng.topic, r.rng.partition) for r in self.ranges}
        assert len(slots) == 1, f"one task copies one slot's partitions, not {sorted(slots)}"
        self.slot = slots.pop()
        self.transactional_id = spec.slot_transactional_id(self.slot)
        self.txn = TransactionManager(
            target, self.transactional_id, transaction_timeout_ms=spec.transaction_timeout_ms, clock=clock
        )
        self.committed = {id(r): Counted() for r in self.ranges}
        self.sync_states: dict[int, dict[bool, PartitionOffsetSyncState]] = {}  # MM2's rule across commits
        # progress and offset-sync partitions
        self.control_queues: dict[TopicPartition, PartitionQueue] = layout.queues()
        self.committing = False
        self.opened_at: float | None = None

    def initialize(self) -> ProducerIds:
        """Write with the producer id and epoch the driver initialized for this job's slot (it fenced every
        predecessor, and checked that nobody else took the id)."""
        held = self.spec.slot_producers.get(self.slot)
        if held is None:
            raise TransactionError(
                WireError(INVALID_PRODUCER_EPOCH, f"the driver gave no producer epoch for {self.transactional_id}")
            )
        producer = ProducerIds(*held)
        self.txn.adopt(producer)
        return producer

    def queues(self) -> list[PartitionQueue]:
        """The partitions a transaction writes besides the copied ones: progress (and syncs on the target)."""
        return list(self.control_queues.values())

    # -- the copy loop's hooks -----------------------------------------------------------------------------

    def before_step(self, sender: Sender, timeout_s: float) -> None:
        """Add the partitions that have batches to send to the open transaction (which this opens)."""
        waiting = {q.key for q in sender.queues.values() if q.failure is None and (q.unsent or q.sent)}
        new = waiting - self.txn.partitions
        if new:
            self.txn.add(new, timeout_s)
            if self.opened_at is None:
                self.opened_at = self.clock()

    def due(self, copying_done: bool) -> bool:
        """Whether the open transaction should be committed now (the caller then drains the sender)."""
        if not self.txn.in_transaction:
            return False
        return copying_done or self.clock() - (self.opened_at or 0.0) >= COMMIT_INTERVAL_S

    def commit(self, sender: Sender, timeout_s: float) -> None:
        """The sender is drained: put progress (and syncs) in, drain again, commit, count what was committed."""
        batches: dict[TopicPartition, list[ProducerBatch]] = {}
        for r in self.ranges:
            done = self.committed[id(r)]
            q = r.queue
            if q.acked_upstream > done.upstream:
                record = progress_record(self.spec.source, r.rng.topic, r.rng.partition, q.acked_upstream)
                key = self.layout.progress_key(r.rng)
                batches.setdefault(key, []).extend(control_batches([(record.key, record.value, None)]))
                if self.spec.syncs_on_target and self.spec.syncs_topic is not None:
                    new_runs = runs_after(q.runs, sum(length for _u, _d, length in done.runs))
                    states = self.sync_states.setdefault(id(r), {})
                    for topic, sync_key, value, headers in offset_sync_records(self.spec, r.rng, new_runs, states):
                        batches.setdefault((topic, 0), []).extend(control_batches([(sync_key, value, headers)]))
        for key, items in batches.items():
            sender.add(key, items)
        self.txn.add(batches, timeout_s)
        sender.flush()
        while sender.busy():
            sender.step()
        stopped = [q for q in self.control_queues.values() if q.failure is not None]
        if stopped:
            raise _ControlWriteFailed(stopped[0])
        self.txn.commit(timeout_s)
        for r in self.ranges:
            q, done = r.queue, self.committed[id(r)]
            done.upstream, done.records, done.bytes = q.acked_upstream, q.acked_records, q.bytes
            done.runs = list(q.runs)
            if r.fetched_to >= r.rng.start:
                done.next_offset = r.fetched_to  # the sender was drained: everything handed over is in
        self.opened_at = None
        self.committing = False

    def abort_quietly(self, sender: Sender | None) -> None:
        """Abort the task's open transaction on the way out; if that fails too, the transaction timeout or the
        next task's InitProducerId aborts it (nothing of it is ever read as committed)."""
        timeout_s = min(self.spec.stall_timeout_s, 30.0)
        try:
            if sender is not None:
                self.abort(sender, timeout_s)
            else:
                self.txn.abort(timeout_s)
        except (TransactionError, ReplicationError) as exc:
            log.warning(
                "flow=%s: aborting the open transaction failed (%s); it ends with its timeout", self.spec.flow, exc
            )

    def abort(self, sender: Sender, timeout_s: float) -> None:
        """Abort the open transaction once no request of it is in flight any more (a late append after the
        abort marker would open a transaction nobody ends)."""
        deadline = self.clock() + timeout_s
        while sender.in_flight() and self.clock() < deadline:
            sender.step(0.05)
        if self.txn.in_transaction:
            self.txn.abort(max(1.0, deadline - self.clock()))
        self.opened_at = None


class _ControlWriteFailed(Exception):
    def __init__(self, queue: PartitionQueue) -> None:
        self.queue = queue
        super().__init__(f"writing {queue.topic}-{queue.partition} in the transaction failed: {queue.failure}")

"""One target partition's batches on their way out, and its idempotent-producer state.

Java keeps these in two places: the RecordAccumulator's deque per partition (batches not sent yet, or sent back
for a retry) and the TransactionManager's ``TxnPartitionEntry`` (the producer id and epoch the partition's
sequences belong to, the next sequence, the last acknowledged one, the batches in flight by sequence). Here
they are one object per partition, owned by the sender's thread:

- ``unsent``: batches without a sequence yet;
- ``sent``: every batch with a sequence that is not yet counted as copied, in sequence order, each in flight,
  returned (its request failed: to be sent again) or acknowledged (waiting for an earlier one).

A batch gets the producer's id, epoch and the partition's next sequence once, when it is first sent
(``RecordAccumulator.drain``), and is resent with exactly those bytes, so the broker recognises a resent batch it
already wrote and answers with its original offset instead of appending it twice. Only an epoch bump renumbers
the partition's unacknowledged batches (``TxnPartitionMap.startSequencesAtBeginning``), and only once none of
them is in flight any more. Records count as copied in sequence order only, so progress never passes a batch
the target has not acknowledged.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field

from mm2py.metrics.measurement import RangeMeasurer
from mm2py.mirror.offset_syncs import Run, extend_runs
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batch_codec import merge
from mm2py.wire.batches import RecordBatch, RecordBatchError, producer_parts
from mm2py.wire.cluster import ProducerIds
from mm2py.wire.errors import WireError

SEQUENCE_MODULO = 2**31  # sequences wrap at Integer.MAX_VALUE, as DefaultRecordBatch.incrementSequence does
OFFSET_UNKNOWN = -1  # acknowledged as a duplicate whose offset the broker no longer knows


class State(enum.Enum):
    IN_FLIGHT = "in flight"
    RETURNED = "returned"
    ACKNOWLEDGED = "acknowledged"


@dataclass(eq=False)
class ProducerBatch:
    """One batch to send (its header still the source producer's) and its records' source offsets."""

    batch: RecordBatch
    upstream: range | list[int]
    created: float = -1.0  # when it was fetched, or the sender took it: its linger and delivery timeout start
    producer: ProducerIds | None = None  # set when it gets a sequence
    base_sequence: int = -1
    # What is sent: the target producer's header, then the rest of the batch as it came; fixed when the
    # sequence is assigned, so a resent batch is the same bytes.
    wire: tuple[bytes, memoryview] | None = None
    state: State = State.IN_FLIGHT
    base_offset: int = OFFSET_UNKNOWN  # where the target put it, once acknowledged
    attempts: int = 0  # failed sends so far: the retry backoff doubles with each (KIP-580)

    @property
    def record_count(self) -> int:
        return self.batch.record_count

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) % SEQUENCE_MODULO

    def assign(self, producer: ProducerIds, base_sequence: int, transactional: bool = False) -> None:
        self.producer = producer
        self.base_sequence = base_sequence
        self.wire = producer_parts(self.batch, producer.producer_id, producer.epoch, base_sequence, transactional)


@dataclass(eq=False)
class PartitionQueue:
    """One target partition: batches to send, batches sent, what was acknowledged."""

    topic: str
    partition: int
    where: str  # "topic=... partition=..." of the source partition it copies, for messages
    unsent: collections.deque[ProducerBatch] = field(default_factory=collections.deque)
    sent: collections.deque[ProducerBatch] = field(default_factory=collections.deque)
    node: int | None = None  # the broker holding the batches in flight: one at a time
    producer: ProducerIds | None = None  # whose sequences next_sequence counts
    next_sequence: int = 0
    last_acked_sequence: int = -1  # the highest acknowledged (TxnPartitionEntry.lastAckedSequence)
    bump_epoch: bool = False  # the broker lost our sequence: renumber under a new epoch (KIP-360)
    retry_at: float = 0.0
    failing_since: float | None = None
    failure: WireError | None = None  # why this partition stopped; nothing more is sent for it
    # What the target acknowledged, in order: the last source offset and the record count (progress), the
    # records whose target offsets are known as runs (source offset, target offset, length) for offset syncs.
    acked_upstream: int = -1
    acked_records: int = 0
    runs: list[Run] = field(default_factory=list)
    bytes: int = 0
    measurer: RangeMeasurer = field(default_factory=RangeMeasurer)

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def busy(self) -> bool:
        """Something is still to send or to be answered (a stopped partition is never busy)."""
        return self.failure is None and bool(self.unsent or self.sent)

    @property
    def in_flight(self) -> int:
        return sum(1 for b in self.sent if b.state is State.IN_FLIGHT)

    def first_returned(self) -> ProducerBatch | None:
        """The lowest-sequenced batch to send again: while there is one, only it goes out, one at a time (Java:
        ``RecordAccumulator.shouldStopDrainBatchesForPartition``, "reduces our in flight request count to 1")."""
        return next((b for b in self.sent if b.state is State.RETURNED), None)

    def oldest_unacknowledged(self) -> ProducerBatch | None:
        first = next((b for b in self.sent if b.state is not State.ACKNOWLEDGED), None)
        return first or (self.unsent[0] if self.unsent else None)

    def acknowledged(self, batch: ProducerBatch, base_offset: int) -> list[ProducerBatch]:
        """The target acknowledged ``batch`` (at ``base_offset``, or OFFSET_UNKNOWN); returns the batches that
        now count as copied: those at the head of ``sent`` whose every predecessor is acknowledged too."""
        batch.state = State.ACKNOWLEDGED
        batch.base_offset = base_offset
        if self.last_acked_sequence < 0 or _after(batch.last_sequence, self.last_acked_sequence):
            self.last_acked_sequence = batch.last_sequence
        done = []
        while self.sent and self.sent[0].state is State.ACKNOWLEDGED:
            head = self.sent.popleft()
            done.append(head)
            if head.base_offset >= 0:
                extend_runs(self.runs, head.upstream, head.base_offset)
            if head.upstream:
                self.acked_upstream = head.upstream[-1]
            self.acked_records += len(head.upstream)
            self.bytes += head.batch.size
        self.failing_since = None
        if not self.in_flight:
            self.node = None
        return done

    def returned(self, batch: ProducerBatch, now: float, backoff_s: float) -> None:
        """A sent batch failed and will be sent again with the same sequence, after ``backoff_s``."""
        batch.state = State.RETURNED
        if self.failing_since is None:
            self.failing_since = now
        self.retry_at = max(self.retry_at, now + backoff_s)
        if not self.in_flight:
            self.node = None

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` follows the last acknowledged one (TransactionManager.isNextSequence)."""
        return batch.base_sequence == (self.last_acked_sequence + 1) % SEQUENCE_MODULO

    def renumber(self, producer: ProducerIds) -> None:  # idempotent producers only (a transaction is aborted)
        """Start this partition's sequences again at 0 under ``producer`` (a bumped epoch, or a new id): every
        batch sent and not acknowledged, in order, then those never sent
        (``TxnPartitionMap.startSequencesAtBeginning``). Only when nothing is in flight, so no answer for the old
        numbers can come any more."""
        assert not self.in_flight, "renumbering while batches are in flight"
        self.producer = producer
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.bump_epoch = False
        for batch in self.sent:
            if batch.state is not State.ACKNOWLEDGED:
                self.assign_next(batch, producer)

    def assign_next(self, batch: ProducerBatch, producer: ProducerIds, transactional: bool = False) -> None:
        batch.assign(producer, self.next_sequence, transactional)
        self.next_sequence = (self.next_sequence + batch.record_count) % SEQUENCE_MODULO

    def merge_unsent_head(self, below: int, up_to: int) -> None:
        """Replace the never-sent batches at the head that are smaller than ``below`` bytes and share a codec by
        one of at most ``up_to`` bytes holding their records (see :func:`mm2py.wire.batch_codec.merge` for why)."""
        codec = self.unsent[0].batch.codec
        run: list[ProducerBatch] = []
        size = 0
        for item in self.unsent:
            batch = item.batch
            if batch.size >= below or batch.codec != codec or size + batch.size > up_to:
                break
            run.append(item)
            size += batch.size
        if len(run) < 2:
            return
        try:
            merged = RecordBatch(memoryview(merge([item.batch for item in run])))
        except RecordBatchError:
            return  # one would decompress past the limit (or not at all): they go as they came, unmerged
        for _ in run:
            self.unsent.popleft()
        upstream = [offset for item in run for offset in item.upstream]
        self.unsent.appendleft(ProducerBatch(merged, upstream, created=min(item.created for item in run)))

    def stop(self, failure: WireError) -> None:
        """Nothing more is sent for this partition; what was acknowledged stays counted."""
        self.failure = failure


def _after(a: int, b: int) -> bool:
    """Whether sequence ``a`` comes after ``b``, across the wrap at SEQUENCE_MODULO."""
    return 0 < (a - b) % SEQUENCE_MODULO < SEQUENCE_MODULO // 2

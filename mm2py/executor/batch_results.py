"""The end of a batch copy task (executor side): what counts as copied, its progress and offset syncs, and one
CopyResult per range.

Why here and not in the copy loop: what counts as copied is only known once the sender has nothing in flight
any more. At-least-once, that is what the target acknowledged: a range that stopped early (its partition's leader
stayed away, a batch was not acknowledged within ``delivery.timeout.ms``, its records were deleted first) still
gets progress for it, so the driver's retry copies only the rest and a broker failure copies nothing twice.
Exactly-once, it is what committed transactions hold (:mod:`mm2py.executor.transactional_copy`), whose progress
was written inside them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mm2py.errors import Failure, ReplicationError
from mm2py.executor.batch_producer import Steps, waited
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.sync_records import delayed_sync_record, offset_sync_records
from mm2py.mirror.offset_syncs import PartitionOffsetSyncState, Run, newest_sync, runs_after
from mm2py.mirror.progress import progress_record
from mm2py.mirror.record_formats import OffsetSync
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.errors import WireError
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue
from mm2py.wire.transactions import FENCED

if TYPE_CHECKING:
    from mm2py.executor.control_writes import ControlRecord, ControlWrites


log = logging.getLogger(__name__)


@dataclass
class Counted:
    """What of a range counts as copied: acknowledged (at-least-once) or committed (exactly-once)."""

    upstream: int = -1  # the last source offset copied
    records: int = 0
    bytes: int = 0
    runs: list[Run] = field(default_factory=list)
    next_offset: int = -1  # where the range goes on; -1: after ``upstream`` (or its start)


@dataclass(eq=False)
class BatchRange:
    """One range of a batch copy task: its fetch side, its send side, and where fetching handed over to."""

    rng: PartitionRange
    fetch: FetchPartition
    queue: PartitionQueue
    fetched_to: int = -1  # the fetch position after the last batches handed to the sender
    source_end: int = -1  # the source partition's end at the last fetch

    @property
    def unfinished(self) -> bool:
        """Something fetched was not acknowledged: only what was counts."""
        return self.queue.failure is not None or bool(self.queue.unsent or self.queue.sent)

    def acknowledged(self) -> Counted:
        """At-least-once: the acknowledged records count; when everything fetched was acknowledged, the range
        goes on after what was fetched (control batches and aborted transactions included)."""
        q = self.queue
        whole = not self.unfinished and self.fetched_to >= self.rng.start
        return Counted(q.acked_upstream, q.acked_records, q.bytes, list(q.runs), self.fetched_to if whole else -1)

    def own_failure(self, exactly_once: bool) -> WireError | None:
        """Why this partition stopped, if that was its own doing. Exactly-once, a fenced producer (another
        producer took the transactional.id over) stops every partition of the task, and the task fails at once
        with a failure that names the id: that is the task's failure, not the partition's."""
        error = self.queue.failure or self.fetch.failure
        return None if exactly_once and error is not None and error.kind in FENCED else error

    def failure(self, spec: CopySpec, task_failure: Failure | None, counted: Counted) -> Failure | None:
        """Why the range stopped before its end, if it did."""
        where = f"flow={spec.flow} {self.queue.where}"
        for error, side in (
            (self.queue.failure, f"producing to {self.rng.remote_topic} on {spec.target}"),
            (self.fetch.failure, f"fetching from {spec.source}"),
        ):
            # Exactly-once, a fenced producer stopped both sides of every partition: the task's failure says so.
            fenced = spec.exactly_once and task_failure is not None and error is not None and error.kind in FENCED
            if error is not None and not fenced:
                return Failure(f"{where}: {side} failed: {error}", error.name, error.retriable)
        copied_all = self.fetch.done and counted.next_offset >= self.rng.end
        if (
            task_failure is not None
            and not copied_all
            and (self.unfinished or not self.fetch.done or spec.exactly_once)
        ):
            return task_failure
        return None


# A recording made while the task copies on builds this many partitions' records per turn of the copy loop, whose
# sender steps in between: building the syncs and progress of 400 partitions at once held the loop 20-80 ms.
RANGES_PER_TURN = 100


def _pause(wait_s: float) -> None:
    """A turn of a recording that waits for nothing: the copy loop goes on before the recording's next slice."""


class ProgressRecorder:
    """Records what counts as copied since it last did, at the end of a task and, while it copies on, every
    so often: the progress records (at-least-once; exactly-once wrote them inside its transactions) and the
    offset syncs of the new records (unless they went into the transactions), MM2's emission rule carried from one
    recording to the next. MM2's delayed syncs (each partition's newest record that no due sync covered) go to
    MM2's syncs topic at MM2's cadence, every ``offset.flush.interval.ms`` and at the task's end, however often
    progress is recorded; mm2py's dense topic has every run's last record at each recording anyway.

    A recording made while the task copies on is served a turn at a time by the copy loop (:meth:`start`,
    :meth:`step`), never waited for: the loop's sender goes on resending its batches meanwhile (a target that
    stalls would otherwise see them expire behind a recording that waits), and the copy's pace does not dip at
    each recording. One recording is in flight at a time; the one at the end of the task waits."""

    def __init__(self, spec: CopySpec, ranges: Iterable[BatchRange], *, progress: bool) -> None:
        self.spec = spec
        self.ranges = list(ranges)
        self.progress = progress
        self.upstream = {id(r): -1 for r in self.ranges}
        self.synced = {id(r): 0 for r in self.ranges}  # records whose syncs were written
        self.syncs = {id(r): 0 for r in self.ranges}
        self.states: dict[int, dict[bool, PartitionOffsetSyncState]] = {id(r): {} for r in self.ranges}
        self.pending: Steps[None] | None = None  # the recording in flight while the task copies on
        self.delayed: dict[int, OffsetSync] = {}  # MM2's delayed sync of each range, sent at the next commit
        self.next_commit = time.monotonic() + spec.offset_flush_interval_s

    def record(self, counted: Mapping[int, Counted], writes: ControlWrites | None) -> None:
        """Write, and wait for the acknowledgement of, what is new in ``counted`` (by ``id`` of the range), once
        the recording in flight, if any, has ended; ``writes`` is None only when the task never reached the
        target (then nothing can be new)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            try:
                waited(pending)
            except ReplicationError as exc:
                self._given_up(exc)
        waited(self._recording(counted, writes, commit=True))

    def start(self, counted: Mapping[int, Counted], writes: ControlWrites | None) -> None:
        """Begin recording ``counted`` while the task copies on, unless a recording is still in flight (what is
        new by its end goes into the next)."""
        if self.pending is None:
            now = time.monotonic()
            # Counted from when the last commit began; one that fails leaves its delayed syncs to the next (Connect
            # calls the task's commit() only after offsets were flushed).
            commit = now >= self.next_commit
            if commit:
                self.next_commit = now + self.spec.offset_flush_interval_s
            self.pending = self._recording(counted, writes, commit=commit)
            self.step()

    def step(self) -> None:
        """One turn of the recording in flight, without waiting."""
        if self.pending is None:
            return
        try:
            step = next(self.pending)
        except StopIteration:
            self.pending = None
            return
        except ReplicationError as exc:
            self.pending = None
            self._given_up(exc)
            return
        step(0.0)

    def _given_up(self, exc: ReplicationError) -> None:
        """A recording that failed for a reason that may pass (the target stalled past ``delivery.timeout.ms``)
        is logged and made again at the next interval, with what is new by then, while copying goes on, as
        Connect's source task does when its offsets fail to flush (``WorkerSourceTask``: "Failed to flush offsets
        to storage"). Only the recording at the end of the task must succeed, or the task fails. A refusal (an
        ACL) stops the task at once."""
        if not exc.retriable:
            raise exc
        log.warning("flow=%s: recording progress failed, recorded again at the next interval: %s", self.spec.flow, exc)

    def _recording(self, counted: Mapping[int, Counted], writes: ControlWrites | None, commit: bool) -> Steps[None]:
        spec = self.spec
        # The syncs of the new records are acknowledged before their progress is written, as MM2 emits a sync
        # when a record is acknowledged and commits source offsets later. A task that dies in between leaves
        # syncs beyond the progress, which `failover` counts exactly (records the target holds past the
        # progress); progress beyond the syncs would make its recovery point short by the unsynced records.
        syncs: dict[TopicPartition, list[ControlRecord]] = {}
        queued: dict[int, int] = {}
        synced = dict(self.synced)
        # MM2's emission rule moves on with each sync it makes due: on copies (of the ranges with new records),
        # kept once the syncs are acknowledged, so a recording made again after a failed one makes the same syncs
        # due again.
        states = dict(self.states)
        delayed = dict(self.delayed)
        outside_transactions = self.progress or not spec.syncs_on_target
        for n, r in enumerate(self.ranges, 1):
            if n % RANGES_PER_TURN == 0:
                yield _pause
            runs = counted[id(r)].runs
            total = sum(length for _u, _d, length in runs)
            if spec.syncs_topic is not None and outside_transactions and total > synced[id(r)]:
                new = runs_after(runs, synced[id(r)])
                states[id(r)] = {dense: dataclasses.replace(state) for dense, state in states[id(r)].items()}
                records = offset_sync_records(spec, r.rng, new, states[id(r)], delayed=False)
                newest = newest_sync(r.rng.topic, r.rng.partition, new)
                if states[id(r)][False].last_sync_downstream == newest.downstream_offset:
                    delayed.pop(id(r), None)  # due now, so not delayed (MM2 drops its delayed sync then)
                else:
                    delayed[id(r)] = newest
                for topic, key, value, headers in records:
                    syncs.setdefault((topic, 0), []).append((key, value, headers))
                queued[id(r)] = len(records)
                synced[id(r)] = total
        if commit:  # after each partition's due syncs: a delayed sync is of its newest record
            for range_id, sync in delayed.items():
                topic, key, value, headers = delayed_sync_record(spec, sync)
                syncs.setdefault((topic, 0), []).append((key, value, headers))
                queued[range_id] = queued.get(range_id, 0) + 1
            delayed = {}
        progress: dict[PartitionRange, ControlRecord] = {}
        progressed = {}
        for n, r in enumerate(self.ranges, 1):
            if n % RANGES_PER_TURN == 0:
                yield _pause
            done = counted[id(r)]
            if self.progress and done.records and done.upstream > self.upstream[id(r)]:
                record = progress_record(spec.source, r.rng.topic, r.rng.partition, done.upstream)
                progress[r.rng] = (record.key, record.value, None)
                progressed[id(r)] = done.upstream
        if not (syncs or progress):
            return
        if writes is None:
            raise ReplicationError(f"flow={spec.flow}: progress to record, but {spec.target} was never reached")
        if syncs:
            yield from writes.syncs(syncs, f"flow={spec.flow} ({len(queued)} partitions)")
        self.synced, self.states, self.delayed = synced, states, delayed
        for range_id, count in queued.items():
            self.syncs[range_id] += count
        if progress:
            yield from writes.progress(progress, f"flow={spec.flow} ({len(progress)} partitions)")
        self.upstream.update(progressed)


def finish(
    spec: CopySpec,
    recorder: ProgressRecorder,
    writes: ControlWrites | None,
    task_failure: Failure | None,
    seconds: float,
    committed: Mapping[int, Counted] | None = None,
) -> list[CopyResult]:
    """Record progress (at-least-once) and offset syncs of what counts as copied, then the ranges' results;
    ``committed`` (exactly-once: by ``id`` of the range) is what committed transactions hold."""
    ranges = recorder.ranges
    counted = {id(r): committed[id(r)] if committed is not None else r.acknowledged() for r in ranges}
    recorder.record(counted, writes)
    return [_result(spec, r, counted[id(r)], recorder.syncs[id(r)], task_failure, seconds) for r in ranges]


def _result(
    spec: CopySpec, r: BatchRange, counted: Counted, syncs: int, task_failure: Failure | None, seconds: float
) -> CopyResult:
    rng = r.rng
    next_offset = counted.next_offset
    if next_offset < rng.start:
        next_offset = counted.upstream + 1 if counted.records else rng.start
    measurement = r.queue.measurer.measurement(spec.source, spec.target, rng.topic, rng.remote_topic, rng.partition)
    return CopyResult(
        rng.topic,
        rng.partition,
        rng.start,
        next_offset,
        counted.upstream,
        counted.records,
        counted.bytes,
        syncs,
        seconds,
        error=r.failure(spec, task_failure, counted),
        measurement=measurement,
        source_end=r.source_end,
    )

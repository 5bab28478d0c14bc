"""The batch copy task (runs on executors): forward whole record batches from source to target.

Same contract as :func:`mm2py.executor.record_copy.copy_partitions` — a CopySpec and PartitionRanges in, one
CopyResult per range out — but instead of consuming and producing record by record it moves Kafka record
batches as bytes (keys, values, headers, timestamps and compression pass through untouched; the target
assigns offsets), serving all of a task's ranges at once:

* a fetcher thread sends one Fetch per source leader carrying every partition still to copy, splits the
  record sets into batches, drops control batches (and, read_committed, aborted ones), and rebuilds the
  batches a broker would refuse or that straddle a range's start (:mod:`mm2py.wire.batch_codec`);
* the task's thread keeps up to five Produce requests in flight per target leader, each carrying the next
  batch of every partition (a real broker takes one v2 batch per partition per request), while the fetcher
  already fetches the next data (:mod:`mm2py.wire.sender`);
* the target producer is idempotent: a producer id from InitProducerId, per-partition sequence numbers
  written into each forwarded batch (with a new CRC), so a Produce retried after a lost answer is not
  written twice, and failed batches are resent in sequence order;
* every copied record's upstream->downstream offset is known (record i of a contiguous batch lands at the
  acknowledged base offset + i): progress and offset syncs as the record path writes them, once acknowledged.

A range may end inside a batch: that batch is rebuilt with the records before the range's end only, so a
range copies exactly its offsets, as the record copier does. Exactly-once flows (transactions) and provenance
headers (a header added to every record) need per-record work and use the record copier.

In continuous mode a task *follows* its partitions (``CopySpec.follow_s``): it keeps fetching what arrives for
that long, so a record written meanwhile is copied within a fetch wait and a produce instead of waiting for the
next Spark job; a partition at its end is caught up, not stalled. The ranges' ends are then caps: once one is
reached (a backlog) the task ends early, so the driver's next job goes on without waiting out the others.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka import KafkaError

from mm2py.errors import ReplicationError
from mm2py.executor import record_copy
from mm2py.executor.allocator import tune_for_large_buffers
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange, failed_result
from mm2py.executor.delivery import flush_offset_syncs, flush_producer, queue_offset_syncs
from mm2py.executor.task_logging import executor_logging
from mm2py.librdkafka.clients import cached_producer
from mm2py.mirror.progress import progress_record
from mm2py.wire.batch_codec import RecordTooLarge, needs_rebuild, rebuild, split_to_limit
from mm2py.wire.batches import RecordBatch, RecordBatchError, split_batches
from mm2py.wire.connection import ErrorCode, FetchPosition, WireClient
from mm2py.wire.read_committed import data_batches
from mm2py.wire.sender import Lane, Outgoing, PipelinedProducer, SenderSettings, batch_timestamps

log = logging.getLogger(__name__)

_FETCH_PARTITION_BYTES = 4 * 1024 * 1024
_FETCH_MAX_BYTES = 64 * 1024 * 1024
_MESSAGE_MAX_BYTES = "1000000"  # librdkafka's default message.max.bytes, which the record path's producer has
# Batches below this size waiting in one partition's queue are merged into one of at most _MERGE_UP_TO bytes
# (or half of message.max.bytes): tiny batches would otherwise go one per partition per Produce request.
_MERGE_BELOW = 16 * 1024
_MERGE_UP_TO = 512 * 1024
_QUEUED_FETCHES = 2  # fetch responses waiting for the producer (each up to _FETCH_MAX_BYTES): bounds memory
_Fetched = list[tuple["_Range", list[Outgoing], int]]  # one response's batches: range, batches, next position
_PERMANENT_FETCH = {1}  # OFFSET_OUT_OF_RANGE: the records were deleted before they were copied


def copy_partitions(
    spec: CopySpec, ranges: Iterator[PartitionRange], last_attempt: bool = False
) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy all ``ranges`` together, batch by batch.

    Failures travel as data, as in copy.py: a transient one raises while Spark will run the task again (progress
    stays where it was), and is returned as a CopyResult with ``error`` for every range on the last attempt; a
    permanent one is returned at once.
    """
    todo = [rng for rng in ranges if rng.start < rng.end]
    if spec.exactly_once or spec.provenance:
        yield from record_copy.copy_partitions(spec, iter(todo), last_attempt=last_attempt)
        return
    executor_logging(spec)
    if not todo:
        return
    tune_for_large_buffers()
    try:
        yield from _BatchCopier(spec, todo).run()
    except ReplicationError as exc:
        if exc.retriable and not last_attempt:
            raise
        for rng in todo:
            yield failed_result(rng, exc.failure)


@dataclass
class _Range:
    """What the task knows about one range; the fetcher owns ``position``, the producer the lane."""

    rng: PartitionRange
    position: int
    lane: Lane
    fetch_bytes: int = _FETCH_PARTITION_BYTES
    fetch_done: bool = False
    last_progress: float = field(default_factory=time.monotonic)
    next_offset: int = -1
    source_end: int = -1  # the end the last fetch reported (the last stable offset under read_committed)

    @property
    def where(self) -> str:
        return f"topic={self.rng.topic} partition={self.rng.partition}"


class _BatchCopier:
    def __init__(self, spec: CopySpec, ranges: list[PartitionRange]) -> None:
        self.spec = spec
        self.ranges = {
            (r.topic, r.partition): _Range(
                r, r.start, Lane(r.remote_topic, r.partition, f"topic={r.topic} partition={r.partition}")
            )
            for r in ranges
        }
        # The fetch order (the fetcher's own): a partition that returned data moves to the end, as the Java
        # consumer does (KIP-74). A broker fills a Fetch response in request order up to its size limit, so a
        # fixed order would give the first partitions with a backlog every response and starve the rest.
        self.fetch_order: dict[tuple[str, int], None] = dict.fromkeys(self.ranges)
        self.read_committed = spec.consumer_settings.get("isolation.level") == "read_committed"
        self.max_batch_bytes = int(spec.producer_settings.get("message.max.bytes", _MESSAGE_MAX_BYTES))
        self.started = time.monotonic()
        self.following = spec.follow_s > 0
        self.deadline = self.started + spec.follow_s
        self.inbox: queue.Queue[_Fetched | BaseException | None] = queue.Queue(_QUEUED_FETCHES)
        self.stop = threading.Event()

    # -- the task's thread: produce ------------------------------------------------------------------------
    def run(self) -> list[CopyResult]:
        target = WireClient(self.spec.target, self.spec.producer_settings)
        fetcher = threading.Thread(target=self._fetch_loop, name="mm2py-batch-fetch", daemon=True)
        producer: PipelinedProducer | None = None
        # The producers of progress and offset syncs are needed only at the end, but a new idempotent producer
        # first waits for its producer id (about 0.5 s on a real broker, two of them in a row): created now,
        # that wait overlaps the copy instead of delaying the task's end, and in continuous mode the next job.
        cached_producer(self.spec.producer_settings)
        if self.spec.syncs_producer_settings is not None:
            cached_producer(self.spec.syncs_producer_settings)
        try:
            target.bootstrap(self.spec.stall_timeout_s)
            self._route(target, {r.rng.remote_topic for r in self.ranges.values()})
            ids = target.init_producer_id(self.spec.stall_timeout_s)
            if isinstance(ids, ErrorCode):
                raise ReplicationError(f"flow={self.spec.flow}: InitProducerId on {self.spec.target} failed: {ids}")
            producer = PipelinedProducer(
                SenderSettings(self.spec.flow, self.spec.target, self.spec.flush_timeout_s, self.spec.stall_timeout_s),
                target,
                [r.lane for r in self.ranges.values()],
                *ids,
                merge_below=_MERGE_BELOW,
                merge_up_to=min(_MERGE_UP_TO, self.max_batch_bytes // 2),
            )
            fetcher.start()
            fetching = True
            while fetching or producer.busy():
                fetching = self._take_fetched(block=not producer.busy(), fetching=fetching)
                if producer.busy():
                    producer.step()
        finally:
            self.stop.set()
            if fetcher.is_alive():
                fetcher.join(timeout=self.spec.stall_timeout_s)
            target.close()
        return self._finish()

    def _take_fetched(self, *, block: bool, fetching: bool) -> bool:
        """Move what the fetcher queued into the lanes' pending batches; False once the fetcher is done."""
        while fetching:
            try:
                # A following fetcher may find nothing new until its deadline: only silence after it is a stall.
                wait_s = self.spec.stall_timeout_s + max(0.0, self.deadline - time.monotonic())
                item = self.inbox.get(block=block, timeout=wait_s if block else None)
            except queue.Empty:
                if block:
                    raise ReplicationError(
                        f"flow={self.spec.flow}: no data from {self.spec.source} for {self.spec.stall_timeout_s:.0f} s"
                    ) from None
                return fetching
            if item is None:
                return False
            if isinstance(item, BaseException):
                raise item
            for state, outgoing, next_offset in item:
                state.lane.pending.extend(outgoing)
                state.next_offset = next_offset
            block = False
        return fetching

    def _route(self, client: WireClient, topics: set[str], refresh_only: bool = False) -> None:
        errors = client.refresh_leaders(topics, self.spec.stall_timeout_s)
        if errors and not refresh_only:
            (topic, partition), error = next(iter(errors.items()))
            raise ReplicationError(
                f"flow={self.spec.flow}: no leader for {topic}-{partition} on {client.alias}: {error}",
                code=error.name,
                retriable=error.retriable,
            )

    # -- after every batch is acknowledged: progress and offset syncs -----------------------------------------
    def _finish(self) -> list[CopyResult]:
        spec = self.spec
        producer = cached_producer(spec.producer_settings)
        failures: list[KafkaError] = []
        for state in self.ranges.values():
            if state.lane.runs:
                record = progress_record(spec.source, state.rng.topic, state.rng.partition, state.lane.last_upstream)
                producer.produce(
                    spec.progress_topic,
                    record.value,
                    record.key,
                    on_delivery=lambda err, _m: failures.append(err) if err else None,
                )
        # Every range's offset syncs are queued too before anything is waited for: progress (target cluster) and
        # syncs (source cluster) are then acknowledged in one round trip, not two. Either may be lost if the task
        # dies now, as when they are written one after the other; the copied records are acknowledged already.
        syncs_of: dict[tuple[str, int], int] = {}
        sync_failures: list[KafkaError] = []
        for key, state in self.ranges.items():
            if spec.syncs_topic is not None and state.lane.runs:
                syncs_of[key] = queue_offset_syncs(spec, state.rng, state.lane.runs, sync_failures)
        flush_producer(spec, producer, spec.producer_settings, failures, f"flow={spec.flow} (progress)")
        if syncs_of:
            flush_offset_syncs(spec, sync_failures, f"flow={spec.flow} ({len(syncs_of)} partitions)")
        results = []
        seconds = time.monotonic() - self.started
        for key, state in self.ranges.items():
            rng, lane, syncs = state.rng, state.lane, syncs_of.get(key, 0)
            measurement = lane.measurer.measurement(
                spec.source, spec.target, rng.topic, rng.remote_topic, rng.partition
            )
            results.append(
                CopyResult(
                    rng.topic,
                    rng.partition,
                    rng.start,
                    max(state.next_offset, rng.start),
                    lane.last_upstream,
                    lane.records,
                    lane.bytes,
                    syncs,
                    seconds,
                    measurement=measurement,
                    source_end=state.source_end,
                )
            )
        return results

    # -- the fetcher thread ----------------------------------------------------------------------------------
    def _fetch_loop(self) -> None:
        source: WireClient | None = None
        try:
            source = WireClient(self.spec.source, self.spec.consumer_settings)
            source.bootstrap(self.spec.stall_timeout_s)
            self._route(source, {key[0] for key in self.ranges})
            while not self.stop.is_set():
                active = self._active()
                if not active or (self.following and self._follow_over(active)):
                    break
                self._fetch_once(source, active)
            self._put(None)
        except BaseException as exc:  # handed to the task's thread, which raises it
            self._put(
                exc
                if isinstance(exc, ReplicationError)
                else ReplicationError(
                    f"flow={self.spec.flow}: fetching from {self.spec.source} failed: {type(exc).__name__}: {exc}"
                )
            )
        finally:
            if source is not None:
                source.close()

    def _active(self) -> list[_Range]:
        """The ranges still to fetch, in fetch order."""
        return [self.ranges[key] for key in self.fetch_order if not self.ranges[key].fetch_done]

    def _follow_over(self, active: list[_Range]) -> bool:
        """Following ends at the deadline, or once a range reached its cap: that partition has a backlog the
        next job copies, which must not wait for the deadline."""
        return time.monotonic() >= self.deadline or len(active) < len(self.ranges)

    def _fetch_once(self, source: WireClient, active: list[_Range]) -> None:
        by_node: dict[int, list[_Range]] = {}
        for state in active:
            node = source.leader((state.rng.topic, state.rng.partition))
            if node is None:
                self._route(source, {state.rng.topic}, refresh_only=True)
                continue
            by_node.setdefault(node, []).append(state)
        in_flight = []
        for node, states in by_node.items():
            positions = [FetchPosition(s.rng.topic, s.rng.partition, s.position, s.fetch_bytes) for s in states]
            in_flight.append(
                source.send_fetch(node, positions, read_committed=self.read_committed, max_bytes=_FETCH_MAX_BYTES)
            )
        now = time.monotonic()
        for pending in in_flight:
            answer = source.fetch_result(pending, self.spec.stall_timeout_s)
            if isinstance(answer, ErrorCode):
                if not answer.retriable:
                    raise ReplicationError(
                        f"flow={self.spec.flow}: fetching from {self.spec.source} failed: {answer}", retriable=False
                    )
                self._route(source, {s.rng.topic for s in active}, refresh_only=True)
                continue
            # One hand-over per response, not per partition: the producer takes every partition's batches at once.
            fetched: _Fetched = []
            for part in answer:
                state = self.ranges[(part.topic, part.partition)]
                if part.error is not None:
                    self._fetch_error(source, state, part.error)
                    continue
                stable = part.last_stable_offset if self.read_committed else -1
                state.source_end = stable if stable >= 0 else part.high_watermark
                if self.following and 0 <= state.source_end <= state.position:
                    state.last_progress = now  # caught up: there is nothing to wait for
                accepted = self._accept(state, part.records, part.aborted_transactions)
                if accepted is not None:
                    fetched.append((state, accepted, state.position))
                if part.records:
                    del self.fetch_order[(part.topic, part.partition)]
                    self.fetch_order[(part.topic, part.partition)] = None
            if fetched:
                self._put(fetched)
        for state in active:
            if not state.fetch_done and now - state.last_progress > self.spec.stall_timeout_s:
                raise ReplicationError(
                    f"flow={self.spec.flow} {state.where}: no records from the source for "
                    f"{self.spec.stall_timeout_s:.0f} s at offset {state.position} "
                    f"(range ends at {state.rng.end})"
                )

    def _fetch_error(self, source: WireClient, state: _Range, error: ErrorCode) -> None:
        where = f"flow={self.spec.flow} {state.where}"
        if error.code in _PERMANENT_FETCH or not error.retriable:
            raise ReplicationError(
                f"{where}: fetching offset {state.position} from {self.spec.source} failed: {error}", retriable=False
            )
        self._route(source, {state.rng.topic}, refresh_only=True)

    def _accept(self, state: _Range, records: bytes, aborted: list[tuple[int, int]] | None) -> list[Outgoing] | None:
        """Split one partition's fetched data into batches to send, up to the batch holding the range's end, and
        move its position past them; None when the data holds nothing at or after the position."""
        try:
            split = split_batches(records)
        except RecordBatchError as exc:
            raise ReplicationError(f"flow={self.spec.flow} {state.where}: {exc}", retriable=False) from None
        batches = [b for b in split.batches if b.base_offset < state.rng.end and b.next_offset > state.position]
        if not batches:
            if split.truncated_at is not None and split.truncated_size > state.fetch_bytes:
                state.fetch_bytes = split.truncated_size  # one batch is larger than we asked for
            return None
        outgoing: list[Outgoing] = []
        for batch in data_batches(batches, aborted if self.read_committed else None):
            if batch.size > self.max_batch_bytes:
                outgoing += self._split(state, batch)
            elif needs_rebuild(batch, state.position, state.rng.end):
                rebuilt, upstream = rebuild(batch, state.position, state.rng.end)
                if rebuilt is not None:
                    outgoing.append(Outgoing(RecordBatch(memoryview(rebuilt)), upstream))
            else:
                outgoing.append(Outgoing(batch, batch.upstream_offsets()))
        state.position = min(batches[-1].next_offset, state.rng.end)
        state.last_progress = time.monotonic()
        state.fetch_done = state.position >= state.rng.end
        now = time.time() * 1000
        for item in outgoing:  # MM2 measures record age when the task reads the records
            count, low, high, total, last = batch_timestamps(item.batch)
            state.lane.measurer.read(now, count, low, high, total, last, item.batch.size)
        return outgoing

    def _split(self, state: _Range, batch: RecordBatch) -> list[Outgoing]:
        """A batch above the target producer's message.max.bytes, re-batched to fit (as the record path's
        producer would); a single record above it stops the copy before that record, never skipping it."""
        try:
            parts = split_to_limit(batch, state.position, state.rng.end, self.max_batch_bytes)
        except RecordTooLarge as exc:
            record = exc.record
            raise ReplicationError(
                f"flow={self.spec.flow} {state.where}: the record at offset {record.offset} is too large for the "
                f"target producer: {len(record.value or b'')}-byte value, {len(record.key or b'')}-byte key, "
                f"{exc.size} bytes as a batch, message.max.bytes = {exc.limit}; raise "
                f"{self.spec.target}.producer.message.max.bytes (and the topic's max.message.bytes)",
                retriable=False,
            ) from None
        return [Outgoing(RecordBatch(memoryview(raw)), upstream) for raw, upstream in parts]

    def _put(self, item: _Fetched | BaseException | None) -> None:
        while not self.stop.is_set():
            try:
                self.inbox.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

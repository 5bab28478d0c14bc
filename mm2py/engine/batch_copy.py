"""The batch copy task (runs on executors): forward whole record batches from source to target.

Same contract as :func:`mm2py.engine.copy.copy_partitions` — a CopySpec and PartitionRanges in, one
CopyResult per range out — but instead of consuming and producing record by record it moves Kafka record
batches as bytes (keys, values, headers, timestamps and compression pass through untouched; the target
assigns offsets), serving all of a task's ranges at once:

* a fetcher thread sends one Fetch per source leader carrying every partition still to copy, splits the
  record sets into batches, drops control batches (and, read_committed, aborted ones), and rebuilds the
  batches a broker would refuse or that straddle a range's start (:mod:`mm2py.kafka.batch_records`);
* the task's thread sends one Produce per target leader carrying the next batch of every partition (a
  real broker takes one v2 batch per partition per request), while the fetcher already fetches the next
  data;
* the target producer is idempotent: a producer id from InitProducerId, per-partition sequence numbers
  written into each forwarded batch (with a new CRC), so a Produce retried after a lost answer is not
  written twice;
* every copied record's upstream->downstream offset is known (record i of a contiguous batch lands at
  the acknowledged base offset + i), so progress and offset syncs are written exactly as copy.py writes
  them, and only after the target acknowledged every batch of the range.

A range may end inside a batch: that batch is copied whole, so a range can overshoot its end up to the
end of a batch; CopyResult.next_offset says where it stopped. Exactly-once flows (transactions) and
provenance headers (a header added to every record) need per-record work and use the record copier.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka import KafkaError

from mm2py.engine import copy as record_copy
from mm2py.engine.copy import CopyResult, CopySpec, PartitionRange
from mm2py.errors import ReplicationError
from mm2py.kafka.batch_records import needs_rebuild, rebuild
from mm2py.kafka.clients import cached_producer
from mm2py.kafka.record_batch import RecordBatch, RecordBatchError, data_batches, split_batches, with_producer
from mm2py.kafka.wire import ErrorCode, FetchPosition, WireClient
from mm2py.progress import progress_record

log = logging.getLogger(__name__)

_FETCH_PARTITION_BYTES = 4 * 1024 * 1024
_FETCH_MAX_BYTES = 64 * 1024 * 1024
_QUEUED_FETCHES = 4  # fetched responses waiting for the producer: bounds memory
_SEQUENCE_MODULO = 2**31
# Errors a new producer id fixes (the broker forgot or fenced ours): the task fails and Spark retries it.
_PRODUCER_STATE_ERRORS = {45, 46, 47, 59}  # OUT_OF_ORDER_SEQUENCE, DUPLICATE_SEQUENCE, INVALID_EPOCH, UNKNOWN_PID
_PERMANENT_FETCH = {1}  # OFFSET_OUT_OF_RANGE: the records were deleted before they were copied


def copy_partitions(spec: CopySpec, ranges: Iterator[PartitionRange]) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy all ``ranges`` together, batch by batch.

    Transient failures raise (Spark retries the task; progress stays where it was); permanent ones are
    returned as a CopyResult with ``error`` for every range, as copy.py does.
    """
    todo = [rng for rng in ranges if rng.start < rng.end]
    if spec.exactly_once or spec.provenance:
        yield from record_copy.copy_partitions(spec, iter(todo))
        return
    record_copy._executor_logging(spec)
    if not todo:
        return
    try:
        yield from _BatchCopier(spec, todo).run()
    except ReplicationError as exc:
        if exc.retriable:
            raise
        for rng in todo:
            yield record_copy._failed(rng, exc.failure)


@dataclass
class _Outgoing:
    """One batch ready to send (its header still the source producer's) and its records' source offsets."""

    batch: RecordBatch
    upstream: range | list[int]


@dataclass
class _Range:
    """What the task knows about one range; the fetcher owns ``position``, the producer the rest."""

    rng: PartitionRange
    position: int
    fetch_bytes: int = _FETCH_PARTITION_BYTES
    fetch_done: bool = False
    last_progress: float = field(default_factory=time.monotonic)
    pending: collections.deque[_Outgoing] = field(default_factory=collections.deque)
    upstream: list[int] = field(default_factory=list)
    downstream: list[int] = field(default_factory=list)
    bytes: int = 0
    next_offset: int = -1

    @property
    def where(self) -> str:
        return f"topic={self.rng.topic} partition={self.rng.partition}"


class _BatchCopier:
    def __init__(self, spec: CopySpec, ranges: list[PartitionRange]) -> None:
        self.spec = spec
        self.ranges = {(r.topic, r.partition): _Range(r, r.start) for r in ranges}
        self.by_remote = {(r.remote_topic, r.partition): self.ranges[(r.topic, r.partition)] for r in ranges}
        self.read_committed = spec.consumer_settings.get("isolation.level") == "read_committed"
        self.started = time.monotonic()
        self.inbox: queue.Queue[tuple[_Range, list[_Outgoing], int] | BaseException | None] = queue.Queue(
            _QUEUED_FETCHES)
        self.stop = threading.Event()
        self.sequence: dict[tuple[str, int], int] = {}

    # -- the task's thread: produce ------------------------------------------------------------------------
    def run(self) -> list[CopyResult]:
        target = WireClient(self.spec.target, self.spec.producer_settings)
        fetcher = threading.Thread(target=self._fetch_loop, name="mm2py-batch-fetch", daemon=True)
        try:
            target.bootstrap(self.spec.stall_timeout_s)
            self._route(target, {r.rng.remote_topic for r in self.ranges.values()})
            ids = target.init_producer_id(self.spec.stall_timeout_s)
            if isinstance(ids, ErrorCode):
                raise ReplicationError(f"flow={self.spec.flow}: InitProducerId on {self.spec.target} failed: {ids}")
            producer_id, epoch = ids
            fetcher.start()
            fetching = True
            while fetching or any(r.pending for r in self.ranges.values()):
                fetching = self._take_fetched(block=not any(r.pending for r in self.ranges.values()),
                                              fetching=fetching)
                if any(r.pending for r in self.ranges.values()):
                    self._produce_round(target, producer_id, epoch)
        finally:
            self.stop.set()
            fetcher.join(timeout=self.spec.stall_timeout_s)
            target.close()
        return self._finish()

    def _take_fetched(self, *, block: bool, fetching: bool) -> bool:
        """Move what the fetcher queued into the ranges' pending batches; False once the fetcher is done."""
        while fetching:
            try:
                item = self.inbox.get(block=block, timeout=self.spec.stall_timeout_s if block else None)
            except queue.Empty:
                if block:
                    raise ReplicationError(f"flow={self.spec.flow}: no data from {self.spec.source} for "
                                           f"{self.spec.stall_timeout_s:.0f} s") from None
                return fetching
            if item is None:
                return False
            if isinstance(item, BaseException):
                raise item
            state, outgoing, next_offset = item
            state.pending.extend(outgoing)
            state.next_offset = next_offset
            block = False
        return fetching

    def _produce_round(self, target: WireClient, producer_id: int, epoch: int) -> None:
        """Send the next batch of every partition that has one (one Produce per target leader), wait for
        the acknowledgements, and record each record's target offset. Retriable failures resend the same
        bytes (same sequence numbers, so the broker drops what it already has) until the stall timeout."""
        record_sets: dict[tuple[str, int], bytearray] = {}
        sent: dict[tuple[str, int], _Outgoing] = {}
        for key, state in self.by_remote.items():
            if state.pending:
                item = state.pending[0]
                sequence = self.sequence.get(key, 0)
                record_sets[key] = with_producer(item.batch, producer_id, epoch, sequence)
                sent[key] = item
        deadline = time.monotonic() + self.spec.stall_timeout_s
        while record_sets:
            failures = self._send_round(target, record_sets)
            for key in [k for k in record_sets if k not in failures]:
                state, item = self.by_remote[key], sent[key]
                state.pending.popleft()
                self.sequence[key] = (self.sequence.get(key, 0) + item.batch.record_count) % _SEQUENCE_MODULO
                del record_sets[key]
            pending_failures = {k: e for k, e in failures.items() if isinstance(e, ErrorCode)}
            if not pending_failures:
                return
            key, error = next(iter(pending_failures.items()))
            where = f"flow={self.spec.flow} {self.by_remote[key].where}"
            if not error.retriable:
                raise ReplicationError(f"{where}: producing to {self.spec.target} failed: {error}",
                                       code=error.name, retriable=error.code in _PRODUCER_STATE_ERRORS)
            if time.monotonic() > deadline:
                raise ReplicationError(f"{where}: producing to {self.spec.target} kept failing for "
                                       f"{self.spec.stall_timeout_s:.0f} s: {error}")
            log.warning("%s: produce to %s failed (%s); retrying the same batches", where, self.spec.target, error)
            self._route(target, {k[0] for k in pending_failures}, refresh_only=True)

    def _send_round(self, target: WireClient, record_sets: dict[tuple[str, int], bytearray],
                    ) -> dict[tuple[str, int], ErrorCode]:
        """Send ``record_sets`` grouped by leader; record acknowledged ones, return the failed ones."""
        by_node: dict[int, dict[tuple[str, int], bytearray]] = {}
        failures: dict[tuple[str, int], ErrorCode] = {}
        for key, records in record_sets.items():
            node = target.leader(key)
            if node is None:
                failures[key] = ErrorCode(5, "LEADER_NOT_AVAILABLE", True)
            else:
                by_node.setdefault(node, {})[key] = records
        timeout_ms = int(self.spec.flush_timeout_s * 1000)
        in_flight = [(node, sets, target.send_produce(node, sets, timeout_ms=timeout_ms))
                     for node, sets in by_node.items()]
        for _node, sets, pending in in_flight:
            answer = target.produce_result(pending, self.spec.flush_timeout_s)
            if isinstance(answer, ErrorCode):
                failures.update(dict.fromkeys(sets, answer))
                continue
            for part in answer:
                key = (part.topic, part.partition)
                if part.error is not None:
                    failures[key] = part.error
                    continue
                state = self.by_remote[key]
                item = state.pending[0]
                state.upstream.extend(item.upstream)
                state.downstream.extend(range(part.base_offset, part.base_offset + item.batch.record_count))
                state.bytes += item.batch.size
        return failures

    def _route(self, client: WireClient, topics: set[str], refresh_only: bool = False) -> None:
        errors = client.refresh_leaders(topics, self.spec.stall_timeout_s)
        if errors and not refresh_only:
            (topic, partition), error = next(iter(errors.items()))
            raise ReplicationError(f"flow={self.spec.flow}: no leader for {topic}-{partition} on "
                                   f"{client.alias}: {error}", code=error.name, retriable=error.retriable)

    # -- after every batch is acknowledged: progress, then offset syncs (as copy.py) ------------------------
    def _finish(self) -> list[CopyResult]:
        spec = self.spec
        producer = cached_producer(spec.producer_settings)
        failures: list[KafkaError] = []
        for state in self.ranges.values():
            if state.upstream:
                record = progress_record(spec.source, state.rng.topic, state.rng.partition, state.upstream[-1])
                producer.produce(spec.progress_topic, record.value, record.key,
                                 on_delivery=lambda err, _m: failures.append(err) if err else None)
        record_copy._flush(spec, producer, spec.producer_settings, failures, f"flow={spec.flow} (progress)")
        results = []
        seconds = time.monotonic() - self.started
        for state in self.ranges.values():
            rng, syncs = state.rng, 0
            if spec.syncs_topic is not None and state.upstream:
                collected = record_copy._Batch(upstream=state.upstream, downstream=state.downstream)
                syncs = record_copy._write_offset_syncs(spec, rng, collected, f"flow={spec.flow} {state.where}")
            last = state.upstream[-1] if state.upstream else -1
            results.append(CopyResult(rng.topic, rng.partition, rng.start, max(state.next_offset, rng.start), last,
                                      len(state.upstream), state.bytes, syncs, seconds))
        return results

    # -- the fetcher thread ----------------------------------------------------------------------------------
    def _fetch_loop(self) -> None:
        source: WireClient | None = None
        try:
            source = WireClient(self.spec.source, self.spec.consumer_settings)
            source.bootstrap(self.spec.stall_timeout_s)
            self._route(source, {key[0] for key in self.ranges})
            while not self.stop.is_set():
                active = [s for s in self.ranges.values() if not s.fetch_done]
                if not active:
                    break
                self._fetch_once(source, active)
            self._put(None)
        except BaseException as exc:  # handed to the task's thread, which raises it
            self._put(exc if isinstance(exc, ReplicationError)
                      else ReplicationError(f"flow={self.spec.flow}: fetching from {self.spec.source} failed: "
                                            f"{type(exc).__name__}: {exc}"))
        finally:
            if source is not None:
                source.close()

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
            in_flight.append(source.send_fetch(node, positions, read_committed=self.read_committed,
                                               max_bytes=_FETCH_MAX_BYTES))
        now = time.monotonic()
        for pending in in_flight:
            answer = source.fetch_result(pending, self.spec.stall_timeout_s)
            if isinstance(answer, ErrorCode):
                if not answer.retriable:
                    raise ReplicationError(f"flow={self.spec.flow}: fetching from {self.spec.source} failed: "
                                           f"{answer}", retriable=False)
                self._route(source, {s.rng.topic for s in active}, refresh_only=True)
                continue
            for part in answer:
                state = self.ranges[(part.topic, part.partition)]
                if part.error is not None:
                    self._fetch_error(source, state, part.error)
                    continue
                self._accept(state, part.records, part.aborted_transactions)
        for state in active:
            if not state.fetch_done and now - state.last_progress > self.spec.stall_timeout_s:
                raise ReplicationError(f"flow={self.spec.flow} {state.where}: no records from the source for "
                                       f"{self.spec.stall_timeout_s:.0f} s at offset {state.position} "
                                       f"(range ends at {state.rng.end})")

    def _fetch_error(self, source: WireClient, state: _Range, error: ErrorCode) -> None:
        where = f"flow={self.spec.flow} {state.where}"
        if error.code in _PERMANENT_FETCH or not error.retriable:
            raise ReplicationError(f"{where}: fetching offset {state.position} from {self.spec.source} failed: "
                                   f"{error}", retriable=False)
        self._route(source, {state.rng.topic}, refresh_only=True)

    def _accept(self, state: _Range, records: bytes, aborted: list[tuple[int, int]] | None) -> None:
        """Split one partition's fetched data into batches to send, up to the batch holding the range's end."""
        try:
            split = split_batches(records)
        except RecordBatchError as exc:
            raise ReplicationError(f"flow={self.spec.flow} {state.where}: {exc}", retriable=False) from None
        batches = [b for b in split.batches if b.base_offset < state.rng.end and b.next_offset > state.position]
        if not batches:
            if split.truncated_at is not None and split.truncated_size > state.fetch_bytes:
                state.fetch_bytes = split.truncated_size  # one batch is larger than we asked for
            return
        outgoing: list[_Outgoing] = []
        for batch in data_batches(batches, aborted if self.read_committed else None):
            if needs_rebuild(batch, state.position):
                rebuilt, upstream = rebuild(batch, state.position)
                if rebuilt is not None:
                    outgoing.append(_Outgoing(RecordBatch(memoryview(rebuilt)), upstream))
            else:
                outgoing.append(_Outgoing(batch, batch.upstream_offsets()))
        state.position = batches[-1].next_offset
        state.last_progress = time.monotonic()
        state.fetch_done = state.position >= state.rng.end
        self._put((state, outgoing, state.position))

    def _put(self, item: tuple[_Range, list[_Outgoing], int] | BaseException | None) -> None:
        while not self.stop.is_set():
            try:
                self.inbox.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

"""The produce side of the batch copy task (runs on executors): forwarded batches to the target, pipelined.

Why pipelined: one Produce round trip per request would bound the copy by the target's latency, not by its
ingest. So, like Kafka's idempotent producer (``max.in.flight.requests.per.connection`` <= 5), up to
:data:`MAX_IN_FLIGHT` Produce requests are outstanding per target leader; each carries at most one batch per
partition (a broker takes one v2 batch per partition per request), so at most five batches of a partition
are in flight, which is what the broker's duplicate detection remembers per producer and partition.

Why a retried batch is not written twice: a batch gets the target producer's id, epoch and the partition's
next sequence number once, when it is first sent, and is resent with exactly those bytes. When a batch fails,
the batches after it fail too (the broker refuses a sequence that does not follow the last one it wrote, with
OUT_OF_ORDER_SEQUENCE); once every request holding the partition has answered, all its unacknowledged batches
go back to the front of its queue in sequence order and are sent again. A batch the broker already wrote is
answered with its original offset (the broker's idempotence), never appended again.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field

from mm2py.errors import ReplicationError
from mm2py.metrics.measurement import RangeMeasurer
from mm2py.mirror.offset_syncs import Run, extend_runs
from mm2py.wire.batch_codec import merge
from mm2py.wire.batches import RecordBatch, producer_parts
from mm2py.wire.connection import TRANSPORT_ERROR, ErrorCode, Pending, TopicPartition, WireClient

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 5
_REQUEST_BYTES = 16 * 1024 * 1024  # a Produce request stops taking partitions here (brokers cap requests at 100 MB)
_RETRY_BACKOFF_S = 0.1  # the Java producer's retry.backoff.ms
_SEQUENCE_MODULO = 2**31
_OUT_OF_ORDER_SEQUENCE = 45
_OUT_OF_ORDER_RESENDS = 3  # the first unacknowledged batch refused this often: the broker lost our producer state
# Errors a new producer id fixes (the broker forgot or fenced ours): the task fails and Spark retries it.
_PRODUCER_STATE_ERRORS = {46, 47, 59}  # DUPLICATE_SEQUENCE, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID
_TOO_LARGE = {10, 18}  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE


def batch_timestamps(batch: RecordBatch) -> tuple[int, float, float, float, float]:
    """(records, min, max, sum, last) of a batch's record timestamps, from its header alone: the first and the
    newest are there; the sum assumes the records spread evenly between them (no record is decoded)."""
    count = batch.record_count
    low, high = float(batch.base_timestamp), float(batch.max_timestamp)
    if batch.has_delete_horizon or low > high:  # base_timestamp then holds the cleaner's delete horizon
        low = high
    return count, low, high, count * (low + high) / 2, high


@dataclass(frozen=True)
class SenderSettings:
    """What the sender needs of a flow: names for its messages and its time limits."""

    flow: str
    target: str
    request_timeout_s: float  # how long a Produce may take at the broker, and how long its answer is awaited
    stall_timeout_s: float  # how long one partition may keep failing before the copy gives up


@dataclass(eq=False)
class Outgoing:
    """One batch to send (its header still the source producer's) and its records' source offsets."""

    batch: RecordBatch
    upstream: range | list[int]
    # What is sent (the target producer's header, then the rest of the batch as it came); fixed once, so a resent
    # batch keeps its sequence.
    wire: tuple[bytes, memoryview] | None = None
    resends: int = 0


@dataclass(eq=False)
class Lane:
    """One target partition: batches to send, batches in flight (in sequence order), what was acknowledged."""

    topic: str
    partition: int
    where: str
    pending: collections.deque[Outgoing] = field(default_factory=collections.deque)
    in_flight: collections.deque[Outgoing] = field(default_factory=collections.deque)
    requests: int = 0  # requests in flight that hold one of this lane's batches
    sequence: int = 0
    blocked: bool = False  # a batch failed: nothing new is sent until every request holding the lane answered
    retry_at: float = 0.0
    failing_since: float | None = None
    # Every acknowledged record, as runs (source offset, target offset, length) in the order they were
    # acknowledged: what the offset syncs, the progress record and the task's result are computed from.
    runs: list[Run] = field(default_factory=list)
    bytes: int = 0
    measurer: RangeMeasurer = field(default_factory=RangeMeasurer)  # metrics: ages at fetch, latency at ack

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def busy(self) -> bool:
        return bool(self.pending or self.in_flight)

    @property
    def records(self) -> int:
        """How many records the target acknowledged."""
        return sum(length for _up, _down, length in self.runs)

    @property
    def last_upstream(self) -> int:
        """The source offset of the last record acknowledged; -1 before the first."""
        if not self.runs:
            return -1
        upstream, _down, length = self.runs[-1]
        return upstream + length - 1


@dataclass
class _Flight:
    node: int
    pending: Pending
    items: dict[TopicPartition, Outgoing]


class PipelinedProducer:
    """Moves the lanes' batches to the target (the task's thread only; the client is not shared)."""

    def __init__(
        self,
        spec: SenderSettings,
        client: WireClient,
        lanes: list[Lane],
        producer_id: int,
        epoch: int,
        merge_below: int = 0,
        merge_up_to: int = 0,
    ) -> None:
        self.spec = spec
        # Batches smaller than merge_below that wait in the same lane are sent as one of at most merge_up_to
        # bytes (0: never); see mm2py.wire.batch_codec.merge for why.
        self.merge_below = merge_below
        self.merge_up_to = merge_up_to
        self.client = client
        self.lanes = {lane.key: lane for lane in lanes}
        self.producer_id = producer_id
        self.epoch = epoch
        self.flights: dict[int, collections.deque[_Flight]] = collections.defaultdict(collections.deque)
        self._stale: set[str] = set()  # topics whose leaders must be looked up again

    def busy(self) -> bool:
        return any(lane.busy for lane in self.lanes.values())

    def step(self) -> None:
        """Send what may be sent, then take answers: those already there, or the oldest one when nothing more
        could be sent (every leader has MAX_IN_FLIGHT requests out, or every queue waits on an answer)."""
        sent = self._send()
        if not any(self.flights.values()):
            if not sent:
                self._wait_for_backoff()
            return
        full = all(len(q) >= MAX_IN_FLIGHT for q in self.flights.values() if q)
        if sent and not full:
            self.client.poll(0)
            for queue in self.flights.values():
                while queue and queue[0].pending.done:
                    self._complete(queue.popleft())
        else:
            oldest = min((q for q in self.flights.values() if q), key=lambda q: q[0].pending.sent_at)
            self._complete(oldest.popleft())
        self._requeue()

    # -- sending -------------------------------------------------------------------------------------------
    def _send(self) -> bool:
        now = time.monotonic()
        by_node: dict[int, collections.deque[Lane]] = collections.defaultdict(collections.deque)
        for lane in self.lanes.values():
            if not lane.pending or lane.blocked or lane.retry_at > now:
                continue
            node = self.client.leader(lane.key)
            if node is None:
                self._stale.add(lane.topic)
                self._note_failure(lane, ErrorCode(5, "LEADER_NOT_AVAILABLE", True), now)
                continue
            by_node[node].append(lane)
        sent = False
        timeout_ms = int(self.spec.request_timeout_s * 1000)
        for node, waiting in by_node.items():
            queue = self.flights[node]
            while waiting and len(queue) < MAX_IN_FLIGHT:
                record_sets: dict[TopicPartition, tuple[bytes, memoryview]] = {}
                items: dict[TopicPartition, Outgoing] = {}
                size = 0
                for _ in range(len(waiting)):
                    lane = waiting.popleft()
                    if self.merge_below and len(lane.pending) > 1 and lane.pending[0].wire is None:
                        self._merge_head(lane)
                    wire = self._wire(lane, lane.pending[0])
                    wire_bytes = len(wire[0]) + len(wire[1])
                    if record_sets and size + wire_bytes > _REQUEST_BYTES:
                        waiting.append(lane)  # first in the next request
                        continue
                    item = lane.pending.popleft()
                    record_sets[lane.key], items[lane.key] = wire, item
                    size += wire_bytes
                    lane.in_flight.append(item)
                    lane.requests += 1
                    if lane.pending:
                        waiting.append(lane)
                queue.append(_Flight(node, self.client.send_produce(node, record_sets, timeout_ms=timeout_ms), items))
                sent = True
        if self._stale:
            self._refresh()
        return sent

    def _merge_head(self, lane: Lane) -> None:
        """Replace the small batches at the head of ``lane`` that were never sent (a resent batch keeps its
        bytes and sequence) and share a codec by one batch holding their records."""
        codec = lane.pending[0].batch.codec
        run: list[Outgoing] = []
        size = 0
        for item in lane.pending:
            batch = item.batch
            if (
                item.wire is not None
                or batch.size >= self.merge_below
                or batch.codec != codec
                or size + batch.size > self.merge_up_to
            ):
                break
            run.append(item)
            size += batch.size
        if len(run) < 2:
            return
        for _ in run:
            lane.pending.popleft()
        upstream = [offset for item in run for offset in item.upstream]
        lane.pending.appendleft(Outgoing(RecordBatch(memoryview(merge([item.batch for item in run]))), upstream))

    def _wire(self, lane: Lane, item: Outgoing) -> tuple[bytes, memoryview]:
        if item.wire is None:
            item.wire = producer_parts(item.batch, self.producer_id, self.epoch, lane.sequence)
            lane.sequence = (lane.sequence + item.batch.record_count) % _SEQUENCE_MODULO
        return item.wire

    def _wait_for_backoff(self) -> None:
        """Nothing in flight and nothing sendable: the only work left waits for a retry backoff to pass."""
        waits = [lane.retry_at for lane in self.lanes.values() if lane.pending and not lane.blocked]
        if waits:
            time.sleep(max(0.0, min(min(waits) - time.monotonic(), _RETRY_BACKOFF_S)))

    # -- answers -------------------------------------------------------------------------------------------
    def _complete(self, flight: _Flight) -> None:
        answer = self.client.produce_result(flight.pending, self.spec.request_timeout_s)
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets: dict[TopicPartition, int] = {}
        if isinstance(answer, ErrorCode):
            errors = dict.fromkeys(flight.items, answer)
        else:
            for part in answer:
                key = (part.topic, part.partition)
                if part.error is None:
                    offsets[key] = part.base_offset
                else:
                    errors[key] = part.error
        now = time.monotonic()
        for key, item in flight.items.items():
            lane = self.lanes[key]
            lane.requests -= 1
            if key in offsets:
                self._acknowledged(lane, item, offsets[key])
            else:
                self._failed(lane, item, errors.get(key, TRANSPORT_ERROR), now)

    def _acknowledged(self, lane: Lane, item: Outgoing, base_offset: int) -> None:
        if not lane.in_flight or lane.in_flight[0] is not item:
            if lane.blocked:
                # An earlier batch's answer was lost, yet the broker took this one, so it wrote that one too;
                # both are resent, and the broker answers each with the offset it gave it.
                return
            raise ReplicationError(
                f"flow={self.spec.flow} {lane.where}: {self.spec.target} acknowledged a batch "
                "before an earlier one of the same partition"
            )
        lane.in_flight.popleft()
        extend_runs(lane.runs, item.upstream, base_offset)
        lane.bytes += item.batch.size
        lane.failing_since = None
        lane.measurer.acknowledged(time.time() * 1000, *batch_timestamps(item.batch))

    def _failed(self, lane: Lane, item: Outgoing, error: ErrorCode, now: float) -> None:
        where = f"flow={self.spec.flow} {lane.where}"
        if error.code in _TOO_LARGE:
            batch = item.batch
            raise ReplicationError(
                f"{where}: {self.spec.target} refused a record batch of {batch.size} bytes ({batch.record_count} "
                f"records, source offsets {batch.base_offset}..{batch.last_offset}) as too large ({error}); raise "
                f"the max.message.bytes of topic {lane.topic} on {self.spec.target} (or the brokers' "
                f"message.max.bytes) to at least {batch.size}, or set mm2py.copy.mode=record to re-batch the "
                f"records",
                code=error.name,
                retriable=False,
            )
        head = bool(lane.in_flight) and lane.in_flight[0] is item
        if error.code == _OUT_OF_ORDER_SEQUENCE and head and not lane.blocked:
            item.resends += 1  # no earlier batch failed: the broker does not know our sequence
            if item.resends > _OUT_OF_ORDER_RESENDS:
                raise ReplicationError(f"{where}: producing to {self.spec.target} failed: {error}")
        elif error.code in _PRODUCER_STATE_ERRORS:
            raise ReplicationError(f"{where}: producing to {self.spec.target} failed: {error}")
        elif not error.retriable and error.code != _OUT_OF_ORDER_SEQUENCE:
            raise ReplicationError(
                f"{where}: producing to {self.spec.target} failed: {error}", code=error.name, retriable=False
            )
        if not lane.blocked:
            log.warning(
                "%s: produce to %s failed (%s); resending its unacknowledged batches in order",
                where,
                self.spec.target,
                error,
            )
        lane.blocked = True
        self._stale.add(lane.topic)
        self._note_failure(lane, error, now)

    def _note_failure(self, lane: Lane, error: ErrorCode, now: float) -> None:
        if lane.failing_since is None:
            lane.failing_since = now
        elif now - lane.failing_since > self.spec.stall_timeout_s:
            raise ReplicationError(
                f"flow={self.spec.flow} {lane.where}: producing to {self.spec.target} kept "
                f"failing for {self.spec.stall_timeout_s:.0f} s: {error}"
            )
        lane.retry_at = now + _RETRY_BACKOFF_S

    def _requeue(self) -> None:
        """Lanes whose every request answered get their unacknowledged batches back, in sequence order."""
        for lane in self.lanes.values():
            if lane.blocked and lane.requests == 0:
                lane.pending.extendleft(reversed(lane.in_flight))
                lane.in_flight.clear()
                lane.blocked = False
        if self._stale:
            self._refresh()

    def _refresh(self) -> None:
        """Look the leaders up again; a failed look-up is tried again on the next failure or step."""
        topics, self._stale = self._stale, set()
        try:
            self.client.refresh_leaders(topics, self.spec.stall_timeout_s)
        except Exception as exc:  # the wire library's own errors: the lanes' deadlines decide when to give up
            log.warning("flow=%s: looking up leaders on %s failed: %s", self.spec.flow, self.spec.target, exc)
            self._stale |= topics

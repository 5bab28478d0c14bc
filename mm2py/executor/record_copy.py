"""The copy task (runs on executors): one offset range of one source partition -> the same partition of
the remote topic, inside one Python process. Records never pass through the JVM or the driver.

Order of effects, which is what makes a crash safe at any point:
1. consume [start, end) and produce every record (key, value, headers, CreateTime, partition kept);
2. flush: every record is acknowledged by the target (acks=all), or the task fails and Spark retries it;
3. write progress (the last replicated offset) to ``mm2-offsets.<source>.internal``;
4. write the offset syncs of this range (MM2's emission rule, plus run boundaries) for offset translation.
At-least-once (MM2's default): a crash before 3 re-copies at most this range. Exactly-once
(``<target>.exactly.once.source.support = enabled``): 1-3 are one producer transaction under the transactional.id
of the range's task slot, MirrorMaker 2's own (:mod:`mm2py.executor.record_transactions`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mm2py.errors import RECORDS_GONE, Failure, ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange, failed_result
from mm2py.executor.delivery import flush_producer, raise_delivery_failure, range_failure, write_offset_syncs
from mm2py.executor.record_transactions import (
    abort,
    after_committed,
    fenced_failure,
    producer_settings,
    release,
    transaction_step,
)
from mm2py.executor.task_logging import executor_logging
from mm2py.executor.throttle import Throttle
from mm2py.librdkafka.clients import (
    cached_consumer,
    cached_producer,
    close_idle,
    drop_consumer,
    drop_producer,
    login_error,
)
from mm2py.librdkafka.tls_diagnosis import certificate_problem
from mm2py.metrics.measurement import RangeMeasurer
from mm2py.mirror.progress import progress_record

_CONSUME_BATCH = 10_000
PROVENANCE_HEADER = "mm2py.provenance"


@dataclass
class RangeCopy:
    """What the hot loop collected for one range."""

    upstream: list[int] = field(default_factory=list)
    downstream: list[int] = field(default_factory=list)
    failures: list[KafkaError] = field(default_factory=list)
    position: int = 0
    last_read: int = -1
    bytes: int = 0
    measurer: RangeMeasurer = field(default_factory=RangeMeasurer)
    gone: Failure | None = None  # the records at ``position`` are gone from the source: the range ends there
    # timestamps of the records produced, for the replication latency measured when the target acknowledged
    ts: list[float] = field(default_factory=lambda: [math.inf, -math.inf, 0.0, math.nan])  # min, max, sum, last
    # Voided at the range's first failed record, from inside its delivery report: whatever the producer still
    # holds for the range lies behind that record, and must not land before the retried range copies it again
    # (``mm2py.librdkafka.clients.drop_producer`` says why librdkafka would send it).
    producer: Any = None
    login_refused: bool = False  # the consumer's login was refused: copy_range drops it
    throttle: Throttle = field(default_factory=lambda: Throttle(0))  # the task's share of the throughput limit

    def read(self, stamps: list[int], value_bytes: int) -> None:
        """``stamps``: the timestamps of the records one consume() call gave and that are produced."""
        if not stamps:
            return
        low, high, total, last = min(stamps), max(stamps), float(sum(stamps)), stamps[-1]
        self.measurer.read(time.time() * 1000, len(stamps), low, high, total, last, value_bytes)
        self.ts = [min(self.ts[0], low), max(self.ts[1], high), self.ts[2] + total, last]

    def acknowledged(self) -> None:
        if self.upstream:
            self.measurer.acknowledged(time.time() * 1000, len(self.upstream), *self.ts)

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            if not self.failures and self.producer is not None:
                # Not blocking: this runs inside the producer's poll; the purged records report in later.
                self.producer.purge(in_queue=True, in_flight=True, blocking=False)
            self.failures.append(err)
        else:
            self.downstream.append(msg.offset())


def copy_partitions(
    spec: CopySpec, ranges: Iterator[PartitionRange], last_attempt: bool = False, retried: bool = False
) -> Iterator[CopyResult]:
    """Spark ``mapPartitions`` body (executor side): copy each range in turn.

    Failures travel as data (``CopyResult.error``), so the driver reads whether to retry from a field.
    The exception: a transient failure on an attempt that Spark may still repeat is raised, so Spark runs
    the task again at once; a permanent one (a record larger than the target accepts, a missing topic) is
    returned at once, because more attempts would fail the same way. Exactly-once: a fenced producer ends the
    task, and a ``retried`` task starts after what an earlier attempt committed (``record_transactions``).
    """
    executor_logging(spec)
    close_idle()  # what earlier tasks of this Python worker left cached and no task has asked for since
    todo = after_committed(spec, list(ranges)) if spec.exactly_once and retried else list(ranges)
    throttle = Throttle(spec.task_throughput(len(todo)))  # the task's share of the flow's throughput limit
    try:
        for n, rng in enumerate(todo):
            failure = yield from _copy_or_fail(spec, rng, throttle, last_attempt)
            stopped = fenced_failure(spec, rng, failure)  # the slot's id is another producer's now
            if stopped is not None:
                yield from (failed_result(later, stopped) for later in todo[n:])
                return
            if failure is not None:
                yield failed_result(rng, failure)
    finally:
        release(spec, todo)


def _copy_or_fail(
    spec: CopySpec, rng: PartitionRange, throttle: Throttle, last_attempt: bool
) -> Generator[CopyResult, None, Failure | None]:
    """Yields the range's result, or returns why it failed (raised while Spark may still retry it; never a fencing)."""
    try:
        yield copy_range(spec, rng, throttle)
        return None
    except (ReplicationError, KafkaException, SystemError) as exc:  # the latter two: a client call not worded
        failure = exc.failure if isinstance(exc, ReplicationError) else range_failure(spec, rng, exc)
        if failure.retriable and not last_attempt and fenced_failure(spec, rng, failure) is None:
            raise
        return failure


def copy_range(spec: CopySpec, rng: PartitionRange, throttle: Throttle | None = None) -> CopyResult:
    """Copy one range; raises ReplicationError (the task fails, Spark retries it, progress stays put)."""
    started = time.monotonic()
    where = f"flow={spec.flow} topic={rng.topic} partition={rng.partition}"
    settings = producer_settings(spec, rng)
    producer = cached_producer(settings)
    if spec.syncs_producer_settings is not None:
        cached_producer(spec.syncs_producer_settings)  # created now, so its producer id arrives in parallel
    consumer = cached_consumer(spec.consumer_settings)
    copying = RangeCopy(position=rng.start, producer=producer, throttle=throttle or Throttle(0))
    syncs = 0
    if spec.exactly_once:
        transaction_step(producer, settings, where, "begin_transaction")
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    try:
        _pump(spec, rng, consumer, producer, copying, where)
        copied = f"{where} offsets {rng.start}..{copying.last_read} to {rng.remote_topic}"
        flush_producer(spec, producer, settings, copying.failures, copied)
        copying.acknowledged()
        if len(copying.downstream) != len(copying.upstream):
            raise ReplicationError(
                f"{where}: {len(copying.upstream)} records sent, {len(copying.downstream)} acknowledged"
            )
        if not spec.exactly_once:  # syncs before progress, as on the batch path (executor/batch_results.py)
            syncs = _syncs(spec, rng, copying, where)
        if copying.last_read >= 0:
            record = progress_record(spec.source, rng.topic, rng.partition, copying.last_read)
            producer.produce(spec.progress_topic, record.value, record.key, on_delivery=_failures_to(copying))
        if spec.exactly_once:
            transaction_step(producer, settings, where, "commit_transaction")
        else:
            flush_producer(spec, producer, settings, copying.failures, f"{where} (progress)")
    except BaseException:
        if spec.exactly_once:
            abort(producer, settings, where)
        raise
    finally:
        consumer.unassign()
        if copying.login_refused:
            # librdkafka reports a refusal once per client (an OIDC token failure only when its text changes), so
            # a later task of this worker would wait on this consumer for its stall timeout instead of meeting the
            # refusal, and be retried: it gets a new consumer, which reports the refusal again.
            drop_consumer(spec.consumer_settings)
    if spec.exactly_once:  # after the commit: an aborted transaction's records must not be synced
        syncs = _syncs(spec, rng, copying, where)
    measurement = copying.measurer.measurement(spec.source, spec.target, rng.topic, rng.remote_topic, rng.partition)
    return CopyResult(
        rng.topic,
        rng.partition,
        rng.start,
        copying.position,
        copying.last_read,
        len(copying.upstream),
        copying.bytes,
        syncs,
        time.monotonic() - started,
        error=copying.gone,
        measurement=measurement,
    )


def _syncs(spec: CopySpec, rng: PartitionRange, copying: RangeCopy, where: str) -> int:
    """Write (and wait for) the offset syncs of the range's acknowledged records; how many were written."""
    if spec.syncs_topic is None or not copying.upstream:
        return 0
    return write_offset_syncs(spec, rng, copying.upstream, copying.downstream, where)


def _failures_to(copying: RangeCopy) -> Any:
    return lambda err, _msg: copying.failures.append(err) if err is not None else None


def _pump(spec: CopySpec, rng: PartitionRange, consumer: Any, producer: Any, copying: RangeCopy, where: str) -> None:
    """The hot loop: consume a batch, produce each record, repeat until the range's end. Under a throughput limit
    each record waits until the task's throttle lets it through, and an exactly-once range ends early, committing
    what it copied, before its transaction could outlive ``transaction.timeout.ms`` (the next round goes on)."""
    produce = producer.produce
    poll = producer.poll
    on_delivery = copying.on_delivery
    remote, partition, end = rng.remote_topic, rng.partition, rng.end
    append = copying.upstream.append
    origin = f"{spec.source}:{rng.topic}:{partition}:".encode() if spec.provenance else b""
    cycle_mark = f"{spec.target}:".encode()
    last_progress = time.monotonic()
    # consume() returns once it has num_messages events or the timeout passed: ask for no more than the range
    # still holds, and wait a little, so the end of a range costs no idle poll.ms.
    wait = min(spec.poll_timeout_s, 0.1)
    limited = copying.throttle.limited
    # under a limit, an exactly-once range commits within half its transaction timeout
    deadline = last_progress + spec.transaction_timeout_ms / 2000 if spec.exactly_once else math.inf
    while copying.position < end:
        messages = consumer.consume(num_messages=max(1, min(_CONSUME_BATCH, end - copying.position)), timeout=wait)
        if not messages:
            _quiet(spec, rng, copying, poll, last_progress, where)
            continue
        stamps: list[int] = []
        position_before = copying.position
        bytes_before = copying.bytes
        for msg in messages:
            err = msg.error()
            if err is not None:
                if _range_ends_at(spec, copying, msg, err, where):
                    break
                continue
            offset = msg.offset()
            if offset >= end:
                copying.position = end
                break
            if limited and not _let_through(copying, poll, msg, deadline):
                end = copying.position  # out of time: the range ends before this record
                break
            copying.last_read = offset
            copying.position = offset + 1
            headers = msg.headers()
            if origin:
                if headers and any(k == PROVENANCE_HEADER and v and v.startswith(cycle_mark) for k, v in headers):
                    continue  # it came from the target: copying it back would loop (Identity cycles)
                headers = [*(headers or ()), (PROVENANCE_HEADER, origin + str(offset).encode())]
            value = msg.value()
            kind, timestamp = msg.timestamp()
            while True:
                try:
                    produce(
                        remote,
                        value,
                        msg.key(),
                        partition,
                        on_delivery=on_delivery,
                        timestamp=timestamp if kind else 0,
                        headers=headers,
                    )
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    poll(0.05)
                except KafkaException as exc:  # refused before sending, e.g. larger than message.max.bytes
                    raise _refused(spec, rng, msg, exc, where) from None
            append(offset)
            stamps.append(timestamp)
            if value is not None:
                copying.bytes += len(value)
        copying.read(stamps, copying.bytes - bytes_before)
        poll(0)
        if copying.gone is not None:
            return
        if copying.position != position_before:
            last_progress = time.monotonic()
        else:  # only events that did not move the position (a login cut short): the source is still silent
            _stop_if_stalled(spec, copying, end, last_progress, where)
        _stop_if_failed(spec, rng, copying, where)


def _quiet(
    spec: CopySpec, rng: PartitionRange, copying: RangeCopy, poll: Any, last_progress: float, where: str
) -> None:
    """No record came: delivery reports go on while the source is slow (a failure voids the producer at once);
    a refused login or a stall ends the range."""
    poll(0)
    _stop_if_failed(spec, rng, copying, where)
    _stop_if_refused(spec, copying, where)
    _stop_if_stalled(spec, copying, rng.end, last_progress, where)


def _let_through(copying: RangeCopy, poll: Any, msg: Any, deadline: float) -> bool:
    """Wait until the throughput limit lets the record's key and value through, serving delivery reports
    meanwhile; False, without waiting, once ``deadline`` has passed (the range ends before this record)."""
    if time.monotonic() >= deadline:
        return False
    nbytes = len(msg.value() or b"") + len(msg.key() or b"")

    def serving(seconds: float) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            poll(left)

    copying.measurer.throttled_ms += 1000 * copying.throttle.hold(nbytes, sleep=serving)
    return True


def _stop_if_failed(spec: CopySpec, rng: PartitionRange, copying: RangeCopy, where: str) -> None:
    if copying.failures:
        where = f"{where} offsets {rng.start}..{copying.last_read} to {rng.remote_topic}"
        raise_delivery_failure(spec, producer_settings(spec, rng), copying.failures, where)


def _stop_if_refused(spec: CopySpec, copying: RangeCopy, where: str) -> None:
    """Stops the range if the consumer's login was refused (a wrong password, a certificate for another host): no
    record will come."""
    refused = login_error(spec.consumer_settings)
    if refused is not None:
        copying.login_refused = True
        raise _login_refused(spec, refused, where)


def _stop_if_stalled(spec: CopySpec, copying: RangeCopy, end: int, last_progress: float, where: str) -> None:
    if time.monotonic() - last_progress > spec.stall_timeout_s:
        raise ReplicationError(
            f"{where}: no records from the source for {spec.stall_timeout_s:.0f} s "
            f"at offset {copying.position} (range ends at {end})"
        )


def _range_ends_at(spec: CopySpec, copying: RangeCopy, msg: Any, err: KafkaError, where: str) -> bool:
    """A consumer event: partition EOF moves the position (False: go on); records gone at the position end the
    range there (True: what came before it is acknowledged and recorded as usual, and the driver counts the gap,
    which retrying cannot bring back); a failed login stops the range only if it was refused; anything else
    raises."""
    if err.code() == KafkaError._PARTITION_EOF:
        copying.position = max(copying.position, msg.offset())
        return False
    if err.code() == KafkaError._AUTHENTICATION:
        # A request the consumer made on a connection whose login failed ("FindCoordinator response error: Local:
        # Authentication failure"). The consumer's error_cb saw the login itself and tells a refusal from a login
        # cut short (librdkafka.clients._CUT_SHORT), after which the client logs in again by itself.
        _stop_if_refused(spec, copying, where)
        return False
    if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return False  # librdkafka looks the group.id's coordinator up, but a consumer that never commits needs none
    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        message = f"{where}: offset {copying.position} is no longer on {spec.source}: {err.str()}"
        copying.gone = Failure(message, RECORDS_GONE, retriable=False)
        return True
    raise ReplicationError.of_kafka(
        f"{where}: consuming from {spec.source} at offset {copying.position} failed: {err.str()}", err
    )


def _refused(spec: CopySpec, rng: PartitionRange, msg: Any, exc: KafkaException, where: str) -> ReplicationError:
    """Why the target producer refused a record before sending it, as the error that stops the range."""
    err = exc.args[0]
    offset, value = msg.offset(), msg.value()
    if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        limit = spec.producer_settings.get("message.max.bytes", "1000000")
        return ReplicationError.of_kafka(
            f"{where}: the record at offset {offset} is too large for the target producer: "
            f"{len(value or b'')}-byte value, {len(msg.key() or b'')}-byte key, message.max.bytes "
            f"= {limit}; raise {spec.target}.producer.message.max.bytes (and the topic's "
            "max.message.bytes)",
            err,
        )
    if err.code() == KafkaError._UNKNOWN_PARTITION:  # the remote topic grew after this
        drop_producer(producer_settings(spec, rng))  # producer's metadata: a new one sees it
        return ReplicationError(
            f"{where}: partition {rng.partition} of {rng.remote_topic} is not in the target producer's metadata yet"
        )
    return ReplicationError.of_kafka(
        f"{where}: the record at offset {offset} cannot be produced to {spec.target}: {err.str()}", err
    )


def _login_refused(spec: CopySpec, err: KafkaError, where: str) -> ReplicationError:
    """The source refused the consumer's login or TLS handshake; a certificate problem named as OpenSSL names it."""
    reason = err.str()
    if err.code() == KafkaError._SSL and "certificate verify failed" in reason:
        reason = certificate_problem(spec.consumer_settings) or reason
    return ReplicationError.of_kafka(f"{where}: connecting to {spec.source} failed: {reason}", err)

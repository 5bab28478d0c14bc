"""The end of a batch copy task (executor side): progress and offset syncs for what the target acknowledged,
and one CopyResult per range.

Why here and not in the copy loop: what counts as copied is only known once the sender has nothing in flight
any more. A range that stopped early (its partition's leader stayed away, a batch was not acknowledged within
``delivery.timeout.ms``, its records were deleted first) still gets progress for what the target acknowledged,
so the driver's retry copies only the rest: a broker failure copies nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError

from mm2py.errors import Failure
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.delivery import flush_offset_syncs, flush_producer, queue_offset_syncs
from mm2py.librdkafka.clients import cached_producer
from mm2py.mirror.progress import progress_record
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue


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

    @property
    def next_offset(self) -> int:
        """Where the range's next copy starts: after the last acknowledged record, or, when everything fetched
        was acknowledged, after what was fetched (control batches and aborted transactions included)."""
        if not self.unfinished and self.fetched_to >= self.rng.start:
            return self.fetched_to
        return self.queue.acked_upstream + 1 if self.queue.acked_records else self.rng.start

    def failure(self, spec: CopySpec, task_failure: Failure | None) -> Failure | None:
        """Why the range stopped before its end, if it did."""
        where = f"flow={spec.flow} {self.queue.where}"
        if self.queue.failure is not None:
            error = self.queue.failure
            return Failure(f"{where}: producing to {spec.target} failed: {error}", error.name, error.retriable)
        if self.fetch.failure is not None:
            error = self.fetch.failure
            return Failure(f"{where}: fetching from {spec.source} failed: {error}", error.name, error.retriable)
        if task_failure is not None and (self.unfinished or not self.fetch.done):
            return task_failure
        return None


def finish(
    spec: CopySpec, ranges: Iterable[BatchRange], task_failure: Failure | None, seconds: float
) -> list[CopyResult]:
    """Record progress and offset syncs of what was acknowledged, then the ranges' results."""
    ranges = list(ranges)
    producer = cached_producer(spec.producer_settings)
    failures: list[KafkaError] = []
    for r in ranges:
        if r.queue.acked_records:
            record = progress_record(spec.source, r.rng.topic, r.rng.partition, r.queue.acked_upstream)
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
    for r in ranges:
        if spec.syncs_topic is not None and r.queue.runs:
            syncs_of[(r.rng.topic, r.rng.partition)] = queue_offset_syncs(spec, r.rng, r.queue.runs, sync_failures)
    flush_producer(spec, producer, spec.producer_settings, failures, f"flow={spec.flow} (progress)")
    if syncs_of:
        flush_offset_syncs(spec, sync_failures, f"flow={spec.flow} ({len(syncs_of)} partitions)")
    results = []
    for r in ranges:
        rng, q = r.rng, r.queue
        measurement = q.measurer.measurement(spec.source, spec.target, rng.topic, rng.remote_topic, rng.partition)
        results.append(
            CopyResult(
                rng.topic,
                rng.partition,
                rng.start,
                r.next_offset,
                q.acked_upstream,
                q.acked_records,
                q.bytes,
                syncs_of.get((rng.topic, rng.partition), 0),
                seconds,
                error=r.failure(spec, task_failure),
                measurement=measurement,
                source_end=r.source_end,
            )
        )
    return results

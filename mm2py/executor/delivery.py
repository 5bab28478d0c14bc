"""Waiting for the target's acknowledgement on the record path (confluent-kafka): flushes with a deadline, delivery
failures as errors (a producer that timed out is replaced), a client's exception as a range's failure, and the
offset syncs written once a range is acknowledged. The batch path writes its own through its client
(:mod:`mm2py.executor.control_writes`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mm2py.errors import Failure, ReplicationError
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.executor.sync_records import offset_sync_records
from mm2py.librdkafka.clients import cached_producer, client_exception, drop_producer
from mm2py.mirror.offset_syncs import PartitionOffsetSyncState, Run, runs_of

# What the producer withdrew itself once a record before them had failed (``drop_producer``): not failures of
# their own, so the failure is named by the records that did fail.
_WITHDRAWN = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


def flush_producer(
    spec: CopySpec, producer: Any, settings: Mapping[str, str], failures: list[KafkaError], where: str
) -> None:
    deadline = time.monotonic() + spec.flush_timeout_s
    while producer.flush(1.0) > 0:
        if failures:
            break
        if time.monotonic() > deadline:
            raise ReplicationError(
                f"{where}: the target {spec.target} did not acknowledge within {spec.flush_timeout_s:.0f} s"
            )
    if failures:
        raise_delivery_failure(spec, settings, failures, where)


def range_failure(spec: CopySpec, rng: PartitionRange, exc: KafkaException | SystemError) -> Failure:
    """What a client's exception that no step of the copy worded means for ``rng``; a SystemError that is not the
    client's (``clients.client_exception``) is raised again."""
    if (client := client_exception(exc)) is None:
        raise exc
    where = f"flow={spec.flow} topic={rng.topic} partition={rng.partition}"
    err = client.args[0] if client.args else None
    if not isinstance(err, KafkaError):
        return Failure(f"{where}: copying the range from offset {rng.start} failed: {client}")
    return Failure.of_kafka(f"{where}: copying the range from offset {rng.start} failed: {err.str()}", err)


def raise_delivery_failure(spec: CopySpec, settings: Mapping[str, str], failures: list[KafkaError], where: str) -> None:
    """A producer that failed a delivery is replaced, whatever the error: it is voided first, so nothing queued
    behind the failed records lands out of order; and a new one needs no epoch bump after a timeout, which
    some brokers refuse (docs/test-broker.md)."""
    drop_producer(settings)
    failed = [err for err in failures if err.code() not in _WITHDRAWN] or failures
    first = failed[0]
    withdrawn = len(failures) - len(failed)
    raise ReplicationError.of_kafka(
        f"{where}: producing to {spec.target} failed for {len(failed)} record(s): {first.str()}"
        + (f" ({withdrawn} queued behind them withdrawn)" if withdrawn else ""),
        first,
    )


def write_offset_syncs(
    spec: CopySpec, rng: PartitionRange, upstream: list[int], downstream: list[int], where: str
) -> int:
    """Offset syncs are never transactional (as in MM2): they are written after the range is committed.

    MM2's topic gets exactly the syncs MM2's rule makes due (MM2's readers see what MM2 would write); with
    dense syncs on, mm2py's own syncs topic gets those plus the run boundaries exact translation needs.
    Returns how many syncs were written in all."""
    failures: list[KafkaError] = []
    written = queue_offset_syncs(spec, rng, runs_of(upstream, downstream), failures)
    flush_offset_syncs(spec, failures, where)
    return written


def queue_offset_syncs(
    spec: CopySpec,
    rng: PartitionRange,
    runs: list[Run],
    failures: list[KafkaError],
    states: dict[bool, PartitionOffsetSyncState] | None = None,
) -> int:
    """Hand one range's offset syncs to the syncs producer without waiting for them: a task that copied many
    ranges flushes once for all of them (``flush_offset_syncs``). Returns how many syncs were queued."""
    assert spec.syncs_producer_settings is not None
    producer = cached_producer(spec.syncs_producer_settings)
    records = offset_sync_records(spec, rng, runs, states)
    for topic, key, value, headers in records:
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    0,
                    headers=headers,
                    on_delivery=lambda err, _m: failures.append(err) if err else None,
                )
                break
            except BufferError:
                producer.poll(0.05)
    return len(records)


def flush_offset_syncs(spec: CopySpec, failures: list[KafkaError], where: str) -> None:
    assert spec.syncs_producer_settings is not None
    producer = cached_producer(spec.syncs_producer_settings)
    flush_producer(spec, producer, spec.syncs_producer_settings, failures, f"{where} (offset syncs)")

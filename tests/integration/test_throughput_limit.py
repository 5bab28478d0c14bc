"""Both copy paths under ``mm2py.throughput.max.bytes.per.second`` against test brokers: a limited copy takes at
least its bytes over the limit, says how long its tasks waited, and still
copies every record in order; an unlimited one never waits. The split between tasks and the bucket's arithmetic:
tests/unit/test_throttle.py. Only a lower bound in time is asserted: a slow machine makes it longer, never
shorter."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest

from mm2py.executor import batch_copy, record_copy
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from tests.harness.kafka_harness import Record, TansuBroker, end_offsets, make_records, read_all
from tests.integration.test_batch_copy import make_topics, pair, produce_batched, same, spec_for

pytestmark = pytest.mark.integration
__all__ = ["pair"]  # the fixture

LIMIT = 1_000_000  # bytes per second
RECORDS, VALUE = 500, 4000  # 2 MB of values over two partitions: two seconds at the limit


def loaded(pair: dict[str, TansuBroker], topic: str) -> tuple[CopySpec, list[Record]]:
    """``RECORDS`` records over two partitions of ``topic`` on the source, and a spec that copies them, no limit."""
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    syncs, progress = make_topics(pair, topic, 2)
    records = make_records(RECORDS, partitions=2, value_size=VALUE)
    produce_batched(src, topic, records)
    return spec_for(src, dst, syncs, progress), records


def copy_all(spec: CopySpec, path: str, src: str, topic: str) -> list[CopyResult]:
    ranges = [PartitionRange(topic, p, topic, 0, end) for p, end in end_offsets(src, topic).items()]
    spec = dataclasses.replace(spec, job_ranges=len(ranges))  # as SparkRunner sets it for a job
    if path == "batch":
        results = list(batch_copy.copy_partitions(spec, iter(ranges)))
    else:
        results = list(record_copy.copy_partitions(spec, iter(ranges), last_attempt=True))
    assert all(r.error is None for r in results), results
    return results


@pytest.mark.parametrize("path", ["batch", "record"])
def test_a_limited_flow_copies_every_record_no_faster_than_its_limit_and_counts_its_wait(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str], path: str
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic(f"limited-{path}")
    unlimited, records = loaded(pair, topic)
    spec = dataclasses.replace(unlimited, throughput_bytes_per_s=LIMIT)

    started = time.monotonic()
    results = copy_all(spec, path, src, topic)
    took = time.monotonic() - started

    at_least = RECORDS * VALUE / LIMIT  # every value byte counts; the batch path counts whole batches
    assert took >= 0.95 * at_least, f"{took:.2f} s for {RECORDS * VALUE} bytes at {LIMIT} bytes/s"
    waited = sum(r.measurement.throttled_ms for r in results if r.measurement is not None) / 1000
    assert waited >= 0.5 * at_least
    copied = read_all(dst, topic)
    assert sorted(map(same, copied)) == sorted(map(same, records))
    for p in range(2):
        assert [r.value for r in copied if r.partition == p] == [r.value for r in records if r.partition == p]


@pytest.mark.parametrize("path", ["batch", "record"])
def test_a_flow_without_a_limit_never_waits(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str], path: str
) -> None:
    topic = unique_topic(f"unlimited-{path}")
    spec, _records = loaded(pair, topic)

    results = copy_all(spec, path, pair["src"].bootstrap, topic)

    assert sum(r.records for r in results) == RECORDS
    assert all(r.measurement is not None and r.measurement.throttled_ms == 0 for r in results)

"""A following batch copy task (continuous mode): copies records written while it runs, is not stalled by
partitions that are caught up, and ends early when a range reaches its cap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from test_batch_copy import make_topics, run_task, same, spec_for

from mm2py.control.progress_store import read_progress
from mm2py.executor.contract import CopyResult, PartitionRange
from tests.harness.kafka_harness import ClusterFactory, TansuBroker, end_offsets, make_records, produce, read_all
from tests.harness.polling import poll_until

pytestmark = pytest.mark.integration

CAP = 1_000_000  # what the driver's follow_ranges give a range: a cap, not a target


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    return kafka_cluster("src", "dst")


def test_a_following_task_copies_what_arrives_and_caught_up_partitions_are_not_stalled(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("follow")
    syncs, progress = make_topics(pair, topic, 3)
    records = make_records(150, partitions=2, seed=4)  # partition 2 stays empty all along
    produce(src, topic, records[:100])
    # The stall timeout is far below the time the task follows: a partition at its end must not count as stalled.
    spec = replace(spec_for(src, dst, syncs, progress), follow_s=14.0, stall_timeout_s=3.0)
    ranges = [PartitionRange(topic, p, topic, 0, CAP) for p in range(3)]
    results: list[CopyResult] = []
    started = time.monotonic()
    task = threading.Thread(target=lambda: results.extend(run_task(spec, ranges)), daemon=True)
    task.start()
    poll_until(lambda: len(read_all(dst, topic)) == 100, 30, "the first 100 records on the target")
    produced_at = time.monotonic()
    produce(src, topic, records[100:])
    poll_until(lambda: len(read_all(dst, topic)) == 150, 30, "the 50 records written while the task runs")
    task.join(timeout=60)
    elapsed = time.monotonic() - started
    assert not task.is_alive()
    assert produced_at - started < spec.follow_s, "the second lot came after the task ended; the test proves nothing"
    assert elapsed >= spec.follow_s  # it followed to its deadline, idle for longer than the stall timeout

    source, target = read_all(src, topic), read_all(dst, topic)
    assert [same(r) for r in target] == [same(r) for r in source]
    ends = end_offsets(src, topic)
    assert {r.partition: r.next_offset for r in results} == ends == {0: 75, 1: 75, 2: 0}
    assert {r.partition: r.source_end for r in results} == ends  # the driver's lag comes from these
    assert sum(r.records for r in results) == 150
    assert read_progress("dst", {"bootstrap.servers": dst}, "src") == {(topic, 0): 74, (topic, 1): 74}


def test_a_following_task_ends_early_when_a_range_reaches_its_cap(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("capped")
    syncs, progress = make_topics(pair, topic, 2)
    produce(src, topic, make_records(100, partitions=1, seed=5))
    spec = replace(spec_for(src, dst, syncs, progress), follow_s=600.0)
    started = time.monotonic()
    results = run_task(spec, [PartitionRange(topic, 0, topic, 0, 40), PartitionRange(topic, 1, topic, 0, CAP)])
    # A backlog above the cap is the next job's: this one must not follow its idle partition for 10 minutes.
    assert time.monotonic() - started < 120
    assert {r.partition: (r.next_offset, r.records) for r in results} == {0: (40, 40), 1: (0, 0)}
    assert [r.offset for r in read_all(dst, topic)] == list(range(40))

"""A following batch copy task (continuous mode) against real brokers: it copies records written while it runs,
reports to the driver's endpoint every second, records progress every few seconds while it follows (so a task
whose process dies copies again at most that much), is not stalled by caught-up partitions, stops when its
generation ends, and a retried attempt resumes from the progress its predecessor recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from test_batch_copy import make_topics, run_task, same, spec_for

from mm2py.control.progress_store import read_progress, write_progress
from mm2py.engine.ranges import FOLLOW_END
from mm2py.engine.task_control import REQUEST_DEADLINE_S, FlowChannel, TaskControl
from mm2py.executor import driver_link
from mm2py.executor.batch_copy import copy_partitions
from mm2py.executor.contract import CopyResult, PartitionRange
from tests.harness.kafka_harness import ClusterFactory, TansuBroker, end_offsets, make_records, produce, read_all
from tests.harness.polling import poll_until

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    return kafka_cluster("src", "dst")


@pytest.fixture
def control() -> Any:
    endpoint = TaskControl("127.0.0.1")
    yield endpoint
    endpoint.close()


def following_task(
    src: str, dst: str, topics: tuple[str, str], channel: FlowChannel, topic: str, partitions: int
) -> tuple[threading.Thread, list[CopyResult]]:
    """A following task over every partition of ``topic`` (``topics``: its syncs and progress topics), reporting
    to ``channel``'s next generation, run in a thread as an executor runs it; its results once it ends."""
    # The stall timeout is far below the time the task follows: a partition at its end must not count as stalled.
    spec = replace(
        spec_for(src, dst, *topics),
        control=channel.next_generation(),
        stall_timeout_s=3.0,
        progress_interval_s=1.0,
    )
    ranges = [PartitionRange(topic, p, topic, 0, FOLLOW_END) for p in range(partitions)]
    results: list[CopyResult] = []
    task = threading.Thread(target=lambda: results.extend(run_task(spec, ranges)), daemon=True)
    task.start()
    return task, results


def test_a_following_task_copies_what_arrives_reports_it_and_stops_when_its_generation_ends(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str], control: TaskControl
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("follow")
    syncs, progress = make_topics(pair, topic, 3)
    records = make_records(150, partitions=2, seed=4)  # partition 2 stays empty all along
    produce(src, topic, records[:100])
    reported: list[dict[str, Any]] = []
    channel = control.channel("src->dst", lambda generation, rows, final: reported.extend(rows))
    task, results = following_task(src, dst, (syncs, progress), channel, topic, 3)
    poll_until(lambda: len(read_all(dst, topic)) == 100, 30, "the first 100 records on the target")
    poll_until(lambda: sum(r["records"] for r in reported) == 100, 10, "the reports counting them")
    # Progress is recorded while the task follows, not only when it ends.
    poll_until(
        lambda: read_progress("dst", {"bootstrap.servers": dst}, "src") == {(topic, 0): 49, (topic, 1): 49},
        10,
        "progress",
    )
    produce(src, topic, records[100:])
    poll_until(lambda: len(read_all(dst, topic)) == 150, 30, "the 50 records written while the task runs")
    assert task.is_alive()  # idle far longer than the stall timeout, and still following
    channel.end()
    task.join(timeout=30)
    assert not task.is_alive(), "the task did not stop at the end of its generation"

    source, target = read_all(src, topic), read_all(dst, topic)
    assert [same(r) for r in target] == [same(r) for r in source]
    ends = end_offsets(src, topic)
    assert {r.partition: r.next_offset for r in results} == ends == {0: 75, 1: 75, 2: 0}
    assert {r.partition: r.source_end for r in results} == ends
    assert sum(r["records"] for r in reported) == 150  # the final report counted what the others had not
    assert read_progress("dst", {"bootstrap.servers": dst}, "src") == {(topic, 0): 74, (topic, 1): 74}


def test_a_following_task_copies_on_while_its_driver_holds_a_report(
    pair: dict[str, TansuBroker],
    unique_topic: Callable[..., str],
    control: TaskControl,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver may take a while to answer (it lists the source's ends before it applies a position beyond the
    last it saw); records written meanwhile are copied before the answer comes, and the answer still counts."""
    monkeypatch.setattr(driver_link, "_TIMEOUT_S", 30.0)  # the held report is waited for, never given up
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("held")
    syncs, progress = make_topics(pair, topic, 2)
    records = make_records(100, partitions=2, seed=5)
    holding, release, answered = threading.Event(), threading.Event(), threading.Event()
    reported: list[dict[str, Any]] = []

    def on_report(generation: int, rows: list[dict[str, Any]], final: bool) -> None:
        reported.extend(rows)
        if not final and not holding.is_set():
            holding.set()
            release.wait(REQUEST_DEADLINE_S - 1)  # the endpoint cuts a request at its deadline
            answered.set()

    channel = control.channel("src->dst", on_report)
    task, _results = following_task(src, dst, (syncs, progress), channel, topic, 2)
    try:
        poll_until(holding.is_set, 30, "the driver to hold the task's first report")
        produce(src, topic, records)
        poll_until(lambda: len(read_all(dst, topic)) == 100, 30, "the records written while the report is held")
        assert not answered.is_set(), "the records were copied only once the driver answered"
    finally:
        release.set()
    channel.end()
    task.join(timeout=30)
    assert not task.is_alive(), "the task did not stop at the end of its generation"
    assert [same(r) for r in read_all(dst, topic)] == [same(r) for r in read_all(src, topic)]
    assert sum(r["records"] for r in reported) == 100  # the held report's rows and the later ones, each once


def test_a_retried_attempt_resumes_after_the_progress_its_predecessor_recorded(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("retried")
    syncs, progress = make_topics(pair, topic, 1)
    produce(src, topic, make_records(100, partitions=1, seed=5))
    spec = spec_for(src, dst, syncs, progress)
    # The first attempt copied 0..59 and recorded it, then its executor was lost.
    run_task(spec, [PartitionRange(topic, 0, topic, 0, 60)])
    write_progress("dst", {"bootstrap.servers": dst}, "src", {(topic, 0): 59})
    results = list(copy_partitions(spec, iter([PartitionRange(topic, 0, topic, 0, 100)]), attempt=1))
    assert [(r.next_offset, r.records) for r in results] == [(100, 40)]
    assert [r.offset for r in read_all(dst, topic)] == list(range(100))  # nothing copied twice


def test_a_retried_attempt_whose_predecessor_copied_a_range_to_its_end_finishes_without_copying_it_again(
    pair: dict[str, TansuBroker], unique_topic: Callable[..., str]
) -> None:
    """An executor lost after its task recorded the progress of a whole range, before the task returned: the next
    attempt must count that range as done (it used to fetch past its end for ever, and the job never ended)."""
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    topic = unique_topic("retried-done")
    syncs, progress = make_topics(pair, topic, 2)
    produce(src, topic, make_records(100, partitions=2, seed=6))
    spec = spec_for(src, dst, syncs, progress)
    run_task(spec, [PartitionRange(topic, 0, topic, 0, 50), PartitionRange(topic, 1, topic, 0, 20)])
    write_progress("dst", {"bootstrap.servers": dst}, "src", {(topic, 0): 49, (topic, 1): 19})
    results: list[CopyResult] = []
    ranges = [PartitionRange(topic, 0, topic, 0, 50), PartitionRange(topic, 1, topic, 0, 50)]

    def retried() -> None:
        results.extend(copy_partitions(spec, iter(ranges), attempt=1))

    task = threading.Thread(target=retried, daemon=True)
    task.start()
    task.join(timeout=60)
    assert not task.is_alive(), "the retried attempt never finished the range its predecessor had copied"
    assert [(r.partition, r.start, r.next_offset, r.records, r.error) for r in results] == [
        (0, 50, 50, 0, None),
        (1, 20, 50, 30, None),
    ]
    copied = read_all(dst, topic)
    assert sorted((r.partition, r.offset) for r in copied) == [(0, o) for o in range(50)] + [(1, o) for o in range(50)]

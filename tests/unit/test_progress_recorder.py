"""The batch path's at-least-once recording (executor/batch_results.py ProgressRecorder, through
executor/control_writes.py) against fake clusters (tests/harness/fake_cluster.py): progress and offset syncs go
through the batch path's own client, the syncs of the new records are acknowledged before the progress that covers
them is written, and a failed sync write leaves the progress unwritten. ``failover`` counts the records B holds
past the progress from the syncs; progress past the syncs would make its recovery point short (the unplanned-
failover test caught that once, only when a kill landed between the two writes: this pins the order without the
kill)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from mm2py.client_settings import ClientSettings
from mm2py.errors import ReplicationError
from mm2py.executor.batch_producer import producer_ids
from mm2py.executor.batch_results import RANGES_PER_TURN, BatchRange, Counted, ProgressRecorder
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.executor.control_writes import ControlWrites, ProgressLayout, SourceSyncs
from mm2py.mirror.offset_syncs import Run
from mm2py.mirror.progress import progress_of
from mm2py.mirror.record_formats import OffsetSync
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import split_batches
from mm2py.wire.errors import NOT_ENOUGH_REPLICAS, TOPIC_AUTHORIZATION_FAILED, WireError
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue
from tests.harness.fake_cluster import FakeCluster
from tests.unit.test_sender import source_batches

NOWHERE = ClientSettings(bootstrap_servers=())  # never connected to

SYNCS = "mm2-offset-syncs.target.internal"
PROGRESS = "mm2-offsets.dc1.internal"


def spec(**changes: object) -> CopySpec:
    base = CopySpec(
        flow="dc1->target",
        source="dc1",
        target="target",
        consumer_settings={},
        producer_settings={},
        syncs_producer_settings={},
        target_consumer_settings={},
        consumer_connection=NOWHERE,
        producer_connection=NOWHERE,
        syncs_producer_connection=NOWHERE,
        target_consumer_connection=NOWHERE,
        syncs_topic=SYNCS,
        progress_topic=PROGRESS,
        offset_lag_max=100,
        dense_offset_syncs=False,
        flush_timeout_s=60.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


class Task:
    """A task's two clusters and its recorder, wired as batch_copy wires them."""

    def __init__(self, spec: CopySpec, partitions: int = 2) -> None:
        self.spec = spec
        self.source, self.target = FakeCluster(alias="dc1"), FakeCluster(alias="target")
        self.source.create(SYNCS, 1)
        self.target.create(SYNCS, 1)
        self.target.create(PROGRESS, 5)
        self.target.create("dc1.orders", partitions)
        self.ranges = [
            BatchRange(PartitionRange("orders", p, "dc1.orders", 0, 300), FetchPartition("orders", p, 0, 300),
                       PartitionQueue("dc1.orders", p, f"partition={p}"))
            for p in range(partitions)
        ]  # fmt: skip
        layout = ProgressLayout(spec, self.target, [r.rng for r in self.ranges], 10)
        self.source_syncs = SourceSyncs(spec, connect=lambda: self.source)
        self.producer = producer_ids(spec, self.target)
        self.writes = ControlWrites(spec, layout, self.source_syncs, self.target, self.producer)
        self.recorder = ProgressRecorder(spec, self.ranges, progress=True)
        self.last: dict[int, Counted] = {}  # what the last recording counted

    def counted(self, upstream: int) -> dict[int, Counted]:
        """Every range's records 0..upstream acknowledged at the same offsets."""
        return {
            id(r): Counted(upstream=upstream, records=upstream + 1, runs=[Run(0, 0, upstream + 1)]) for r in self.ranges
        }

    def record(self, upstream: int) -> None:
        self.last = self.counted(upstream)
        self.recorder.record(self.last, self.writes)


def records(cluster: FakeCluster, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    out = []
    for key in sorted(k for k in cluster.partitions if k[0] == topic):
        for _base, raw in cluster.partitions[key].records():
            for batch in split_batches(raw).batches:
                out.extend((r.key, r.value) for r in decode_records(batch))
    return out


def produced(cluster: FakeCluster, topic: str) -> list[int]:
    """The indexes in ``cluster.requests`` of the Produce requests that carried ``topic``."""
    return [
        i
        for i, (_t, kind, _n, keys) in enumerate(cluster.requests)
        if kind == "produce" and any(k[0] == topic for k in keys)
    ]


def test_syncs_on_the_target_are_acknowledged_before_the_progress_they_cover_is_written() -> None:
    task = Task(spec(syncs_on_target=True))
    task.record(99)

    syncs, progress = produced(task.target, SYNCS), produced(task.target, PROGRESS)
    assert syncs and progress and max(syncs) < min(progress)
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 99, ("orders", 1): 99}
    syncs_written = [OffsetSync.from_record(k, v) for k, v in records(task.target, SYNCS)]
    for r in task.ranges:
        mine = [(s.upstream_offset, s.downstream_offset) for s in syncs_written if s.partition == r.rng.partition]
        assert mine[0] == (0, 0) and mine[-1] == (99, 99) and task.recorder.syncs[id(r)] == len(mine)


def test_syncs_go_to_the_source_through_a_producer_of_their_own_and_only_what_is_new_is_written_again() -> None:
    task = Task(spec())
    task.record(99)
    task.record(99)  # nothing new: nothing written
    task.record(199)

    assert [k for k, _v in records(task.source, SYNCS)] and not records(task.target, SYNCS)
    assert len(records(task.target, PROGRESS)) == 4  # two partitions, two recordings with something new
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 199, ("orders", 1): 199}


def test_syncs_the_source_refuses_leave_the_progress_unwritten_and_name_the_refusal() -> None:
    task = Task(spec())
    task.source.inject = lambda kind, node, key: WireError(TOPIC_AUTHORIZATION_FAILED) if kind == "produce" else None

    with pytest.raises(
        ReplicationError, match=rf"offset syncs.*{SYNCS}-0 on dc1 failed.*TOPIC_AUTHORIZATION"
    ) as refused:
        task.record(99)

    assert refused.value.failure.code == "TOPIC_AUTHORIZATION_FAILED" and not refused.value.failure.retriable
    assert not produced(task.target, PROGRESS)


def test_recording_at_the_end_of_a_failed_task_sends_none_of_the_copied_records_still_queued() -> None:
    """What counts as copied is counted before the recording: a copied record sent while progress is written
    would land on the target uncounted, and the retried range would copy it twice."""
    task = Task(spec(syncs_on_target=True), partitions=1)
    queued: TopicPartition = ("dc1.orders", 0)
    batches = source_batches(3)
    for batch in batches:
        batch.created = time.monotonic()  # as Sender.add stamps it (ControlWrites' senders keep real time)
    task.ranges[0].queue.unsent.extend(batches)

    task.record(99)

    assert not produced(task.target, queued[0]) and len(task.ranges[0].queue.unsent) == 3


def test_a_failed_progress_write_is_written_again_at_the_next_recording_under_a_new_producer_id() -> None:
    """The sender of a failed write is dropped (its partition stopped), as the record path replaces a producer
    that failed a delivery: the next recording writes the same progress again, and the task goes on."""
    task = Task(spec())
    task.target.inject = lambda kind, node, key: (
        WireError(TOPIC_AUTHORIZATION_FAILED) if kind == "produce" and key[0] == PROGRESS else None
    )
    with pytest.raises(ReplicationError, match="progress"):
        task.record(99)
    assert not records(task.target, PROGRESS)

    task.target.inject = lambda kind, node, key: None
    task.record(99)

    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 99, ("orders", 1): 99}
    writers = {pid for key, pid, _epoch, _seq in task.target.produced_batches if key[0] == PROGRESS}
    assert writers and task.producer.producer_id not in writers
    assert len(records(task.source, SYNCS)) == sum(task.recorder.syncs.values())  # the syncs were not written twice


def meanwhile(task: Task, upstream: int, quiet: int | None = None) -> None:
    """A recording made while the task copies on, served as the copy loop serves it: a turn at a time, with the
    loop's own sender waiting on the clusters in between. Partition ``quiet`` is counted as it last was."""
    counted = task.counted(upstream)
    if quiet is not None:
        counted[id(task.ranges[quiet])] = task.last[id(task.ranges[quiet])]
    task.last = counted
    task.recorder.start(counted, task.writes)
    deadline = time.monotonic() + 30
    while task.recorder.pending is not None:
        assert time.monotonic() < deadline, "the recording never ended"
        task.source.poll(0.01)
        task.target.poll(0.01)
        task.recorder.step()


def test_a_recording_that_fails_while_copying_goes_on_is_made_again_with_the_same_syncs_due(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The source stalls past the syncs producer's delivery.timeout.ms: the recording made while the task copies
    is logged and given up (Connect's source task goes on when its offsets fail to flush), and the next one
    writes the syncs MM2's rule made due the first time, then the progress; a refusal still stops the task."""
    quick = spec(syncs_producer_connection=dataclasses.replace(NOWHERE, delivery_timeout_ms=300))
    task = Task(quick)
    task.record(99)
    task.source.inject = lambda kind, node, key: WireError(NOT_ENOUGH_REPLICAS) if kind == "produce" else None

    meanwhile(task, 199)

    assert "recording progress failed" in caplog.text
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 99, ("orders", 1): 99}
    task.source.inject = lambda kind, node, key: None
    meanwhile(task, 199)
    undisturbed = Task(quick)
    undisturbed.record(99)
    meanwhile(undisturbed, 199)
    assert records(task.source, SYNCS) == records(undisturbed.source, SYNCS)
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 199, ("orders", 1): 199}

    task.target.inject = lambda kind, node, key: WireError(TOPIC_AUTHORIZATION_FAILED) if kind == "produce" else None
    with pytest.raises(ReplicationError, match="TOPIC_AUTHORIZATION_FAILED"):
        meanwhile(task, 299)


def test_a_recording_made_while_copying_goes_on_never_waits_for_the_target() -> None:
    """The target answers nothing (its brokers frozen): starting a recording and serving it returns at once,
    without waiting on the target's connection (the fake's clock moves only when a client waits on it), so the
    copy loop goes on resending its own batches; once the target answers, the loop's turns finish the
    recording, syncs first. A recording at the end of the task then finishes one still in flight first."""
    task = Task(spec(syncs_on_target=True))
    for node in task.target.brokers():
        task.target.stop(node)
    frozen_at = task.target.now

    task.recorder.start(task.counted(99), task.writes)
    for _ in range(50):
        task.recorder.step()

    assert task.target.now == frozen_at and task.recorder.pending is not None
    assert not records(task.target, PROGRESS)
    for node in task.target.brokers():
        task.target.resume(node)
    deadline = time.monotonic() + 30
    while task.recorder.pending is not None:
        assert time.monotonic() < deadline, "the recording never ended"
        task.target.poll(0.01)
        task.recorder.step()
    syncs, progress = produced(task.target, SYNCS), produced(task.target, PROGRESS)
    assert syncs and progress and max(syncs) < min(progress)
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 99, ("orders", 1): 99}

    task.recorder.start(task.counted(199), task.writes)
    task.record(299)
    assert task.recorder.pending is None
    assert progress_of(records(task.target, PROGRESS), "dc1") == {("orders", 0): 299, ("orders", 1): 299}


def test_a_recording_of_many_partitions_is_built_a_slice_at_a_time_between_the_copy_loop_s_turns() -> None:
    """Building the records of 400 partitions at once held the copy loop 20-80 ms: a recording started while the
    task copies on builds ``RANGES_PER_TURN`` partitions per turn (the loop's sender steps in between), and the
    records it writes in the end are the same."""
    task = Task(spec(syncs_on_target=True), partitions=2 * RANGES_PER_TURN + 50)
    asked = len(task.target.requests)
    task.recorder.start(task.counted(9), task.writes)  # the first turn: the first slice
    turns = 1
    while len(task.target.requests) == asked and turns < 20:
        task.recorder.step()  # a slice a turn, nothing asked of the target until every partition is built
        turns += 1
    # 250 partitions: three slices of syncs, three of progress, the last turn's slice then writes the syncs
    assert turns == 5 and task.recorder.pending is not None, turns
    deadline = time.monotonic() + 30
    while task.recorder.pending is not None:
        assert time.monotonic() < deadline, "the recording never ended"
        task.target.poll(0.01)
        task.recorder.step()
    expected = {("orders", p): 9 for p in range(2 * RANGES_PER_TURN + 50)}
    assert progress_of(records(task.target, PROGRESS), "dc1") == expected


def _syncs(cluster: FakeCluster, topic: str = SYNCS) -> list[tuple[int, int, int]]:
    """(partition, upstream, downstream) of each sync ``topic`` holds, in order."""
    return [
        (sync.partition, sync.upstream_offset, sync.downstream_offset)
        for sync in (OffsetSync.from_record(k, v) for k, v in records(cluster, topic))
    ]


def test_mm2s_delayed_syncs_go_out_at_its_commit_cadence_while_the_dense_topic_gets_every_run_end() -> None:
    """MM2 sends a partition's newest not-yet-due sync at each commit (``offset.flush.interval.ms``), not at each
    record: a following task records progress every second, and its recordings in between send MM2's topic only
    the syncs MM2's rule makes due (here the first record of each partition), while mm2py's dense topic gets each
    run's last record every time. At the next commit (or the task's end) each partition's newest record is synced,
    a partition with nothing new since included; a newest record whose sync is due drops the delayed one."""
    dense = "mm2py-offset-syncs-dense.target.internal"
    task = Task(spec(dense_syncs_topic=dense, offset_flush_interval_s=3600.0))
    task.source.create(dense, 1)
    meanwhile(task, 49)
    assert _syncs(task.source) == [(0, 0, 0), (1, 0, 0)]  # due: each partition's first record
    assert _syncs(task.source, dense) == [(0, 0, 0), (0, 49, 49), (1, 0, 0), (1, 49, 49)]
    meanwhile(task, 79, quiet=1)
    assert _syncs(task.source) == [(0, 0, 0), (1, 0, 0)]
    task.recorder.next_commit = 0.0  # offset.flush.interval.ms has passed
    meanwhile(task, 89, quiet=1)  # partition 1 has had nothing new since its record 49
    assert _syncs(task.source)[2:] == [(0, 89, 89), (1, 49, 49)]
    meanwhile(task, 99)  # the interval starts again: nothing delayed goes out
    assert len(_syncs(task.source)) == 4
    task.record(150)  # the task's end is a commit; each partition's 101 is due (offset.lag.max = 100 after 0)
    assert _syncs(task.source)[4:] == [(0, 101, 101), (1, 101, 101), (0, 150, 150), (1, 150, 150)]

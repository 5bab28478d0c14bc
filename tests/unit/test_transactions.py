"""Exactly-once on the batch path against a fake cluster of three brokers with a transaction coordinator
(tests/harness/fake_cluster.py): fencing, commit and abort as a read_committed consumer sees them, the Java
TransactionManager's retries, and a copy task's transactions holding its records and their progress together."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mm2py.client_settings import ClientSettings
from mm2py.control.fencing import SlotEpochs
from mm2py.errors import Failure
from mm2py.executor.batch_results import BatchRange, Counted
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.executor.control_writes import ProgressLayout
from mm2py.executor.transactional_copy import TransactionalCopy
from mm2py.mirror.progress import progress_record
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import RecordBatch, split_batches
from mm2py.wire.cluster import ProducerIds
from mm2py.wire.errors import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    NOT_ENOUGH_REPLICAS,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCER_FENCED,
    WireError,
)
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import PartitionQueue
from mm2py.wire.sender import Sender, SenderSettings
from mm2py.wire.transactions import TransactionError, TransactionManager
from tests.harness.fake_cluster import FakeCluster
from tests.unit.test_sender import exactly_once_in_order, source_batches

NOWHERE = ClientSettings(bootstrap_servers=())  # never connected to

TOPIC = "dc1.orders"
PROGRESS = "mm2-offsets.dc1.internal"


def cluster() -> FakeCluster:
    c = FakeCluster()
    c.create(TOPIC, 2)
    c.create(PROGRESS, 5)
    c.create("__transaction_state", 1)
    return c


def visible(c: FakeCluster, key: TopicPartition) -> list[int]:
    """The source offsets a read_committed consumer reads from a target partition."""

    return [
        int(r.value or b"")
        for _b, raw in c.committed(key)
        for b in split_batches(raw).batches
        for r in decode_records(b)
    ]


def transactional_sender(c: FakeCluster, txn: TransactionManager, ids: ProducerIds) -> tuple[Sender, PartitionQueue]:
    q = PartitionQueue(TOPIC, 0, "partition=0")
    settings = SenderSettings("dc1->target", "target", transactional_id=txn.transactional_id)
    return Sender(c, [q], settings, ids, clock=c.clock), q


def drain(sender: Sender) -> None:
    for _ in range(100_000):
        if not sender.busy():
            return
        sender.step()
    raise AssertionError("the sender did not drain")


def test_committed_batches_are_read_committed_and_aborted_ones_never() -> None:
    c = cluster()
    txn = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    sender, q = transactional_sender(c, txn, txn.initialize(10))
    txn.add([q.key], 10)
    sender.add(q.key, source_batches(3))
    drain(sender)
    assert visible(c, q.key) == []  # open: nothing is read_committed yet
    txn.commit(10)
    assert visible(c, q.key) == list(range(30))
    txn.add([q.key], 10)
    sender.add(q.key, source_batches(2, first=30))
    drain(sender)
    txn.abort(10)
    assert visible(c, q.key) == list(range(30))
    assert all(RecordBatch(memoryview(raw)).is_transactional for _o, raw in c.partitions[q.key].records())


def test_a_successor_fences_its_predecessor_and_aborts_its_open_transaction() -> None:
    c = cluster()
    first = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    sender, q = transactional_sender(c, first, first.initialize(10))
    first.add([q.key], 10)
    sender.add(q.key, source_batches(4))
    drain(sender)  # written, not committed: then the task dies
    second = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    ids = second.initialize(10)
    # Kafka's coordinator answers an InitProducerId that finds a transaction open by fencing its epoch (+1) and
    # aborting it, CONCURRENT_TRANSACTIONS; the retry bumps again (+2).
    assert first.producer is not None and ids.epoch == first.producer.epoch + 2
    assert visible(c, q.key) == []  # the predecessor's open transaction was aborted
    with pytest.raises(TransactionError) as caught:
        first.commit(10)
    assert caught.value.fenced and not caught.value.retriable


def test_concurrent_transactions_is_retried_until_the_previous_transaction_completed() -> None:
    c = cluster()
    tries: list[float] = []

    def busy(kind: str, node: int, key: TopicPartition) -> WireError | None:
        if kind == "add_partitions_to_txn" and len(tries) < 3:
            tries.append(c.now)
            return WireError(CONCURRENT_TRANSACTIONS)
        return None

    c.inject = busy
    txn = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    txn.initialize(10)
    txn.add([(TOPIC, 0)], 10)
    assert len(tries) == 3 and txn.partitions == {(TOPIC, 0)}


def test_a_killed_coordinator_is_looked_up_again_and_the_commit_goes_through() -> None:
    c = cluster()
    txn = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    sender, q = transactional_sender(c, txn, txn.initialize(10))
    txn.add([q.key], 10)
    sender.add(q.key, source_batches(5))
    drain(sender)
    old = c.partitions[("__transaction_state", 0)].leader
    c.kill(old)  # the coordinator's node: after the session timeout another replica coordinates
    txn.commit(60)
    assert txn.coordinator != old
    exactly_once_in_order(c, q.key, 50)
    assert visible(c, q.key) == list(range(50))


def test_a_transactional_sender_never_renumbers_inside_a_transaction() -> None:
    """A broker that lost the sequence inside a transaction: Java aborts (an abortable error); renumbering under a
    new epoch inside the transaction would commit some batches twice or not at all."""
    c = cluster()
    gaps: list[TopicPartition] = []

    def gap(kind: str, node: int, key: TopicPartition) -> WireError | None:
        if kind == "produce" and len(c.produced_batches) == 2 and not gaps:
            gaps.append(key)
            return WireError(OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    c.inject = gap
    txn = TransactionManager(c, "dc1-mm2-MirrorSourceConnector-0", clock=c.clock)
    sender, q = transactional_sender(c, txn, txn.initialize(10))
    sender.settings = SenderSettings("dc1->target", "target", max_in_flight=1, transactional_id=txn.transactional_id)
    txn.add([q.key], 10)
    sender.add(q.key, source_batches(5))
    drain(sender)
    assert q.failure is not None and sender.epoch_bumps == 0


# -- a copy task's transactions ---------------------------------------------------------------------------


def spec() -> CopySpec:
    return CopySpec(
        flow="dc1->target",
        source="dc1",
        target="target",
        consumer_settings={},
        producer_settings={},
        syncs_producer_settings=None,
        target_consumer_settings={},
        consumer_connection=NOWHERE,
        producer_connection=NOWHERE,
        syncs_producer_connection=None,
        target_consumer_connection=NOWHERE,
        syncs_topic=None,
        progress_topic=PROGRESS,
        offset_lag_max=100,
        exactly_once=True,
        exactly_once_slots=1,
    )


def job_spec(c: FakeCluster, epochs: SlotEpochs | None = None) -> CopySpec:
    """The spec of a job whose slot's epoch the driver initialized, as it does before every job."""
    if epochs is None:
        epochs = SlotEpochs("dc1->target", "dc1", lambda: c)
        epochs.take_over(1)
    return replace(spec(), slot_producers=epochs.next_job(1))


def copy_ranges(partitions: int) -> list[BatchRange]:
    return [
        BatchRange(
            PartitionRange("orders", p, TOPIC, 0, 300),
            FetchPartition("orders", p, 0, 300),
            PartitionQueue(TOPIC, p, f"topic=orders partition={p}"),
        )
        for p in range(partitions)
    ]


def eos_task(spec: CopySpec, c: FakeCluster, ranges: list[BatchRange]) -> TransactionalCopy:
    layout = ProgressLayout(spec, c, [r.rng for r in ranges], 10)
    return TransactionalCopy(spec, c, ranges, layout, clock=c.clock)


def test_each_commit_holds_the_ranges_records_and_their_progress_together() -> None:
    c = cluster()
    task = eos_task(job_spec(c), c, copy_ranges(2))
    producer = task.initialize()
    ranges = task.ranges
    sender = Sender(
        c,
        [r.queue for r in ranges] + task.queues(),
        SenderSettings("dc1->target", "target", transactional_id=task.transactional_id),
        producer,
        clock=c.clock,
    )
    for round_ in range(3):
        for r in ranges:
            sender.add(r.queue.key, source_batches(10, first=round_ * 100))
            r.fetched_to = (round_ + 1) * 100
        task.before_step(sender, 10)
        drain(sender)
        task.commit(sender, 10)
    for r in ranges:
        assert visible(c, r.queue.key) == list(range(300))
        assert task.committed[id(r)].upstream == 299 and task.committed[id(r)].next_offset == 300
    progress = [raw for key in c.partitions if key[0] == PROGRESS for _o, raw in c.committed(key)]
    keys = {progress_record("dc1", "orders", p, 0).key for p in range(2)}

    last = {}
    for raw in progress:
        for b in split_batches(raw).batches:
            for rec in decode_records(b):
                assert rec.key in keys
                last[rec.key] = rec.value
    assert last == {
        progress_record("dc1", "orders", p, 299).key: progress_record("dc1", "orders", p, 299).value for p in range(2)
    }
    assert task.txn.commits == 3


def test_a_task_killed_mid_transaction_counts_only_what_it_committed() -> None:
    c = cluster()
    epochs = SlotEpochs("dc1->target", "dc1", lambda: c)
    epochs.take_over(1)
    task = eos_task(job_spec(c, epochs), c, copy_ranges(1))
    producer = task.initialize()
    (r,) = task.ranges
    sender = Sender(
        c,
        [r.queue, *task.queues()],
        SenderSettings("a", "b", transactional_id=task.transactional_id),
        producer,
        clock=c.clock,
    )
    sender.add(r.queue.key, source_batches(10))
    r.fetched_to = 100
    task.before_step(sender, 10)
    drain(sender)
    task.commit(sender, 10)
    sender.add(r.queue.key, source_batches(10, first=100))
    task.before_step(sender, 10)
    drain(sender)  # acknowledged, then the task is killed before its commit
    successor = eos_task(job_spec(c, epochs), c, copy_ranges(1))  # the next job
    successor.initialize()
    assert visible(c, r.queue.key) == list(range(100))
    assert task.committed[id(r)].upstream == 99 and r.queue.acked_upstream == 199


@pytest.mark.parametrize("kind", [INVALID_PRODUCER_EPOCH, PRODUCER_FENCED])
def test_a_partition_stopped_by_a_fenced_producer_reports_the_task_failure_naming_the_id(kind: object) -> None:
    """A produce answered INVALID_PRODUCER_EPOCH (another producer initialized the transactional.id while a
    transaction was open) stops the partition, but the cause is the task's: its failure, which names the id
    taken over, is what the range reports, and a following task's report does not name the partition's."""
    fenced, own = copy_ranges(2)
    fenced.queue.failure = WireError(kind, "node 1")  # type: ignore[arg-type]
    own.queue.failure = WireError(NOT_ENOUGH_REPLICAS, "node 1")
    task = Failure("flow=dc1->target: fenced: another producer took transactional.id x over", retriable=False)
    counted = Counted(-1, 0, 0, [], -1)
    assert fenced.own_failure(exactly_once=True) is None
    # at-least-once nothing fails the task for it: the partition's report must name it
    assert fenced.own_failure(exactly_once=False) is fenced.queue.failure
    assert fenced.failure(spec(), task, counted) == task
    # without a task failure the partition's own answer is still named, never nothing
    failure = fenced.failure(spec(), None, counted)
    assert failure is not None and kind.message in failure.message  # type: ignore[attr-defined]
    assert own.own_failure(exactly_once=True) is own.queue.failure
    own_failure = own.failure(spec(), task, counted)
    assert own_failure is not None and "NOT_ENOUGH_REPLICAS" in own_failure.message
    # the fenced task stops the fetch side of its partitions too: that is the task's failure as well
    (stopped,) = copy_ranges(1)
    stopped.fetch.failure = WireError(kind, "node 1")  # type: ignore[arg-type]
    assert stopped.failure(spec(), task, counted) == task

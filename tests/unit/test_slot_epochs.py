"""The driver's hold on its exactly-once producer epochs (control.fencing.SlotEpochs) against a fake cluster whose
coordinator follows Kafka's InitProducerId rules: each job's tasks write with an epoch the driver bumped for it;
another producer that initialized an id between two jobs stops the flow instead of being fenced back; a task
that died inside a transaction leaves nothing visible and no zombie that can commit."""

from __future__ import annotations

import pytest

from mm2py.control.fencing import SlotEpochs
from mm2py.errors import ReplicationError
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import ProducerIds
from mm2py.wire.partition_queue import PartitionQueue
from mm2py.wire.sender import Sender, SenderSettings
from mm2py.wire.transactions import TransactionError, TransactionManager
from tests.harness.fake_cluster import FakeCluster
from tests.unit.test_sender import source_batches
from tests.unit.test_transactions import TOPIC, cluster, drain, visible

ID = "dc1-mm2-MirrorSourceConnector-0"


def epochs_of(c: FakeCluster) -> SlotEpochs:
    return SlotEpochs("dc1->target", "dc1", lambda: c, timeout_s=10)


def task_writes(
    c: FakeCluster, producer: tuple[int, int], *, commit: bool
) -> tuple[TransactionManager, TopicPartition]:
    """A job's task for slot 0: writes 40 records with the driver's epoch, commits them or dies before that."""
    txn = TransactionManager(c, ID, clock=c.clock)
    txn.adopt(ProducerIds(*producer))
    q = PartitionQueue(TOPIC, 0, "topic=orders partition=0")
    sender = Sender(c, [q], SenderSettings("a", "b", transactional_id=ID), ProducerIds(*producer), clock=c.clock)
    txn.add([q.key], 10)
    sender.add(q.key, source_batches(4, first=len(c.committed(q.key)) * 10))
    drain(sender)
    if commit:
        txn.commit(10)
    return txn, q.key


def test_every_job_gets_a_new_epoch_and_the_previous_jobs_task_is_fenced() -> None:
    c = cluster()
    epochs = epochs_of(c)
    epochs.take_over(2)
    first = epochs.next_job(2)
    task, key = task_writes(c, first[0], commit=True)
    second = epochs.next_job(2)
    assert {s: e for s, (_p, e) in second.items()} == {s: e + 1 for s, (_p, e) in first.items()}
    assert [p for p, _e in second.values()] == [p for p, _e in first.values()]  # same ids, same producer ids
    with pytest.raises(TransactionError) as zombie:  # the previous job's task, were it still alive
        task.add([key], 10)
    assert zombie.value.fenced
    assert visible(c, key) == list(range(40))


def test_another_producer_that_took_an_id_between_jobs_stops_the_flow_and_keeps_it() -> None:
    c = cluster()
    epochs = epochs_of(c)
    epochs.take_over(1)
    ours = epochs.next_job(1)
    task_writes(c, ours[0], commit=True)
    mirror_maker = TransactionManager(c, ID, clock=c.clock)
    theirs = mirror_maker.initialize(10)  # MM2 started on the same flow: its task initializes the id
    with pytest.raises(ReplicationError, match=f"fenced: another producer initialized transactional.id {ID}") as e:
        epochs.next_job(1)
    assert not e.value.retriable
    # The other producer was not fenced back: it still writes and commits with its epoch.
    assert c.transactions[ID].epoch == theirs.epoch
    mirror_maker.add([(TOPIC, 0)], 10)
    mirror_maker.commit(10)


def test_a_task_that_died_inside_its_transaction_is_aborted_before_the_next_job() -> None:
    c = cluster()
    epochs = epochs_of(c)
    epochs.take_over(1)
    task_writes(c, epochs.next_job(1)[0], commit=True)
    dead, key = task_writes(c, epochs.next_job(1)[0], commit=False)  # the task's process dies mid-transaction
    assert c.transactions[ID].partitions  # left open
    third = epochs.next_job(1)  # not PRODUCER_FENCED: the driver aborted it before bumping the epoch it held
    assert not c.transactions[ID].partitions
    assert visible(c, key) == list(range(40))  # the dead task's records were aborted
    with pytest.raises(TransactionError):
        dead.commit(10)
    task_writes(c, third[0], commit=True)
    assert visible(c, key) == list(range(80))


def test_a_slot_count_grown_since_the_start_takes_the_new_id_over() -> None:
    c = cluster()
    epochs = epochs_of(c)
    epochs.take_over(1)
    assert sorted(epochs.next_job(3)) == [0, 1, 2]
    assert sorted(c.transactions) == [f"dc1-mm2-MirrorSourceConnector-{s}" for s in range(3)]


def test_another_producer_initializing_right_after_the_drivers_abort_is_not_fenced_back() -> None:
    """The InitProducerId that bumps the epoch expects the one the driver holds: an initialization by another
    producer that lands between the driver's EndTxn and that request makes it PRODUCER_FENCED, not a takeover."""
    c = cluster()
    epochs = epochs_of(c)
    epochs.take_over(1)
    epochs.next_job(1)
    landed: list[int] = []

    def mirror_maker_starts(kind: str, node: int, key: TopicPartition) -> None:
        if kind == "end_txn" and not landed:  # the driver's abort has been checked: now MM2's task initializes
            txn = c.transactions[ID]
            txn.epoch, txn.last_epoch = txn.epoch + 1, -1
            landed.append(txn.epoch)

    c.inject = mirror_maker_starts
    with pytest.raises(ReplicationError, match="fenced"):
        epochs.next_job(1)
    assert landed and c.transactions[ID].epoch == landed[0]  # the other producer keeps the id

"""Zombie fencing for exactly-once (driver side): before a flow copies, no earlier producer of its
transactional.ids can commit any more; on the batch path, also before each of its jobs, and no other producer
has taken them.

Why: each Spark task slot copies its partitions under one transactional.id (``<source>-mm2-MirrorSourceConnector-
<slot>``, MM2's own naming, :meth:`CopySpec.slot_transactional_id`), on either copy path, and a partition's slot
is a hash of it modulo the slot count. When the slot count changes (a run with more or fewer Spark task slots) a
partition can move to another id, and a zombie of the old one could still commit it. So, as Kafka Connect does
for KIP-618 (the leader fences the producers of every task of the previous generation before new tasks start),
the driver first fences every id of every slot count the flow ran with — the largest is recorded beside the
progress, in ``mm2-offsets.<source>.internal``, under a key of mm2py's own that MM2 ignores — and of MM2's
``tasks.max``, so MirrorMaker 2 tasks of the same flow are fenced too when mm2py takes it over.

On the batch path the driver then holds each slot's producer id and epoch (:class:`SlotEpochs`) and the tasks
write with the epoch it gives them; they never initialize an id themselves. Before every job it aborts what a
task of the previous job may have left open and bumps the epoch with an InitProducerId that *expects* the epoch
it holds (KIP-360): a zombie task of the previous job is fenced, and if another producer initialized the id
meanwhile (MirrorMaker 2 started on the same flow) the coordinator answers PRODUCER_FENCED and the flow stops.
That is Kafka's rule (the Java TransactionManager treats PRODUCER_FENCED as fatal; Connect fails a fenced task): a
run whose tasks each took their id back at the next job would copy beside the other producer, whose other tasks
it never fences. On the record path the driver fences with librdkafka (:class:`InitializedIds`), which the flow's
clusters are known to accept, and each task initializes its slot's id itself
(:mod:`mm2py.executor.record_transactions` says what that leaves open).

InitProducerId aborts a fenced epoch's open transaction: what a zombie wrote and did not commit is never read by a
read_committed consumer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException

from mm2py.client_settings import ClientSettings
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.executor.contract import slot_transactional_id
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.progress import PROGRESS_PARTITIONER
from mm2py.wire.cluster import Cluster, ProducerIds
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.transactions import TransactionError, TransactionManager

log = logging.getLogger(__name__)

SLOTS_CONNECTOR = "mm2py-exactly-once"  # Connect's key format with a connector name of mm2py's own


def _slots_key(flow: str) -> bytes:
    return json.dumps([SLOTS_CONNECTOR, {"flow": flow}], separators=(",", ":")).encode()


def recorded_slots(target: str, consumer_settings: Mapping[str, str], progress_topic: str, flow: str) -> int:
    """The largest slot count the flow ran exactly-once with (0 if never), read from the progress topic."""
    key = _slots_key(flow)
    largest = 0
    for msg in read_topic(target, consumer_settings, progress_topic, purpose="reading exactly-once task slots"):
        if msg.key() == key and msg.value():
            largest = max(largest, int(json.loads(msg.value()).get("slots", 0)))
    return largest


class TakeOver(Protocol):
    """What :func:`fence` fences with: the flow's name, and a way to take its first ``count`` slot ids over."""

    flow: str

    def take_over(self, count: int) -> None: ...


class InitializedIds:
    """The record path's fencing: each slot id initialized once by a librdkafka transactional producer (an
    InitProducerId without an expected epoch: whoever had the id, this run takes it), then let go of; the tasks
    initialize the ids again as they copy."""

    def __init__(self, flow: str, source: str, producer_settings: Mapping[str, str], timeout_s: float = 60.0) -> None:
        self.flow = flow
        self.source = source
        self.producer_settings = producer_settings
        self.timeout_s = timeout_s

    def take_over(self, count: int) -> None:
        for slot in range(count):
            transactional_id = slot_transactional_id(self.source, slot)
            producer = new_producer({**self.producer_settings, "transactional.id": transactional_id})
            try:
                producer.init_transactions(self.timeout_s)
            except KafkaException as exc:
                err = exc.args[0]
                raise ReplicationError.of_kafka(
                    f"flow={self.flow}: fencing the producers of {transactional_id} failed: {err.str()}", err
                ) from None
            finally:
                producer.flush(0)


class SlotEpochs:
    """Each exactly-once task slot's producer id and epoch, initialized by the driver (see the module's doc).

    ``connect`` opens the target (a :class:`~mm2py.wire.connection.KafkaConnection`, or a fake cluster in the
    unit tests); a connection is opened for each call and closed after it, since jobs may be hours apart."""

    def __init__(
        self,
        flow: str,
        source: str,
        connect: Callable[[], Cluster],
        transaction_timeout_ms: int = 60_000,
        timeout_s: float = 60.0,
    ) -> None:
        self.flow = flow
        self.source = source
        self.connect = connect
        self.transaction_timeout_ms = transaction_timeout_ms
        self.timeout_s = timeout_s
        self.epochs: dict[int, ProducerIds] = {}

    def take_over(self, count: int) -> None:
        """Fence every earlier producer of slots 0..count-1 (InitProducerId without an expected epoch: whoever
        had them, this run takes them) and hold their new epochs."""
        self.epochs = self._each(range(count), lambda txn, _slot: txn.initialize(self.timeout_s))

    def next_job(self, slots: int) -> dict[int, tuple[int, int]]:
        """Before a job: for each of its ``slots``, abort what a task of the previous job left open, then bump
        the epoch expecting the one held; the (producer id, epoch) each slot's task writes with. Raises a
        permanent ReplicationError if another producer took one of the ids since."""

        def bump(txn: TransactionManager, slot: int) -> ProducerIds:
            held = self.epochs.get(slot)
            if held is None:  # a slot count larger than at the start: a new id, taken over like the others
                return txn.initialize(self.timeout_s)
            txn.abort_open(held, self.timeout_s)
            return txn.initialize(self.timeout_s, expected=held)

        self.epochs.update(self._each(range(slots), bump))
        return {slot: (self.epochs[slot].producer_id, self.epochs[slot].epoch) for slot in range(slots)}

    def _each(self, slots: range, step: Callable[[TransactionManager, int], ProducerIds]) -> dict[int, ProducerIds]:
        cluster = self.connect()
        done: dict[int, ProducerIds] = {}
        try:
            for slot in slots:
                transactional_id = slot_transactional_id(self.source, slot)
                txn = TransactionManager(cluster, transactional_id, transaction_timeout_ms=self.transaction_timeout_ms)
                try:
                    done[slot] = step(txn, slot)
                except TransactionError as exc:
                    raise _failure(self.flow, transactional_id, exc) from None
        finally:
            cluster.close()
        return done


def _failure(flow: str, transactional_id: str, exc: TransactionError) -> ReplicationError:
    if exc.fenced:
        return ReplicationError(
            f"flow={flow}: fenced: another producer initialized transactional.id {transactional_id} since this run "
            f"fenced it (MirrorMaker 2 or another mm2py copies {flow} exactly-once); stop one of them ({exc.error})",
            code=exc.error.name,
            retriable=False,
        )
    return ReplicationError(
        f"flow={flow}: fencing the producers of {transactional_id} failed: {exc.error}",
        code=exc.error.name,
        retriable=exc.retriable,
    )


def target_connection(target: str, producer: ClientSettings, timeout_s: float) -> Callable[[], Cluster]:
    """How :class:`SlotEpochs` opens the target: the batch path's own client, as the copy's producer connects."""

    def connect() -> Cluster:
        return KafkaConnection.connected(target, producer, timeout_s)

    return connect


def fence(
    fencer: TakeOver,
    target: str,
    producer_settings: Mapping[str, str],
    consumer_settings: Mapping[str, str],
    progress_topic: str,
    slots: int,
    tasks_max: int = 1,
    timeout_s: float = 60.0,
) -> int:
    """Fence every transactional.id the flow may have used, record ``slots``; returns how many ids were fenced."""
    previous = recorded_slots(target, consumer_settings, progress_topic, fencer.flow)
    count = max(slots, previous, tasks_max)
    fencer.take_over(count)
    if slots > previous:
        _record(target, producer_settings, progress_topic, fencer.flow, slots, timeout_s)
    log.info("flow=%s: fenced %d transactional producer(s) before copying exactly-once", fencer.flow, count)
    return count


def _record(
    target: str, producer_settings: Mapping[str, str], progress_topic: str, flow: str, slots: int, timeout_s: float
) -> None:
    producer = new_producer({**producer_settings, "partitioner": PROGRESS_PARTITIONER})
    failures: list[KafkaError] = []
    producer.produce(
        progress_topic,
        json.dumps({"slots": slots}).encode(),
        _slots_key(flow),
        on_delivery=lambda err, _m: failures.append(err) if err else None,
    )
    if producer.flush(timeout_s) > 0 or failures:
        cause = failures[0].str() if failures else f"not acknowledged within {timeout_s:.0f} s"
        raise KafkaOperationError(target, f"recording the exactly-once task slots in {progress_topic}", cause)

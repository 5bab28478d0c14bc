"""Exactly-once on the record path (executor side): which transactional producer copies a range, its transaction
steps, and what a fenced producer means.

Why the same ids as the batch path: each exactly-once task slot writes under ``<source>-mm2-MirrorSourceConnector-
<slot>`` (:func:`mm2py.executor.contract.slot_transactional_id`, MirrorMaker 2's own naming), so the ACLs a team
wrote for MM2's exactly-once tasks cover mm2py on either path, and MM2 and mm2py taking a flow over from each other
fence each other's producers whichever path mm2py copies on. A Spark task copies the ranges of one slot
(``engine/spark.group_by_slot``), one transaction per range, with one producer that it initializes at its first
range (``init_transactions`` fences every earlier producer of the id and aborts what it left open) and lets go of
when it ends: the next job's task, maybe in another Python worker, initializes the id again.

A fenced producer is fatal, as Kafka's Java TransactionManager treats ``ProducerFencedException``: another
producer (MirrorMaker 2, or another mm2py run) initialized the slot's id since, so the task copies none of its
remaining ranges and the flow stops. Initializing the id again would take it back from that producer and copy
beside its other tasks. (Unlike the batch path, whose driver bumps each slot's epoch before every job expecting
the epoch it holds, librdkafka initializes an id without an expected epoch: a new job's task takes the id back
from whoever holds it. The driver fences every id before the flow's first job on both paths.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException

from mm2py.errors import Failure, ReplicationError
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.librdkafka.clients import drop_producer
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.progress import progress_of

FENCED = "PRODUCER_FENCED"  # librdkafka's _FENCED, by Kafka's name (mm2py.kafka_errors)
# What a transactional producer's failure is named when another producer initialized its id since: PRODUCER_FENCED
# (a transaction step; librdkafka's _FENCED), or INVALID_PRODUCER_EPOCH, which a Produce answer carries into the
# records' delivery reports. Both are the same fencing: librdkafka makes either fatal and names it _FENCED (for a
# Produce answer in rdkafka_request.c ``rd_kafka_handle_Produce_error``); Kafka's Java producer makes a Produce answer's
# INVALID_PRODUCER_EPOCH abortable, and the abort's EndTxn is then refused, which its TransactionManager's
# ``EndTxnHandler`` takes as PRODUCER_FENCED, fatal. The batch path's rule is the same
# (``mm2py.wire.transactions.FENCED``).
FENCED_NAMES = frozenset({FENCED, "INVALID_PRODUCER_EPOCH"})


def producer_settings(spec: CopySpec, rng: PartitionRange) -> Mapping[str, str]:
    """The target producer's settings for ``rng``: exactly-once, the transactional.id of the range's task slot."""
    if not spec.exactly_once:
        return spec.producer_settings
    return {**spec.producer_settings, "transactional.id": transactional_id(spec, rng)}


def transactional_id(spec: CopySpec, rng: PartitionRange) -> str:
    return spec.slot_transactional_id(spec.slot_of(rng.topic, rng.partition))


def after_committed(spec: CopySpec, ranges: list[PartitionRange]) -> list[PartitionRange]:
    """A retried task's ranges, each starting after what an earlier attempt committed: that attempt's transactions
    hold the ranges it finished before it failed, progress included, and copying them again would write their
    records twice. Read committed from the progress topic, by the rule the driver reads it by."""
    records = read_topic(
        spec.target,
        spec.target_consumer_settings,
        spec.progress_topic,
        purpose="reading what an earlier attempt of the task committed",
    )
    committed = progress_of(((msg.key(), msg.value()) for msg in records), spec.source)
    return [
        dataclasses.replace(rng, start=min(rng.end, max(rng.start, committed.get((rng.topic, rng.partition), -1) + 1)))
        for rng in ranges
    ]


def transaction_step(producer: Any, settings: Mapping[str, str], where: str, step: str) -> None:
    """``begin_transaction`` or ``commit_transaction``; a failure forgets the producer and raises."""
    try:
        getattr(producer, step)(*(() if step == "begin_transaction" else (60,)))
    except KafkaException as exc:
        drop_producer(settings)
        err = exc.args[0]
        raise ReplicationError.of_kafka(f"{where}: {step.replace('_', ' ')} failed: {err.str()}", err) from None


def abort(producer: Any, settings: Mapping[str, str], where: str) -> None:
    """Abort the open transaction; a failure forgets the producer. After an abortable error that needs a new epoch (a
    record timed out, as when the task's process was stopped past ``message.timeout.ms``, which librdkafka keeps
    within ``transaction.timeout.ms``), the abort asks the coordinator for one with the epoch the producer holds
    (KIP-360); if another producer initialized the id since, the answer is the fencing, and it is raised: as in
    Kafka's Java ``TransactionManager`` (its ``InitProducerIdHandler`` makes INVALID_PRODUCER_EPOCH and
    PRODUCER_FENCED a fatal PRODUCER_FENCED), the task must stop, not be retried, or its retry would initialize the
    id again and take it back. Any other failure of the abort leaves the error that called for it to stand."""
    try:
        producer.abort_transaction(30)
    except KafkaException as exc:
        drop_producer(settings)
        err = exc.args[0]
        failure = Failure.of_kafka(f"{where}: abort transaction failed: {err.str()}", err)
        if failure.code in FENCED_NAMES:
            raise ReplicationError.of_failure(failure) from None


def fenced_failure(spec: CopySpec, rng: PartitionRange, failure: Failure | None) -> Failure | None:
    """What stops the task, for ``rng`` and every range after it, if ``failure`` says its producer was fenced.

    Decided before the failure's own ``retriable`` flag: an INVALID_PRODUCER_EPOCH delivery failure is retriable
    for an idempotent producer (a new one replaces it), but a retried exactly-once task would initialize the slot's
    id again and take it back from the producer that fenced it. A transaction the coordinator aborted because it
    stayed open too long bumps the epoch too, and ends the flow the same way (librdkafka's commit already failed
    so); the message says both."""
    if failure is None or not spec.exactly_once or failure.code not in FENCED_NAMES:
        return None
    return Failure(
        f"{failure.message} (fenced: another producer initialized transactional.id {transactional_id(spec, rng)}: "
        f"another mm2py run, or MirrorMaker 2, copies {spec.flow} exactly-once, or the target aborted a transaction "
        "left open past the producer's transaction.timeout.ms; the task's other ranges are not copied)",
        FENCED,
        retriable=False,
    )


def release(spec: CopySpec, ranges: list[PartitionRange]) -> None:
    """At the task's end: its slot producers are let go of (nothing is open after a commit or an abort), so the
    next task that copies the slot initializes the id again, whichever worker it runs in."""
    if spec.exactly_once:
        for settings in {transactional_id(spec, rng): producer_settings(spec, rng) for rng in ranges}.values():
            drop_producer(settings)

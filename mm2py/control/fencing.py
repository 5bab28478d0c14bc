"""Zombie fencing for exactly-once on the batch path (driver side): before a flow copies, no earlier producer of
its transactional.ids can commit any more.

Why: on the batch path each Spark task slot copies its partitions under one transactional.id
(``<source>-mm2-MirrorSourceConnector-<slot>``, MM2's own naming, :meth:`CopySpec.slot_transactional_id`), and a
partition's slot is a hash of it modulo the slot count. A task that restarts fences its predecessor itself (its
InitProducerId bumps the epoch), but when the slot count changes (a run with more or fewer Spark task slots) a
partition can move to another id, and a zombie of the old one could still commit it. So, as Kafka Connect does
for KIP-618 (the leader fences the producers of every task of the previous generation before new tasks start),
the driver fences every id of every slot count the flow ran with — the largest is recorded beside the progress,
in ``mm2-offsets.<source>.internal``, under a key of mm2py's own that MM2 ignores — and of MM2's ``tasks.max``, so
MirrorMaker 2 tasks of the same flow are fenced too when mm2py takes it over.

InitProducerId of a transactional producer (librdkafka's ``init_transactions``) bumps the id's epoch and aborts
its open transaction: what a zombie wrote and did not commit is never read by a read_committed consumer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException

from mm2py.errors import KafkaOperationError
from mm2py.executor.contract import slot_transactional_id
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.progress import PROGRESS_PARTITIONER

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


def fence(
    target: str,
    producer_settings: Mapping[str, str],
    consumer_settings: Mapping[str, str],
    progress_topic: str,
    flow: str,
    source: str,
    slots: int,
    tasks_max: int = 1,
    timeout_s: float = 60.0,
) -> int:
    """Fence every transactional.id the flow may have used, record ``slots``; returns how many ids were fenced."""
    previous = recorded_slots(target, consumer_settings, progress_topic, flow)
    count = max(slots, previous, tasks_max)
    for slot in range(count):
        transactional_id = slot_transactional_id(source, slot)
        producer = new_producer({**producer_settings, "transactional.id": transactional_id})
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            cause = err.str() if isinstance(err, KafkaError) else str(exc)
            raise KafkaOperationError(target, f"fencing the producers of {transactional_id}", cause) from None
    if slots > previous:
        _record(target, producer_settings, progress_topic, flow, slots, timeout_s)
    log.info("flow=%s: fenced %d transactional producer(s) before copying exactly-once", flow, count)
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

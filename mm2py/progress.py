"""Replication progress, kept where MM2 keeps it: ``mm2-offsets.<source>.internal`` on the target.

One record per source partition, in Kafka Connect's own format (reference §3.5): key
``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`` and value ``{"offset":N}``,
N being the offset of the last replicated record. Because the bytes are MM2's, a flow can move between MM2
and mm2py, or between hosts, without copying anything twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from mm2py.errors import KafkaOperationError
from mm2py.kafka.admin import wrap_kafka_error
from mm2py.kafka.clients import new_consumer
from mm2py.records import parse_source_offset_key, parse_source_offset_value, source_offset_key, source_offset_value

SOURCE_CONNECTOR_NAME = "MirrorSourceConnector"
# Connect writes offsets with the Java client's murmur2 partitioner; a key must land where Connect's
# reader expects it, so the progress producer uses librdkafka's Java-compatible partitioner.
PROGRESS_PARTITIONER = "murmur2_random"


def progress_topic(source_alias: str) -> str:
    """``mm2-offsets.<source>.internal``: always with ``.``, whatever the replication policy (§2)."""
    return f"mm2-offsets.{source_alias}.internal"


@dataclass(frozen=True)
class ProgressRecord:
    key: bytes
    value: bytes


def progress_record(source_alias: str, topic: str, partition: int, last_offset: int) -> ProgressRecord:
    return ProgressRecord(source_offset_key(source_alias, topic, partition, SOURCE_CONNECTOR_NAME),
                          source_offset_value(last_offset))


def read_progress(target_alias: str, consumer_settings: Mapping[str, str], source_alias: str,
                  timeout_s: float = 30.0) -> dict[tuple[str, int], int]:
    """Last replicated offset per (source topic, partition), read from the start of the offsets topic to its end.

    The end is where the consumer reports partition EOF (the high watermark of its fetch), the same end
    Connect's KafkaBasedLog reads to; tombstones remove a partition's progress (KIP-875 resets).
    """
    topic = progress_topic(source_alias)
    settings = {**consumer_settings, "group.id": f"mm2py-progress-{source_alias}", "enable.partition.eof": "true",
                "enable.auto.commit": "false", "isolation.level": "read_committed"}
    consumer = new_consumer(settings)
    operation = f"reading progress from {topic}"
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise wrap_kafka_error(target_alias, operation, exc) from None
        info = metadata.topics.get(topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return {}
        partitions = sorted(info.partitions)
        if not partitions:
            return {}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        result: dict[tuple[str, int], int] = {}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise KafkaOperationError(target_alias, operation, f"did not reach the end within {timeout_s:.0f} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition() or 0)
                        continue
                    raise KafkaOperationError(target_alias, operation, err.str())
                at_end.discard(msg.partition() or 0)
                parsed = parse_source_offset_key(msg.key() or b"")
                if parsed is None:
                    continue
                _connector, cluster, src_topic, partition = parsed
                if cluster != source_alias:
                    continue
                offset = parse_source_offset_value(msg.value())
                if offset is None:
                    result.pop((src_topic, partition), None)
                else:
                    result[(src_topic, partition)] = offset
        return result
    finally:
        consumer.close()

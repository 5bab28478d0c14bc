"""Replication progress, kept where MM2 keeps it: ``mm2-offsets.<source>.internal`` on the target.

One record per source partition, in Kafka Connect's own format (docs/mm2-semantics.md, *Progress records*): key
``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`` and value ``{"offset":N}``,
N being the offset of the last replicated record. Because the bytes are MM2's, a flow can move between MM2
and mm2py, or between hosts, without copying anything twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError

from mm2py.errors import KafkaOperationError
from mm2py.kafka.clients import new_producer
from mm2py.kafka.reader import read_topic
from mm2py.records import parse_source_offset_key, parse_source_offset_value, source_offset_key, source_offset_value

SOURCE_CONNECTOR_NAME = "MirrorSourceConnector"
# Connect writes offsets with the Java client's murmur2 partitioner; a key must land where Connect's
# reader expects it, so the progress producer uses librdkafka's Java-compatible partitioner.
PROGRESS_PARTITIONER = "murmur2_random"


def progress_topic(source_alias: str) -> str:
    """``mm2-offsets.<source>.internal``: always with ``.``, whatever the replication policy (*Internal topics*)."""
    return f"mm2-offsets.{source_alias}.internal"


@dataclass(frozen=True)
class ProgressRecord:
    key: bytes
    value: bytes


def progress_record(source_alias: str, topic: str, partition: int, last_offset: int) -> ProgressRecord:
    return ProgressRecord(
        source_offset_key(source_alias, topic, partition, SOURCE_CONNECTOR_NAME), source_offset_value(last_offset)
    )


def read_progress(
    target_alias: str, consumer_settings: Mapping[str, str], source_alias: str, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """Last replicated offset per (source topic, partition), read from the start of the offsets topic to its end.

    Tombstones remove a partition's progress (KIP-875 resets); keys of other connectors or clusters are ignored.
    """
    result: dict[tuple[str, int], int] = {}
    for msg in read_topic(
        target_alias,
        consumer_settings,
        progress_topic(source_alias),
        purpose="reading replication progress",
        timeout_s=timeout_s,
    ):
        parsed = parse_source_offset_key(msg.key() or b"")
        if parsed is None:
            continue
        _connector, cluster, topic, partition = parsed
        if cluster != source_alias:
            continue
        offset = parse_source_offset_value(msg.value())
        if offset is None:
            result.pop((topic, partition), None)
        else:
            result[(topic, partition)] = offset
    return result


def write_progress(
    target_alias: str,
    producer_settings: Mapping[str, str],
    source_alias: str,
    last_offsets: Mapping[tuple[str, int], int],
    timeout_s: float = 30.0,
) -> None:
    """Record ``last_offsets`` as replicated (driver side): positions taken from ``auto.offset.reset`` or a
    restart after truncation, so the next run resumes there too. Raises KafkaOperationError if not acknowledged."""
    if not last_offsets:
        return
    producer = new_producer({**producer_settings, "partitioner": PROGRESS_PARTITIONER})
    failures: list[KafkaError] = []
    for (topic, partition), offset in sorted(last_offsets.items()):
        record = progress_record(source_alias, topic, partition, offset)
        producer.produce(
            progress_topic(source_alias),
            record.value,
            record.key,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    if producer.flush(timeout_s) > 0 or failures:
        cause = failures[0].str() if failures else f"not acknowledged within {timeout_s:.0f} s"
        raise KafkaOperationError(
            target_alias, f"recording starting positions in {progress_topic(source_alias)}", cause
        )

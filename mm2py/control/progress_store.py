"""Reading and writing replication progress on the target (driver side, and the tools that report it).

The format (MM2's own, Connect's offsets) is :mod:`mm2py.mirror.progress`; this module moves it between the
cluster and a ``{(topic, partition): last replicated offset}`` map.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.progress import PROGRESS_PARTITIONER, progress_of, progress_record, progress_topic


def read_progress(
    target_alias: str, consumer_settings: Mapping[str, str], source_alias: str, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """Last replicated offset per (source topic, partition), read from the start of the offsets topic to its end.

    Tombstones remove a partition's progress (KIP-875 resets); keys of other connectors or clusters are ignored.
    """
    messages = read_topic(
        target_alias,
        consumer_settings,
        progress_topic(source_alias),
        purpose="reading replication progress",
        timeout_s=timeout_s,
    )
    return progress_of(((msg.key(), msg.value()) for msg in messages), source_alias)


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

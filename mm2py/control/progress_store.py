"""Reading and writing replication progress on the target (driver side, and the tools that report it).

The format (MM2's own, Connect's offsets) is :mod:`mm2py.mirror.progress`; this module moves it between the
cluster and a ``{(topic, partition): last replicated offset}`` map, and mm2py's loss records
(:mod:`mm2py.mirror.loss`), kept in the same topic under keys of their own, as a ``{(topic, partition):
LossState}`` map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import KafkaError

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import TopicTail, internal_topic_settings, read_topic
from mm2py.mirror.loss import LOSS_CONNECTOR_NAME, LossState, loss_key, loss_value, parse_loss_value
from mm2py.mirror.progress import (
    PROGRESS_PARTITIONER,
    apply_progress,
    progress_of,
    progress_record,
    progress_topic,
)
from mm2py.mirror.record_formats import parse_source_offset_key
from mm2py.mirror.topic_partition import TopicPartition

V = TypeVar("V")


@dataclass(frozen=True)
class ReplicationState:
    """What the target holds about a flow: the last replicated offset and the losses of each partition."""

    progress: dict[TopicPartition, int] = field(default_factory=dict)
    losses: dict[TopicPartition, LossState] = field(default_factory=dict)


def read_replication_state(
    target_alias: str, consumer_settings: Mapping[str, str], source_alias: str, timeout_s: float = 30.0
) -> ReplicationState:
    """Progress and losses per (source topic, partition), read from the start of the offsets topic to its end.

    Tombstones remove a partition's progress (KIP-875 resets) or losses; keys of other connectors or clusters
    are ignored. Progress keys are read whatever their connector name (MM2 on a Connect cluster names it).
    """
    pairs = [
        (msg.key(), msg.value())
        for msg in read_topic(
            target_alias,
            consumer_settings,
            progress_topic(source_alias),
            purpose="reading replication progress",
            timeout_s=timeout_s,
        )
    ]
    losses: dict[TopicPartition, LossState] = {}
    for key, value in pairs:
        parsed = parse_source_offset_key(key or b"")
        if parsed is not None and parsed[0] == LOSS_CONNECTOR_NAME and parsed[1] == source_alias:
            _put(losses, (parsed[2], parsed[3]), parse_loss_value(value))
    # Progress by the one rule copy tasks read it by too (mirror.progress.progress_of).
    return ReplicationState(progress_of(pairs, source_alias), losses)


def _put(table: dict[TopicPartition, V], tp: TopicPartition, value: V | None) -> None:
    if value is None:
        table.pop(tp, None)  # a tombstone
    else:
        table[tp] = value


def read_progress(
    target_alias: str, consumer_settings: Mapping[str, str], source_alias: str, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """Last replicated offset per (source topic, partition) (see :func:`read_replication_state`)."""
    return read_replication_state(target_alias, consumer_settings, source_alias, timeout_s).progress


class ProgressTail:
    """One flow's progress, read whole once and then only what was written since: a continuous run's checkpoints
    read it every ``emit.checkpoints.interval.seconds`` while its tasks record each partition every second, and
    the offsets topic is compacted only outside its active segment, so a whole read would cost more the longer
    the flow runs."""

    def __init__(
        self, target_alias: str, consumer_settings: Mapping[str, str], source_alias: str, timeout_s: float = 30.0
    ) -> None:
        self.source_alias = source_alias
        self.tail = TopicTail(
            target_alias,
            internal_topic_settings(target_alias, consumer_settings),
            [progress_topic(source_alias)],
            purpose="reading replication progress",
            timeout_s=timeout_s,
        )
        self._progress: dict[TopicPartition, int] = {}

    def refresh(self) -> dict[TopicPartition, int]:
        """Last replicated offset per (source topic, partition), as :func:`read_progress` would read it now."""
        self.read_new()
        return dict(self._progress)

    def read_new(self) -> None:
        """Take in what was written since the last read."""
        apply_progress(self._progress, ((msg.key(), msg.value()) for msg in self.tail.new_records()), self.source_alias)


def write_progress(
    target_alias: str,
    producer_settings: Mapping[str, str],
    source_alias: str,
    last_offsets: Mapping[tuple[str, int], int],
    timeout_s: float = 30.0,
    losses: Mapping[tuple[str, int], LossState] | None = None,
) -> None:
    """Record ``last_offsets`` as replicated (driver side): positions taken from ``auto.offset.reset``, a start
    time or a restart after lost records, so the next run resumes there too; and ``losses``, in the same flush
    (LossState.counted_to makes a gap found again after a write that failed half way count nothing more).
    Raises KafkaOperationError if not acknowledged."""
    if not last_offsets and not losses:
        return
    producer = new_producer({**producer_settings, "partitioner": PROGRESS_PARTITIONER})
    failures: list[KafkaError] = []
    records = [(loss_key(source_alias, t, p), loss_value(state)) for (t, p), state in sorted((losses or {}).items())]
    for (topic, partition), offset in sorted(last_offsets.items()):
        record = progress_record(source_alias, topic, partition, offset)
        records.append((record.key, record.value))
    for key, value in records:
        producer.produce(
            progress_topic(source_alias),
            value,
            key,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    if producer.flush(timeout_s) > 0 or failures:
        cause = failures[0].str() if failures else f"not acknowledged within {timeout_s:.0f} s"
        raise KafkaOperationError(
            target_alias, f"recording starting positions in {progress_topic(source_alias)}", cause
        )

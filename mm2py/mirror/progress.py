"""Replication progress, kept where MM2 keeps it: ``mm2-offsets.<source>.internal`` on the target.

One record per source partition, in Kafka Connect's own format (docs/mm2-semantics.md, *Progress records*): key
``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`` and value ``{"offset":N}``,
N being the offset of the last replicated record. Because the bytes are MM2's, a flow can move between MM2
and mm2py, or between hosts, without copying anything twice. Reading and writing it on a cluster is
:mod:`mm2py.control.progress_store`'s; copy tasks write it with their own producers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mm2py.mirror.loss import LOSS_CONNECTOR_NAME
from mm2py.mirror.record_formats import (
    parse_source_offset_key,
    parse_source_offset_value,
    source_offset_key,
    source_offset_value,
)

SOURCE_CONNECTOR_NAME = "MirrorSourceConnector"
# Connect writes offsets with the Java client's murmur2 partitioner; a key must land where Connect's
# reader expects it, so the progress producer uses librdkafka's Java-compatible partitioner.
PROGRESS_PARTITIONER = "murmur2_random"


def progress_topic(source_alias: str) -> str:
    """``mm2-offsets.<source>.internal``: always with ``.``, whatever the replication policy (*Internal topics*)."""
    return f"mm2-offsets.{source_alias}.internal"


@dataclass(frozen=True)
class ProgressRecord:
    """The key and value bytes of one progress record, as Connect writes them."""

    key: bytes
    value: bytes


def progress_record(source_alias: str, topic: str, partition: int, last_offset: int) -> ProgressRecord:
    return ProgressRecord(
        source_offset_key(source_alias, topic, partition, SOURCE_CONNECTOR_NAME), source_offset_value(last_offset)
    )


def progress_of(records: Iterable[tuple[bytes | None, bytes | None]], source_alias: str) -> dict[tuple[str, int], int]:
    """The last replicated offset per (source topic, partition) that ``records`` (key, value, in the topic's order)
    leave: tombstones remove a partition's progress (KIP-875 resets); keys of other connectors or clusters are
    ignored."""
    return apply_progress({}, records, source_alias)


def apply_progress(
    result: dict[tuple[str, int], int], records: Iterable[tuple[bytes | None, bytes | None]], source_alias: str
) -> dict[tuple[str, int], int]:
    """``result`` (progress read before) with ``records`` (read after it) applied, by :func:`progress_of`'s rule."""
    for key, value in records:
        parsed = parse_source_offset_key(key or b"")
        if parsed is None:
            continue
        connector, cluster, topic, partition = parsed
        if cluster != source_alias or connector == LOSS_CONNECTOR_NAME:  # losses share the topic and key format
            continue
        offset = parse_source_offset_value(value)
        if offset is None:
            result.pop((topic, partition), None)
        else:
            result[(topic, partition)] = offset
    return result

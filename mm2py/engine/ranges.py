"""Which offset ranges a copy job takes (driver side): pure functions of the source's ends and the positions.

A job takes at most one range per source partition, so per-partition order holds and progress never goes
backwards; ``mm2py.range.max.records`` caps each range, which bounds what a crash re-copies (at-least-once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm2py.executor.contract import PartitionRange
from mm2py.mirror.topic_partition import TopicPartition


def round_ranges(
    ends: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int], remote: Mapping[str, str], cap: int
) -> list[PartitionRange]:
    """A round (``--once``, the record path): what each partition holds below its listed end. A partition not
    placed yet (no position: its leader was away) gets no range, never one from the start of its log."""
    result = []
    for (topic, partition), end in ends.items():
        start = positions.get((topic, partition), end)
        if start < end:
            result.append(PartitionRange(topic, partition, remote[topic], start, min(end, start + cap)))
    return result


FOLLOW_END = 2**63 - 1  # a following range has no end: its task copies until the driver stops it


def follow_ranges(
    partitions: Iterable[TopicPartition], positions: Mapping[TopicPartition, int], remote: Mapping[str, str]
) -> list[PartitionRange]:
    """A following job (continuous mode, batch path): every partition of the plan that has a position, from it,
    without an end, whether its leader is there now or not (its task waits for it)."""
    return [
        PartitionRange(topic, partition, remote[topic], positions[(topic, partition)], FOLLOW_END)
        for topic, partition in partitions
        if (topic, partition) in positions
    ]

"""Which offset ranges a copy job takes (driver side): pure functions of the source's ends and the positions.

A job takes at most one range per source partition, so per-partition order holds and progress never goes
backwards; ``mm2py.batch.max.records`` caps each range, which bounds what a crash re-copies (at-least-once).
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.executor.contract import PartitionRange

TopicPartition = tuple[str, int]


def round_ranges(
    ends: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int], remote: Mapping[str, str], cap: int
) -> list[PartitionRange]:
    """A round (``--once``, the record path): what each partition holds below its listed end."""
    result = []
    for (topic, partition), end in ends.items():
        start = positions.get((topic, partition), end)
        if start < end:
            result.append(PartitionRange(topic, partition, remote[topic], start, min(end, start + cap)))
    return result


def follow_ranges(
    ends: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int], remote: Mapping[str, str], cap: int
) -> list[PartitionRange]:
    """A following job (continuous mode, batch path): every listed partition from its position, caught up or
    not, since its task also copies what arrives; the cap is the range's end."""
    result = []
    for (topic, partition), end in ends.items():
        if end >= 0:  # -1: the end is not known right now (a leader election)
            start = positions.get((topic, partition), end)
            result.append(PartitionRange(topic, partition, remote[topic], start, start + cap))
    return result

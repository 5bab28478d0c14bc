"""The source's end offsets as a flow's copy rounds need them (driver side): a partition whose leader is away is
left out, and named, until it is back.

Why apart from :mod:`mm2py.engine.copy_rounds`: one offline partition must not stop the others (in MM2 each
partition is consumed on its own), and which partitions are away is asked by placement, by the copy rounds and
by the periodic jobs alike; the rule lives here once.
"""

from __future__ import annotations

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.engine.unavailable import UnavailablePartitions
from mm2py.errors import KafkaOperationError
from mm2py.mirror.topic_partition import TopicPartition


class SourceEnds:
    """End offsets of flow ``flow``'s source partitions, and which partitions are away (``away``)."""

    def __init__(self, flow: FlowConfig, pool: AdminPool, *, read_committed: bool) -> None:
        self.flow = flow
        self.pool = pool
        self.read_committed = read_committed  # then the ends are the last stable offsets
        self.away = UnavailablePartitions(flow.name)

    def available(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The ends of the partitions whose leader answered; the others are named in ``away``."""
        admin = self.pool.admin(self.flow.source, self.flow)
        ends, away = admin.list_offsets_of_available(partitions, "latest", self.read_committed)
        self.away.update(partitions, away)
        return ends

    def listed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks of ``partitions`` now (a report's position is checked against them)."""
        admin = self.pool.admin(self.flow.source, self.flow)
        return admin.list_offsets_of_available(partitions, "latest")[0]

    def of_unavailable(self, late: list[TopicPartition]) -> dict[TopicPartition, int]:
        """``--once``: the end offsets of the partitions ``late`` left out at the start (their leader was away),
        once their leaders are back. Fails (retriably) while one is still away, so the run waits for it up to
        ``mm2py.retry.timeout.seconds`` and then exits 3 naming it; nothing is skipped in silence."""
        ends = self.available(sorted(late))
        missing = sorted(tp for tp in late if tp not in ends)
        if missing:
            topic, partition = missing[0]
            why = self.away.reasons.get(missing[0], "no leader")
            raise KafkaOperationError(
                self.flow.source,
                f"listing latest offsets of {topic}-{partition}",
                f"{why} ({len(missing)} partition(s) not copied by this run)",
            )
        return ends

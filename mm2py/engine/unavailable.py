"""Source partitions whose leader is away (driver side): left out of the copy and named once when they go and
once when they are back, so one offline partition never stops the others (in MM2 each partition is consumed
on its own) and nothing is skipped in silence."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from mm2py.mirror.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class UnavailablePartitions:
    """The partitions of one flow left out of the last end-offset listing that asked for them, and why."""

    def __init__(self, flow: str) -> None:
        self.flow = flow
        self.reasons: dict[TopicPartition, str] = {}

    def update(self, asked: Iterable[TopicPartition], away: Mapping[TopicPartition, str]) -> None:
        """A listing asked for ``asked`` and found ``away`` without a leader."""
        asked = set(asked)
        for (topic, partition), reason in sorted(away.items()):
            if (topic, partition) not in self.reasons:
                log.warning(
                    "flow=%s topic=%s partition=%d is not copied while its leader is away (%s); the other "
                    "partitions go on",
                    self.flow,
                    topic,
                    partition,
                    reason,
                )
        for topic, partition in sorted(asked & self.reasons.keys() - away.keys()):
            log.warning("flow=%s topic=%s partition=%d has a leader again; copying it", self.flow, topic, partition)
        self.reasons = {tp: r for tp, r in self.reasons.items() if tp not in asked} | dict(away)

"""OffsetSyncStore: a flow's offset syncs, read once and then tailed (as MM2's OffsetSyncStore does).

A continuous run checkpoints every ``emit.checkpoints.interval.seconds``; reading both syncs topics from their
start each time would cost more the longer the flow runs. The store remembers where it stopped in every
partition of every syncs topic and reads only what came after, into maps that grow by runs, not by recordings:
a run's inner dense points are dropped (``OffsetMap``), and so are MM2's syncs that the dense ones cover
(``drop_covered``).
"""

from __future__ import annotations

import logging

from mm2py.config.flow import FlowConfig
from mm2py.control.topics import dense_offset_syncs_topic, offset_syncs_topic
from mm2py.librdkafka.partition_reader import TopicTail, internal_topic_settings
from mm2py.mirror.translation import OffsetMap, add_offset_sync, combine_offset_maps, drop_covered

log = logging.getLogger(__name__)


class OffsetSyncStore:
    """MM2's syncs topic and mm2py's dense one of one flow, on the cluster ``offset-syncs.topic.location`` names."""

    def __init__(self, flow: FlowConfig, timeout_s: float = 30.0) -> None:
        self.flow = flow
        client = flow.source_consumer if flow.offset_syncs_topic_location == "source" else flow.target_consumer
        settings = {
            **internal_topic_settings(flow.offset_syncs_cluster, client.settings()),
            "group.id": f"mm2py-offset-syncs-{flow.source}-{flow.target}",
        }
        self.topics = [offset_syncs_topic(flow)] + ([dense_offset_syncs_topic(flow)] if flow.dense_offset_syncs else [])
        self._tail = TopicTail(
            flow.offset_syncs_cluster, settings, self.topics, purpose="reading offset syncs", timeout_s=timeout_s
        )
        self._maps: dict[str, dict[tuple[str, int], OffsetMap]] = {t: {} for t in self.topics}

    @property
    def records_read(self) -> int:
        return self._tail.records_read

    def refresh(self) -> dict[tuple[str, int], OffsetMap]:
        """Read what was written since the last read; the flow's maps, one per upstream partition."""
        self.read_new()
        return self.maps()

    def read_new(self) -> None:
        """Take in what was written since the last read (a continuous run reads on between its checkpoints, as
        MM2's store reads on in the background, so that a checkpoint does not read a whole interval at once)."""
        skipped = 0
        for msg in self._tail.new_records():
            if not add_offset_sync(self._maps[msg.topic() or ""], msg.key(), msg.value(), dict(msg.headers() or [])):
                skipped += 1
        if skipped:
            log.warning("flow=%s skipped %d undecodable offset-sync records", self.flow.name, skipped)
        if len(self.topics) == 2:
            drop_covered(self._maps[self.topics[0]], self._maps[self.topics[1]])

    def maps(self) -> dict[tuple[str, int], OffsetMap]:
        if len(self.topics) == 1:
            return dict(self._maps[self.topics[0]])
        return combine_offset_maps(self._maps[self.topics[0]], self._maps[self.topics[1]])

"""One flow's loss accounting on the driver: records that left the source before they were replicated.

The driver is where this belongs: it knows each partition's replicated position and asks the source for its
log start and end, and a gap is found there (:func:`mm2py.mirror.resume.resume_position`) when a partition is
placed - at the start of a run, when a copy task reports that the records at its position are gone, or when a
partition shrank below its position. Copy tasks only stop at a gap; they never skip one.

``mm2py.source.loss = warn`` (the default) counts each gap once, logs it, adds it to the run's ``lost=N``
and to ``mm2py_records_lost_total``, and keeps the count with the progress (:mod:`mm2py.mirror.loss`);
``fail`` stops the flow (exit 3), naming every gap, before anything after one is copied or recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mm2py.config.flow import FlowConfig
from mm2py.engine.stats import FlowStats
from mm2py.errors import ReplicationError
from mm2py.metrics.registry import RunMetrics
from mm2py.mirror.loss import Gap, LossState
from mm2py.mirror.resume import Resume
from mm2py.mirror.topic_partition import TopicPartition

log = logging.getLogger(__name__)
RECORDS_LOST = "RECORDS_LOST"  # the code of the failure that stops a flow under mm2py.source.loss = fail


class FlowLosses:
    """The losses of one flow's partitions: as stored on the target, and as counted since."""

    def __init__(self, flow: FlowConfig, stats: FlowStats, metrics: RunMetrics | None = None) -> None:
        self.flow = flow
        self.stats = stats
        self.metrics = metrics
        self.stored: dict[TopicPartition, LossState] = {}  # as the target holds them
        self.states: dict[TopicPartition, LossState] = {}  # as this run knows them (stored, or newer)

    def load(self, stored: Mapping[TopicPartition, LossState]) -> None:
        """The states read from the target; a state this run counted further (a write that failed and is
        being retried) is kept rather than read back older."""
        for tp, state in stored.items():
            mine = self.states.get(tp)
            if mine is None or mine.counted_to < state.counted_to or mine.lost < state.lost:
                self.states[tp] = state
            self.stored[tp] = state
        self._publish(self.states)

    def state(self, tp: TopicPartition, seen_end: int | None = None) -> LossState:
        """What is known of ``tp``, with the end offset this run last saw."""
        return self.states.get(tp, LossState()).seen(seen_end)

    def settle(self, resumes: Mapping[TopicPartition, Resume]) -> dict[TopicPartition, LossState]:
        """Count the gaps ``resumes`` found, and return the states to write with their new positions.

        Under ``mm2py.source.loss = fail`` a gap raises (not retriable: waiting brings nothing back) before
        anything is counted, recorded or copied past it.
        """
        gaps = [g for (topic, partition), r in sorted(resumes.items()) if (g := r.gap_of(topic, partition))]
        if gaps and self.flow.source_loss == "fail":
            raise ReplicationError(lost_message(self.flow.name, gaps), code=RECORDS_LOST, retriable=False)
        for gap in gaps:
            self.stats.lost += gap.records
            warning = resumes[(gap.topic, gap.partition)].warning
            log.warning("flow=%s topic=%s partition=%d: %s", self.flow.name, gap.topic, gap.partition, warning)
        changed = {tp: r.loss for tp, r in resumes.items() if r.loss != self.stored.get(tp, LossState())}
        self.states.update({tp: r.loss for tp, r in resumes.items()})
        self._publish({tp: r.loss for tp, r in resumes.items()})
        return changed

    def seen_tails(
        self, ends: Mapping[TopicPartition, int], positions: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, LossState]:
        """States worth keeping when a run ends: partitions whose end it saw beyond what it copied, so that the
        tail can be counted if the topic is deleted and re-created before another run copies it."""
        tails = {tp: self.state(tp, end) for tp, end in ends.items() if end > positions.get(tp, end)}
        return {tp: s for tp, s in tails.items() if s != self.stored.get(tp, LossState())}

    def written(self, states: Mapping[TopicPartition, LossState]) -> None:
        """``states`` are on the target now."""
        self.stored.update(states)
        self.states.update(states)

    def _publish(self, states: Mapping[TopicPartition, LossState]) -> None:
        if self.metrics is not None:
            self.metrics.set_records_lost(self.flow.source, self.flow.target, {tp: s.lost for tp, s in states.items()})


def lost_message(flow: str, gaps: list[Gap]) -> str:
    """The one line that stops a flow under ``mm2py.source.loss = fail``: every gap, by topic, partition and
    offsets, and what to do."""
    return (
        f"flow {flow}: records were deleted from the source before they were replicated: "
        + "; ".join(g.describe() for g in gaps)
        + ". mm2py.source.loss = fail stops the flow before anything after a gap is copied; "
        "set it to warn to count them and go on"
    )

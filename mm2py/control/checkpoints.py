"""Consumer-group offsets across a flow (driver side): translation, MM2 checkpoints and group offset sync.

For source groups that pass ``groups``/``groups.exclude``, committed offsets on replicated partitions are
translated with the flow's offset syncs (``mm2py.mirror.translation``: exact where the syncs allow it, else MM2's
conservative rule), written as MM2 Checkpoint records to ``<source>.checkpoints.internal`` on the target,
and - with ``sync.group.offsets.enabled`` - committed to the target group while it has no active members.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from confluent_kafka import KafkaError

from mm2py.config.flow import FlowConfig
from mm2py.control.offset_sync_store import OffsetSyncStore
from mm2py.control.plan import FlowPlan
from mm2py.control.progress_store import ProgressTail, read_progress
from mm2py.control.topics import checkpoints_topic
from mm2py.errors import CheckFailed, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.filters import GroupFilter, load_group_filter
from mm2py.mirror.record_formats import Checkpoint, RecordFormatError
from mm2py.mirror.translation import OffsetMap, Translation

log = logging.getLogger(__name__)

# A group with members cannot take offset commits from outside; these are the states that have none.
IDLE_GROUP_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN"})


@dataclass(frozen=True)
class GroupOffset:
    """One committed offset of a source group and where it lands on the target."""

    group: str
    topic: str  # upstream topic
    remote_topic: str
    partition: int
    upstream_offset: int
    translation: Translation
    metadata: str = ""  # the source commit's metadata, carried into checkpoints and synced commits as MM2 does

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.remote_topic,
            "partition": self.partition,
            "upstream_offset": self.upstream_offset,
            "offset": self.translation.offset,
            "method": self.translation.method,
            **({"reason": self.translation.reason} if self.translation.reason else {}),
        }


def read_offset_maps(flow: FlowConfig) -> dict[tuple[str, int], OffsetMap]:
    """Every offset sync of the flow: MM2's compacted topic (mm2py's MM2-rule syncs, or Java MM2's) and mm2py's
    dense one, which outlives compaction (see combine_offset_maps for how they fit together)."""
    return OffsetSyncStore(flow).refresh()


class FlowTranslator:
    """Everything needed to translate one flow's group offsets, loaded once per use."""

    def __init__(
        self,
        flow: FlowConfig,
        plan: FlowPlan,
        source: ClusterAdmin,
        store: OffsetSyncStore | None = None,
        progress: ProgressTail | None = None,
    ) -> None:
        """``store`` and ``progress``: a continuous run's, kept from one checkpoint to the next and read on from
        where they stopped; without them, both are read whole."""
        self.flow = flow
        self.source = source
        self.remote = {t.topic: t.remote_topic for t in plan.topics}
        self.group_filter: GroupFilter = load_group_filter(flow.group_filter_class, flow.plugin_config())
        self.maps = (store or OffsetSyncStore(flow)).refresh()
        self.progress = (
            progress.refresh()
            if progress is not None
            else read_progress(flow.target, flow.target_consumer.settings(), flow.source)
        )

    def groups(self) -> list[str]:
        """Source groups the flow checkpoints (MM2: group filter, and a commit on a replicated topic)."""
        return [g for g in self.source.list_groups() if self.group_filter.should_replicate_group(g)]

    def translate(self, group: str, topics: Iterable[str] | None = None) -> list[GroupOffset]:
        wanted = set(topics) if topics is not None else None
        rows = []
        for (topic, partition), (offset, metadata) in sorted(self.source.committed(group).items()):
            if topic not in self.remote or (wanted is not None and topic not in wanted):
                continue
            translation = self.translate_offset(topic, partition, offset)
            rows.append(GroupOffset(group, topic, self.remote[topic], partition, offset, translation, metadata))
        return rows

    def translate_offset(self, topic: str, partition: int, offset: int) -> Translation:
        """Where a consumer at ``offset`` of source ``topic``-``partition`` resumes on the target."""
        offset_map = self.maps.get((topic, partition), OffsetMap())
        return offset_map.translate(offset, self.progress.get((topic, partition)))


class CheckpointWriter:
    """Writes MM2 Checkpoint records for one flow; never repeats or moves one backwards (MM2's rule, see
    docs/mm2-semantics.md, *Checkpoints*)."""

    def __init__(self, flow: FlowConfig) -> None:
        assert flow.target_producer is not None and flow.target_consumer is not None
        self.flow = flow
        self.topic = checkpoints_topic(flow)
        self.last: dict[tuple[str, str, int], Checkpoint] = {}
        for msg in read_topic(
            flow.target, flow.target_consumer.settings(), self.topic, purpose="reading previous checkpoints"
        ):
            try:
                cp = Checkpoint.from_record(msg.key(), msg.value())
            except RecordFormatError:
                continue
            self.last[(cp.consumer_group_id, cp.topic, cp.partition)] = cp
        self._producer = new_producer(flow.target_producer.settings())

    def emit(self, rows: Iterable[GroupOffset], listed_at_ms: int) -> list[Checkpoint]:
        written = checkpoints_to_emit(rows, self.last)
        failures: list[KafkaError] = []
        for cp in written:
            self._producer.produce(
                self.topic,
                cp.record_value(),
                cp.record_key(),
                0,
                timestamp=listed_at_ms,
                on_delivery=lambda err, _m: failures.append(err) if err else None,
            )
        if self._producer.flush(30) > 0 or failures:
            raise KafkaOperationError(
                self.flow.target,
                f"writing checkpoints to {self.topic}",
                failures[0].str() if failures else "not acknowledged within 30 s",
            )
        return written


def checkpoints_to_emit(rows: Iterable[GroupOffset], last: dict[tuple[str, str, int], Checkpoint]) -> list[Checkpoint]:
    """MM2's checkpoint rule: a checkpoint is written only if it is "more recent" than the last one for its
    (group, downstream partition): there is none yet, the group rewound upstream, or the downstream offset grew.
    A repeat, or a downstream offset that went back without an upstream rewind, is skipped. ``last`` is
    updated with what is to be written."""
    written = []
    for row in rows:
        if row.translation.offset is None:
            continue
        cp = Checkpoint(
            row.group, row.remote_topic, row.partition, row.upstream_offset, row.translation.offset, row.metadata
        )
        previous = last.get((cp.consumer_group_id, cp.topic, cp.partition))
        if previous is not None and not (
            cp.upstream_offset < previous.upstream_offset or cp.downstream_offset > previous.downstream_offset
        ):
            continue
        last[(cp.consumer_group_id, cp.topic, cp.partition)] = cp
        written.append(cp)
    return written


class Commit(NamedTuple):
    """An offset to commit for a group on one target partition, with the source commit's metadata."""

    offset: int
    metadata: str = ""


def merged_group_offsets(rows: Iterable[GroupOffset]) -> dict[str, dict[tuple[str, int], Commit]]:
    """Per group, the offset to commit on each target partition: the smallest translation of any source.

    When several sources feed one remote partition (IdentityReplicationPolicy merges), each source's exact
    translation is safe for that source alone; the minimum is safe for all of them, at the cost of re-reading
    the other sources' records between the minimum and their own translations. Sources where the group has
    no committed offset for the partition are not considered. The metadata is that of the chosen commit.
    """
    result: dict[str, dict[tuple[str, int], Commit]] = {}
    for row in rows:
        if row.translation.offset is None:
            continue
        offsets = result.setdefault(row.group, {})
        key = (row.remote_topic, row.partition)
        if key not in offsets or row.translation.offset < offsets[key].offset:
            offsets[key] = Commit(row.translation.offset, row.metadata)
    return result


REFUSED = "refused: "  # the outcome of a group an ACL keeps group offset sync from


def sync_group_offsets(target: ClusterAdmin, offsets: Mapping[str, Mapping[tuple[str, int], Commit]]) -> dict[str, str]:
    """MM2's group offset sync (KIP-545) for groups idle on the target; never rewinds a committed offset.

    Returns group -> what happened (for logs and tests); a group the target's ACLs keep this principal from
    (no Describe or Read on the group) is ``refused: ...`` and the others are synced, as MM2 logs such a group
    and goes on.
    """
    outcome: dict[str, str] = {}
    for group, wanted in offsets.items():
        try:
            state = target.group_state(group)
            if state not in IDLE_GROUP_STATES:
                outcome[group] = f"skipped: the group is {state} on {target.alias}"
                continue
            current = target.committed_offsets(group)
            commit = {tp: c for tp, c in wanted.items() if current.get(tp, -1) < c.offset}
            target.alter_group_offsets(
                group, {tp: c.offset for tp, c in commit.items()}, {tp: c.metadata for tp, c in commit.items()}
            )
        except KafkaOperationError as exc:
            if not exc.refused:
                raise
            outcome[group] = (
                f"{REFUSED}{exc}; grant Describe and Read on group {group} and Read on its remote topics "
                f"({target.alias})"
            )
            continue
        outcome[group] = f"committed {len(commit)} partition(s)"
    return outcome


def execute_translation(target: ClusterAdmin, group: str, rows: list[GroupOffset]) -> int:
    """``translate-offsets --execute``: commit the translated offsets if the target group is idle.

    Unlike the periodic sync, this is an explicit operator action, so it may move offsets backwards.
    """
    state = target.group_state(group)
    if state not in IDLE_GROUP_STATES:
        raise CheckFailed(
            f"group {group} is {state} on {target.alias}: it has active members; stop its consumers and run again"
        )
    exact = [r for r in rows if r.translation.offset is not None]
    target.alter_group_offsets(
        group,
        {(r.remote_topic, r.partition): r.translation.offset for r in exact if r.translation.offset is not None},
        {(r.remote_topic, r.partition): r.metadata for r in exact},
    )
    return len(exact)


def now_ms() -> int:
    return int(time.time() * 1000)

"""What ``mm2py failover`` can know without the source, as rows a person reads and one JSON document.

Two tables, both from what the target holds alone:

- the recovery point, per source partition: the records known to exist on the source that the target lacks.
  Known only up to the end offset a run last listed for the partition (kept with the progress as the loss
  record's ``end``, mirror/loss.py); whatever was written to the source after that listing is unknowable
  without it, so the figure is a *lower bound*. Beside it, the age of the newest record in the remote
  partition: how far back in time the target stops.
- per group and partition, the offset committed on the target and the checkpoint it came from: MM2's own
  failover rule (``MirrorClient.remoteConsumerOffsets``, the newest checkpoint per partition wins), then the
  checkpoint's upstream offset translated again with the offset syncs the target holds, which can only move
  the group forward over records it already processed on the source (see ``landing``).

Pure logic, tested without a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mm2py.control.cutover_mark import CutoverMark
from mm2py.mirror.loss import LossState
from mm2py.mirror.record_formats import Checkpoint
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.mirror.translation import OffsetMap


@dataclass(frozen=True)
class RecoveryPoint:
    """One source partition at failover: what the target holds of it, and what the source had beyond that."""

    topic: str
    partition: int
    remote_topic: str
    replicated_to: int | None  # the first offset the target lacks (last replicated + 1); None: nothing copied
    listed_end: int | None  # the source's end offset a run last listed; None: no listing kept
    newest_age_s: float | None  # age of the newest record of the remote partition; None: it is empty
    # Records the remote partition holds after the one the progress names last: a range in flight when the run
    # died (written, its progress not yet). Counted off the bound, which must never exceed the truth.
    beyond_progress: int = 0

    @property
    def not_replicated(self) -> int:
        """Records known to have existed on the source that the target lacks: a lower bound (0 where nothing
        is known: no listing kept, or nothing copied, so no position to count from)."""
        if self.listed_end is None or self.replicated_to is None:
            return 0
        return max(0, self.listed_end - self.replicated_to - self.beyond_progress)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote_topic": self.remote_topic,
            "replicated_to": self.replicated_to,
            "listed_end": self.listed_end,
            "not_replicated_at_least": self.not_replicated,
            "newest_replicated_age_seconds": self.newest_age_s,
            "on_target_beyond_progress": self.beyond_progress,
        }


def recovery_points(
    remote: Mapping[str, str],
    progress: Mapping[TopicPartition, int],
    losses: Mapping[TopicPartition, LossState],
    newest_ms: Mapping[TopicPartition, int],
    now_ms: int,
    beyond: Mapping[TopicPartition, int] | None = None,
) -> list[RecoveryPoint]:
    """One row per source partition of the topics in ``remote`` (source topic -> remote topic) that the target
    has progress or a kept listing for. ``progress`` holds last replicated offsets (MM2's progress records),
    ``losses`` the kept loss states (their ``end``: the listing), ``newest_ms`` the timestamp of the newest
    record per *remote* partition, ``beyond`` the records each remote partition holds after the last
    replicated one (per source partition)."""
    known = {tp for tp in progress if tp[0] in remote}
    known |= {tp for tp, s in losses.items() if tp[0] in remote and s.end >= 0}
    rows = []
    for topic, partition in sorted(known):
        last = progress.get((topic, partition))
        end = losses.get((topic, partition), LossState()).end
        stamp = newest_ms.get((remote[topic], partition))
        rows.append(
            RecoveryPoint(
                topic,
                partition,
                remote[topic],
                None if last is None else last + 1,
                end if end >= 0 else None,
                None if stamp is None else round(max(0.0, (now_ms - stamp) / 1000), 1),
                (beyond or {}).get((topic, partition), 0),
            )
        )
    return rows


@dataclass(frozen=True)
class StampedCheckpoint:
    """A checkpoint as read from the checkpoints topic, with its record's timestamp (when it was listed)."""

    checkpoint: Checkpoint
    timestamp_ms: int


def latest_checkpoints(
    read: Iterable[StampedCheckpoint], wanted: Iterable[str] | None = None
) -> dict[tuple[str, str, int], StampedCheckpoint]:
    """The checkpoint each group resumes from, per (group, remote topic, partition).

    MM2's rule, from ``MirrorClient.remoteConsumerOffsets`` (connect/mirror-client, which
    ``RemoteClusterUtils.translateOffsets`` calls): the checkpoints topic of the remote cluster is read from
    its beginning to its end; every record of the group is put into a map keyed by its topic-partition, so the
    last one in the topic's order wins, whatever its offsets; records that do not decode are skipped (the
    caller has done that). ``wanted`` narrows the groups (None: every group found).
    """
    groups = None if wanted is None else set(wanted)
    latest: dict[tuple[str, str, int], StampedCheckpoint] = {}
    for stamped in read:
        cp = stamped.checkpoint
        if groups is None or cp.consumer_group_id in groups:
            latest[(cp.consumer_group_id, cp.topic, cp.partition)] = stamped
    return latest


@dataclass(frozen=True)
class GroupLanding:
    """Where one group's partition resumes on the target, and from which checkpoint."""

    group: str
    remote_topic: str
    partition: int
    checkpoint_upstream: int  # the group's committed offset on the source when the checkpoint was made
    checkpoint_downstream: int  # where the checkpoint says it resumes on the target
    checkpoint_age_s: float
    offset: int  # what is committed on the target
    method: str  # "checkpoint" (MM2's rule), "exact" or "syncs" (the syncs on the target moved it forward)
    metadata: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "remote_topic": self.remote_topic,
            "partition": self.partition,
            "checkpoint_upstream_offset": self.checkpoint_upstream,
            "checkpoint_downstream_offset": self.checkpoint_downstream,
            "checkpoint_age_seconds": self.checkpoint_age_s,
            "offset": self.offset,
            "method": self.method,
        }


def landing(
    stamped: StampedCheckpoint, syncs: OffsetMap | None, last_replicated: int | None, now_ms: int
) -> GroupLanding:
    """The offset to commit for one checkpoint.

    The checkpoint's downstream offset is MM2's answer, and it never skips: it is the translation of the
    group's position when the checkpoint was made, with the syncs of that moment. Where the syncs live on the
    target they are read again now: if the group's position had not been replicated yet then (a group ahead
    of the copy), it may be by now, and translating the same upstream offset again lands it exactly
    (``exact``), or at least further forward without passing it (``syncs``: MM2's rule on newer syncs still
    resumes at or before the true position). A re-translation is never taken when it would move backwards.
    """
    cp = stamped.checkpoint
    age = round(max(0.0, (now_ms - stamped.timestamp_ms) / 1000), 1)
    offset, method = cp.downstream_offset, "checkpoint"
    if syncs is not None:
        again = syncs.translate(cp.upstream_offset, last_replicated)
        if again.offset is not None and again.method == "exact" and again.offset >= cp.downstream_offset:
            offset, method = again.offset, "exact"
        elif again.offset is not None and again.offset > cp.downstream_offset:
            offset, method = again.offset, "syncs"
    return GroupLanding(
        cp.consumer_group_id,
        cp.topic,
        cp.partition,
        cp.upstream_offset,
        cp.downstream_offset,
        age,
        offset,
        method,
        cp.metadata,
    )


@dataclass
class FailoverReport:
    flow: str
    source: str
    target: str
    dry_run: bool
    syncs_read: bool = False  # False: the syncs live on the source (offset-syncs.topic.location = source)
    points: list[RecoveryPoint] = field(default_factory=list)
    landings: list[GroupLanding] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions committed on the target
    mark: CutoverMark | None = None  # written (or, in a dry run, the one that would be written)
    refusals: list[str] = field(default_factory=list)  # a dry run's checks that would refuse

    @property
    def groups(self) -> list[str]:
        return sorted({g.group for g in self.landings})

    def not_replicated(self) -> int:
        return sum(p.not_replicated for p in self.points)

    def newest_age_s(self) -> float | None:
        """The age of the newest record the target holds of the flow (the youngest remote partition)."""
        ages = [p.newest_age_s for p in self.points if p.newest_age_s is not None]
        return min(ages) if ages else None

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            "source_contacted": False,
            "syncs_read": self.syncs_read,
            "recovery_point": {
                "not_replicated_at_least": self.not_replicated(),
                "lower_bound": True,
                "newest_replicated_age_seconds": self.newest_age_s(),
                "partitions": [p.to_json() for p in self.points],
            },
            "groups": [g.to_json() for g in self.landings],
            "committed": self.committed,
            "mark": self.mark.to_json() if self.mark is not None else None,
            "refusals": self.refusals,
        }

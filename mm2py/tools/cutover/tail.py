"""What ``mm2py failback`` computes before it touches anything: the source's divergent tail per partition, the
side topic that keeps it on the target, where the reverse flow starts, and where each group would stand on the
source. All pure (mappings in, rows out), so the rules are tested without a broker.

After ``cutover`` or ``failover`` of A->B the mark on B holds, per source partition, the position B holds A to
(``source_offset``: A's end at a switch-over, B's recovery point after a failover). Whatever A holds from there
to its end now is its *divergent tail*: records written to A that B never got.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mm2py.control.cutover_mark import CutoverMark, CutPosition
from mm2py.control.failback_record import FailbackRecord
from mm2py.mirror.topic_partition import TopicPartition

# Why "<remote topic>.failback-tail": under DefaultReplicationPolicy the remote topic already carries the
# source's alias (``A.orders``), so the side topic does too (``A.orders.failback-tail``). MM2's policy then reads
# it as a topic that came from A (``topicSource`` is A), and the reverse flow B->A's cycle rule never copies it
# back into A, where its records already are. It sorts next to the remote topic it completes, and it does not
# end in ``.internal``, so MM2 and mm2py treat it as an application topic that consumers may read.
TAIL_SUFFIX = ".failback-tail"
KEPT = "progress already past it"


def side_topic_name(remote_topic: str) -> str:
    return f"{remote_topic}{TAIL_SUFFIX}"


@dataclass(frozen=True)
class TailRange:
    """The divergent tail of one source partition: offsets ``from_offset`` (inclusive) to ``to_offset``
    (exclusive) on the source, and the side topic that keeps it on the target."""

    topic: str
    partition: int
    remote_topic: str
    side_topic: str
    from_offset: int
    to_offset: int
    deleted: int = 0  # offsets of the tail the source no longer holds (retention, DeleteRecords)
    truncated: bool = False  # the source now ends before the mark's position: re-created or truncated

    @property
    def count(self) -> int:
        """Offsets in the tail (records, unless the tail holds transaction markers: those are not copied)."""
        return max(0, self.to_offset - self.from_offset)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote_topic": self.remote_topic,
            "side_topic": self.side_topic,
            "from": self.from_offset,
            "to": self.to_offset,
            "count": self.count,
            "deleted": self.deleted,
            "truncated": self.truncated,
        }


def divergent_tail(
    positions: Iterable[CutPosition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    side_topic: Mapping[str, str] | None = None,
) -> list[TailRange]:
    """Per position of the mark, the source's records from the mark's ``source_offset`` to its end now.

    A source whose log now starts after the position lost the first offsets of its tail before they could be
    kept (``deleted``); one that now ends before the position was re-created or truncated (``truncated``, no
    tail: its offsets are not those the mark counted). ``side_topic`` maps a source topic to its side topic
    (``--tail-topic``); by default it is named after the remote topic."""
    names = side_topic or {}
    tails = []
    for p in sorted(positions, key=lambda p: (p.topic, p.partition)):
        tp = (p.topic, p.partition)
        start, end = earliest.get(tp, 0), latest.get(tp, p.source_offset)
        side = names.get(p.topic) or side_topic_name(p.remote_topic)
        if end < p.source_offset:
            tails.append(TailRange(p.topic, p.partition, p.remote_topic, side, end, end, truncated=True))
            continue
        first = max(p.source_offset, start)
        tails.append(TailRange(p.topic, p.partition, p.remote_topic, side, first, end, deleted=first - p.source_offset))
    return tails


def side_starts(
    recorded: FailbackRecord | None, mark: CutoverMark, ends_now: Mapping[TopicPartition, int]
) -> tuple[dict[TopicPartition, int], bool]:
    """Where this cut-over's tail begins in each side partition (``ends_now``: side partition -> end offset), and
    whether that must be recorded before copying. A record of this cut-over (the mark's time) holds: the side
    partition's records after its start are this tail's, kept by a failback that stopped half way. Without one,
    or with one of an earlier cut-over, the tail begins at the side partition's end now."""
    if recorded is None or recorded.mark_at_ms != mark.at_ms:
        return dict(ends_now), True
    starts = recorded.starts()
    if all(tp in starts for tp in ends_now):
        return {tp: starts[tp] for tp in ends_now}, False
    return {tp: starts.get(tp, end) for tp, end in ends_now.items()}, True


@dataclass(frozen=True)
class TailCopy:
    """What was kept of one partition's tail in the side topic, and the checks made after writing it."""

    topic: str
    partition: int
    side_topic: str
    records: int  # records of the tail (markers are not records)
    kept_before: int  # records of it the side partition held already (an earlier failback that stopped half way)
    copied: int  # records written by this failback
    side_start: int  # the side partition's offset where this tail begins
    side_end: int  # the side partition's end offset after the copy
    last_matches: bool  # the side partition's last record is the tail's last (key, value, headers, timestamp)

    @property
    def verified(self) -> bool:
        return self.side_end - self.side_start == self.records and self.last_matches

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "side_topic": self.side_topic,
            "records": self.records,
            "kept_before": self.kept_before,
            "copied": self.copied,
            "side_start": self.side_start,
            "side_end": self.side_end,
            "verified": self.verified,
        }


@dataclass(frozen=True)
class ReverseStart:
    """Where the reverse flow B->A starts one partition of B's own topic: ``offset`` is its first record."""

    topic: str
    partition: int
    offset: int
    reason: str  # "cut-over time", "end at the cut-over (the mark)", "end (nothing since the cut-over)", KEPT

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "reason": self.reason}


def reverse_starts(
    at_times: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    progress: Mapping[TopicPartition, int],
    cut_ends: Mapping[TopicPartition, int] | None = None,
) -> list[ReverseStart]:
    """Per partition of the reverse flow, its first record at or after the cut-over time (``at_times``: what
    ListOffsets by timestamp answered, -1 where no record is that late, so the end).

    ``cut_ends`` are the mark's remote partitions and their ends on the target at the cut-over. The reverse flow
    replicates one of them only under IdentityReplicationPolicy (the remote topic has the source topic's name;
    under DefaultReplicationPolicy MM2's cycle rule leaves ``A.orders`` out of B->A). There the target's records
    up to that end came from the source, and those after it were written on the target: the reverse flow starts
    exactly there, not by time, so nothing the source gave the target goes back to it.

    A partition whose stored progress is already at or past that start keeps it: those records were copied
    already, and going back would copy them twice. One behind it moves forward: what lies between is the
    target's history from before the cut-over, which the source had all along."""
    cut = cut_ends or {}
    starts = []
    for tp in sorted(at_times):
        at = at_times[tp]
        if tp in cut:
            start, reason = cut[tp], "end at the cut-over (the mark)"
        elif at >= 0:
            start, reason = at, "cut-over time"
        else:
            start, reason = ends.get(tp, 0), "end (nothing since the cut-over)"
        stored = progress.get(tp)
        if stored is not None and stored + 1 >= start:
            starts.append(ReverseStart(tp[0], tp[1], stored + 1, KEPT))
        else:
            starts.append(ReverseStart(tp[0], tp[1], start, reason))
    return starts


def progress_to_write(starts: Iterable[ReverseStart]) -> dict[TopicPartition, int]:
    """The progress records that make the next run start there (the last replicated offset: start - 1)."""
    return {(s.topic, s.partition): s.offset - 1 for s in starts if s.reason != KEPT}


@dataclass(frozen=True)
class GroupReturn:
    """Where a group that reads the remote topic on the target would stand on the source."""

    group: str
    remote_topic: str
    partition: int
    target_offset: int  # committed on the target
    source_offset: int | None  # its position on the source; None while it has not read what the cut-over left
    behind: int  # records of the remote partition it has still to read on the target
    tail: int  # offsets of the source's tail it never saw on the target (in the side topic)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "remote_topic": self.remote_topic,
            "partition": self.partition,
            "target_offset": self.target_offset,
            "source_offset": self.source_offset,
            "behind": self.behind,
            "tail": self.tail,
        }


def group_returns(
    committed: Mapping[str, Mapping[TopicPartition, int]], mark: CutoverMark, tails: Iterable[TailRange]
) -> list[GroupReturn]:
    """Per group and remote partition of the mark: a group at (or past) the remote partition's end at the cut-over
    has read everything the source gave the target, so on the source it stands where the divergent tail begins
    (the mark's source offset). A group behind that has records of the remote topic still to read on the target;
    where it would stand on the source is not known until it has read them (said, not guessed)."""
    tail_of = {(t.remote_topic, t.partition): t.count + t.deleted for t in tails}
    positions = {(p.remote_topic, p.partition): p for p in mark.positions}
    rows = []
    for group in sorted(committed):
        for (remote, partition), offset in sorted(committed[group].items()):
            p = positions.get((remote, partition))
            if p is None:
                continue
            behind = max(0, p.target_offset - offset)
            rows.append(
                GroupReturn(
                    group,
                    remote,
                    partition,
                    offset,
                    p.source_offset if behind == 0 else None,
                    behind,
                    tail_of.get((remote, partition), 0),
                )
            )
    return rows


@dataclass
class FailbackReport:
    flow: str  # the flow that was cut over, A->B
    reverse: str  # B->A
    source: str
    target: str
    dry_run: bool
    leave_tail: bool
    mark: CutoverMark | None = None
    tails: list[TailRange] = field(default_factory=list)
    copies: list[TailCopy] = field(default_factory=list)
    starts: list[ReverseStart] = field(default_factory=list)
    starts_written: int = 0
    groups: list[GroupReturn] = field(default_factory=list)
    cleared: bool = False
    writes_allowed: int | None = None  # ACL bindings of `cutover --deny-writes` deleted on the source
    refusals: list[str] = field(default_factory=list)

    def tail_records(self) -> int:
        return sum(t.count for t in self.tails)

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "reverse_flow": self.reverse,
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            "leave_tail": self.leave_tail,
            "mark": self.mark.to_json() if self.mark is not None else None,
            "tail": [t.to_json() for t in self.tails],
            "tail_count": self.tail_records(),
            "preserved": [c.to_json() for c in self.copies],
            "reverse_starts": [s.to_json() for s in self.starts],
            "reverse_starts_written": self.starts_written,
            "groups": [g.to_json() for g in self.groups],
            "mark_cleared": self.cleared,
            "write_denials_deleted": self.writes_allowed,
            "refusals": self.refusals,
        }

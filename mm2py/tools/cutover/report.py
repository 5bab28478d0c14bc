"""What ``mm2py cutover`` found and did, as rows a person reads and one JSON document a script reads.

Per group and partition: the offset on the source, the offset on the target it moves to, the method
(``exact`` from mm2py's dense offset syncs, MM2's ``conservative`` rule, or ``unavailable``), and the records
the group will read again and would skip there. Per topic: whether the target holds every record of the
source. Building the rows and naming what blocks a cut-over is pure, so it is tested without a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mm2py.control.checkpoints import GroupOffset
from mm2py.control.cutover_mark import CutoverMark
from mm2py.librdkafka.admin_acls import TopicAcl
from mm2py.librdkafka.admin_groups import GroupInfo
from mm2py.mirror.translation import OffsetMap
from mm2py.tools.lag import PartitionLag


@dataclass(frozen=True)
class GroupMove:
    """Where one group's partition resumes on the target after the cut-over, for one source of it."""

    group: str
    topic: str
    partition: int
    source_offset: int
    remote_topic: str
    target_offset: int | None  # committed on the target: on a merged partition, the smallest of the sources'
    method: str
    read_again: int | None  # None: not known (MM2's rule resumes at or before the true position)
    skipped: int | None  # None: no position to resume at
    reason: str = ""
    source: str = ""  # the cluster the group's offset was read on

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "source": self.source,
            "topic": self.topic,
            "partition": self.partition,
            "source_offset": self.source_offset,
            "remote_topic": self.remote_topic,
            "target_offset": self.target_offset,
            "method": self.method,
            "read_again": self.read_again,
            "skipped": self.skipped,
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass(frozen=True)
class SourceRow:
    """A group's translated offset as read on one source, with that source's offset syncs of the partition."""

    source: str
    row: GroupOffset
    offsets: OffsetMap | None = None


def group_moves(rows: Iterable[SourceRow]) -> list[GroupMove]:
    """One move per translated offset, and the offset each remote partition gets: the smallest translation of
    the sources that feed it (one source: its translation).

    Exact: nothing skipped and, for the source whose translation is committed, nothing read again, by
    construction (see mirror/translation.py). Where several sources merge into the partition (Identity
    replication of a topic from several clusters), the others' records between the committed offset and their
    own translations are read again, counted exactly from their dense syncs. MM2's rule never skips, but how
    many it re-reads is not known."""
    by_partition: dict[tuple[str, str, int], list[SourceRow]] = {}
    for r in rows:
        by_partition.setdefault((r.row.group, r.row.remote_topic, r.row.partition), []).append(r)
    moves = []
    for sources in by_partition.values():
        offsets = [r.row.translation.offset for r in sources if r.row.translation.offset is not None]
        commit = min(offsets) if offsets else None
        for r in sources:
            row, t = r.row, r.row.translation
            if t.offset is None or commit is None:
                read_again, skipped, committed = None, None, t.offset
            else:
                read_again = _read_again(r, commit) if t.method == "exact" else None
                skipped, committed = 0, commit
            moves.append(
                GroupMove(
                    row.group,
                    row.topic,
                    row.partition,
                    row.upstream_offset,
                    row.remote_topic,
                    committed,
                    t.method,
                    read_again,
                    skipped,
                    t.reason,
                    r.source,
                )
            )
    return moves


def _read_again(r: SourceRow, commit: int) -> int | None:
    translated = r.row.translation.offset
    assert translated is not None
    if translated == commit:
        return 0
    return r.offsets.records_downstream(commit, translated) if r.offsets is not None else None


@dataclass(frozen=True)
class TopicCheck:
    """Whether the target holds every record of one source topic: lag 0 on every partition."""

    topic: str
    remote_topic: str
    partitions: int
    source_records: int  # sum of the source's end offsets
    behind: int  # records the target lacks, summed over partitions
    lagging: tuple[int, ...] = ()  # partitions with lag
    source: str = ""  # the cluster the topic is on

    @property
    def holds_all(self) -> bool:
        return self.behind == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "topic": self.topic,
            "remote_topic": self.remote_topic,
            "partitions": self.partitions,
            "source_end_offsets": self.source_records,
            "lag": self.behind,
            "lagging_partitions": list(self.lagging),
            "holds_all": self.holds_all,
        }


def topic_checks(lags: Iterable[PartitionLag]) -> list[TopicCheck]:
    """One check per source topic (per source cluster: topics merged from several have one each)."""
    by_topic: dict[tuple[str, str], list[PartitionLag]] = {}
    for row in lags:
        by_topic.setdefault((row.source, row.topic), []).append(row)
    return [
        TopicCheck(
            topic,
            rows[0].remote_topic,
            len(rows),
            sum(r.source_end_offset for r in rows),
            sum(r.lag_records for r in rows),
            tuple(sorted(r.partition for r in rows if r.lag_records > 0)),
            source,
        )
        for (source, topic), rows in sorted(by_topic.items())
    ]


def members_refusal(group: str, cluster: str, info: GroupInfo) -> str | None:
    """The refusal for a group that still has members on ``cluster``, naming them; None when it has none."""
    if not info.members:
        return None
    named = ", ".join(f"{m.member_id} (client {m.client_id}, host {m.host})" for m in info.members[:5])
    more = f" and {len(info.members) - 5} more" if len(info.members) > 5 else ""
    return (
        f"group {group} has {len(info.members)} member(s) on {cluster}: {named}{more}; "
        "stop its consumers, or pass --allow-members"
    )


def lease_refusal(flow: str, target: str, info: GroupInfo, holder: str | None, why: str = "") -> str | None:
    """The refusal while a run holds the flow's lease (a member in its lease group on the target)."""
    if not info.members:
        return None
    clients = ", ".join(m.client_id for m in info.members)
    return (
        f"flow {flow} is being replicated by {holder or 'another run'} (lease members on {target}: {clients}){why}; "
        "stop that run first"
    )


def untranslatable(moves: Iterable[GroupMove]) -> list[str]:
    """A refusal per partition the target has no position for: committing nothing there would leave the group
    to auto.offset.reset on the target, which loses or repeats records silently."""
    return [
        f"group {m.group} {m.topic}-{m.partition} at offset {m.source_offset} on {m.source or 'the source'} "
        "cannot be translated: "
        f"{m.reason}"
        for m in moves
        if m.target_offset is None
    ]


def behind_refusal(target: str, checks: Iterable[TopicCheck]) -> str | None:
    lacking = [c for c in checks if not c.holds_all]
    if not lacking:
        return None
    named = "; ".join(f"{c.source} {c.topic}: {c.behind} record(s) on partitions {list(c.lagging)}" for c in lacking)
    return f"{target} does not hold all of the source: {named}"


@dataclass
class CutoverReport:
    flow: str
    source: str
    target: str
    dry_run: bool
    quiet_waited_s: float | None = None
    handovers: list[str] = field(default_factory=list)  # runs that held a flow: how each let go (dry run: whom to ask)
    copied: bool = False  # False: the topics' lag is the current lag, nothing was copied (dry run)
    topics: list[TopicCheck] = field(default_factory=list)
    moves: list[GroupMove] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions committed on the target
    marks: list[CutoverMark] = field(default_factory=list)  # one per flow: written (dry run: would be)
    marked: bool = False  # the marks are written: the cut-over is done
    # --deny-writes: per source cluster, the ACLs added there (in a dry run, that would be)
    denied: dict[str, list[TopicAcl]] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)  # a dry run's checks that would refuse

    @property
    def groups(self) -> list[str]:
        return sorted({m.group for m in self.moves})

    def totals(self) -> Mapping[str, int | None]:
        known = [m.read_again for m in self.moves]
        return {
            "read_again": None if None in known else sum(k or 0 for k in known),
            "skipped": sum(m.skipped or 0 for m in self.moves),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            "quiet_waited_seconds": self.quiet_waited_s,
            "handovers": self.handovers,
            "copied": self.copied,
            "topics": [t.to_json() for t in self.topics],
            "groups": [m.to_json() for m in self.moves],
            "committed": self.committed,
            "totals": dict(self.totals()),
            "marks": [m.to_json() for m in self.marks],
            "denied_writes": [{"cluster": c, **asdict(acl)} for c, acls in self.denied.items() for acl in acls],
            "refusals": self.refusals,
        }

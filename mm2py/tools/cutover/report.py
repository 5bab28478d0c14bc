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
from mm2py.tools.lag import PartitionLag


@dataclass(frozen=True)
class GroupMove:
    """Where one group's partition resumes on the target after the cut-over."""

    group: str
    topic: str
    partition: int
    source_offset: int
    remote_topic: str
    target_offset: int | None
    method: str
    read_again: int | None  # None: not known (MM2's rule resumes at or before the true position)
    skipped: int | None  # None: no position to resume at
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
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


def group_moves(rows: Iterable[GroupOffset]) -> list[GroupMove]:
    """One move per translated offset. Exact: nothing read again, nothing skipped, by construction (see
    mirror/translation.py). Conservative: MM2's rule never skips, but how many it re-reads is not known."""
    moves = []
    for row in rows:
        t = row.translation
        read_again = 0 if t.method == "exact" else None
        skipped = None if t.offset is None else 0
        moves.append(
            GroupMove(
                row.group,
                row.topic,
                row.partition,
                row.upstream_offset,
                row.remote_topic,
                t.offset,
                t.method,
                read_again,
                skipped,
                t.reason,
            )
        )
    return moves


@dataclass(frozen=True)
class TopicCheck:
    """Whether the target holds every record of one source topic: lag 0 on every partition."""

    topic: str
    remote_topic: str
    partitions: int
    source_records: int  # sum of the source's end offsets
    behind: int  # records the target lacks, summed over partitions
    lagging: tuple[int, ...] = ()  # partitions with lag

    @property
    def holds_all(self) -> bool:
        return self.behind == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "remote_topic": self.remote_topic,
            "partitions": self.partitions,
            "source_end_offsets": self.source_records,
            "lag": self.behind,
            "lagging_partitions": list(self.lagging),
            "holds_all": self.holds_all,
        }


def topic_checks(lags: Iterable[PartitionLag]) -> list[TopicCheck]:
    by_topic: dict[str, list[PartitionLag]] = {}
    for row in lags:
        by_topic.setdefault(row.topic, []).append(row)
    return [
        TopicCheck(
            topic,
            rows[0].remote_topic,
            len(rows),
            sum(r.source_end_offset for r in rows),
            sum(r.lag_records for r in rows),
            tuple(sorted(r.partition for r in rows if r.lag_records > 0)),
        )
        for topic, rows in sorted(by_topic.items())
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
        f"group {m.group} {m.topic}-{m.partition} at offset {m.source_offset} on the source cannot be translated: "
        f"{m.reason}"
        for m in moves
        if m.target_offset is None
    ]


def behind_refusal(target: str, checks: Iterable[TopicCheck]) -> str | None:
    lacking = [c for c in checks if not c.holds_all]
    if not lacking:
        return None
    named = "; ".join(f"{c.topic}: {c.behind} record(s) on partitions {list(c.lagging)}" for c in lacking)
    return f"{target} does not hold all of the source: {named}"


@dataclass
class CutoverReport:
    flow: str
    source: str
    target: str
    dry_run: bool
    quiet_waited_s: float | None = None
    handover: str | None = None  # a run that held the flow: how it let go (or, in a dry run, whom to ask)
    copied: bool = False  # False: the topics' lag is the current lag, nothing was copied (dry run)
    topics: list[TopicCheck] = field(default_factory=list)
    moves: list[GroupMove] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions committed on the target
    mark: CutoverMark | None = None  # written (or, in a dry run, the one that would be written)
    marked: bool = False  # the mark is written: the cut-over is done
    denied: list[TopicAcl] = field(default_factory=list)  # --deny-writes: added on the source (dry run: would be)
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
            "handover": self.handover,
            "copied": self.copied,
            "topics": [t.to_json() for t in self.topics],
            "groups": [m.to_json() for m in self.moves],
            "committed": self.committed,
            "totals": dict(self.totals()),
            "mark": self.mark.to_json() if self.mark is not None else None,
            "denied_writes": [asdict(acl) for acl in self.denied],
            "refusals": self.refusals,
        }

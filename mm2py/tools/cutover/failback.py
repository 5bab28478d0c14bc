"""``mm2py failback``: after a ``cutover`` or ``failover`` of A->B, with A back, hand the data back to A.

In order, each step a check that names what blocks it: the mark on B (control/cutover_mark.py) gives, per source
partition, the position B holds A to; A's records after it are its *divergent tail* (tail.py), which is copied
into a side topic on B (tail_copy.py) or only named (``--leave-tail``), so nothing A took after the cut-over is
dropped unseen. The reverse flow B->A is then given its starting positions in its progress on A
(``mm2-offsets.B.internal``): the first record of each of B's own topics at or after the mark's time, so its next
``run`` copies what applications wrote on B since the cut-over and none of B's history. The write denials a
``cutover --deny-writes`` added on A (named in the mark) are deleted. The groups reading the
remote topics on B are reported with the position each would have on A (``cutover --flow B->A`` moves them
later). Last, the mark is cleared: only once the tail is kept and the reverse start written, so a failback that
stops half way is run again as a whole, and copies nothing twice.

A dry run does every check and reads everything, and writes nothing. Driver side only.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.cutover_mark import CutoverMark, read_mark, write_mark
from mm2py.control.failback_record import write_failback_record
from mm2py.control.handover import running_lease
from mm2py.control.plan import build_plan, flow_policy
from mm2py.control.progress_store import read_progress, write_progress
from mm2py.control.topics import ensure_internal_topics, internal_topics
from mm2py.errors import CheckFailed, UsageError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.mirror.filters import load_group_filter
from mm2py.tools.cutover.deny_writes import allow_writes_again
from mm2py.tools.cutover.report import lease_refusal
from mm2py.tools.cutover.tail import (
    FailbackReport,
    ReverseStart,
    TailRange,
    divergent_tail,
    group_returns,
    progress_to_write,
    reverse_starts,
)
from mm2py.tools.cutover.tail_copy import preserve_tail

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailbackOptions:
    groups: re.Pattern[str] | None = None  # None: the flow's groups / groups.exclude (its GroupFilter)
    tail_topic: str | None = None  # None: one side topic per source topic, named after its remote topic
    leave_tail: bool = False  # name the tail in the report, copy nothing
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.tail_topic is not None and self.leave_tail:
            raise UsageError(f"--tail-topic {self.tail_topic} and --leave-tail: give one of them, not both")
        if self.tail_topic is not None and not self.tail_topic.strip():
            raise UsageError("--tail-topic: give a topic name")


def fail_back(
    flow: FlowConfig, reverse: FlowConfig, options: FailbackOptions, pool: AdminPool | None = None
) -> FailbackReport:
    """Fail ``flow`` (A->B) back: keep A's divergent tail on B, start ``reverse`` (B->A) from the cut-over point,
    clear the mark (or, with ``options.dry_run``, say what would be done and what would refuse)."""
    pool = pool or AdminPool()
    target = pool.admin(flow.target, flow)
    source = pool.admin(flow.source, flow)
    report = FailbackReport(flow.name, reverse.name, flow.source, flow.target, options.dry_run, options.leave_tail)
    mark = read_mark(flow, target)  # lists B's topics first: an unreachable B fails here (exit 3)
    if mark is None:
        raise CheckFailed(
            f"flow {flow.name} is not marked as cut over on {flow.target}: there is nothing to fail back "
            f"(`mm2py cutover` or `mm2py failover` marks it)"
        )
    report.mark = mark
    _refuse(
        report,
        lease_refusal(reverse.name, reverse.target, *running_lease(reverse, pool.admin(reverse.target, reverse))),
    )
    report.tails = _tails(flow, source, mark, options)
    report.groups = group_returns(_committed_on_target(flow, target, mark, options.groups), mark, report.tails)
    report.starts = _reverse_starts(reverse, pool, mark)
    if options.dry_run:
        return report
    if not options.leave_tail:
        partitions = {name: info.partitions for name, info in source.list_topics().items()}
        report.copies = preserve_tail(flow, target, mark, report.tails, partitions)
    writes = progress_to_write(report.starts)
    # The progress topic the next run of B->A reads, created as that run would create it (not by the broker's
    # auto-creation, which would give it one partition instead of offset.storage.partitions).
    progress = [t for t in internal_topics(reverse) if t.feature is None]
    ensure_internal_topics({reverse.target: pool.admin(reverse.target, reverse)}, progress)
    write_progress(reverse.target, reverse.target_producer.settings(), reverse.source, writes)
    report.starts_written = len(writes)
    # A takes writes again (the applications return to it later): before the mark goes, which names them.
    report.writes_allowed = allow_writes_again(source, mark.denied_writes) if mark.denied_writes else None
    write_mark(flow, target, None)
    write_failback_record(flow, target, None)  # after the mark: cleared before it, a crash would copy the tail again
    report.cleared = True
    log.info("flow=%s failed back: mark cleared on %s; %s starts at the cut-over", flow.name, flow.target, reverse.name)
    return report


def _refuse(report: FailbackReport, message: str | None) -> None:
    """A refusal stops a failback at once (exit 1); a dry run notes it and goes on, to report every one."""
    if message is None:
        return
    if not report.dry_run:
        raise CheckFailed(message)
    log.warning("flow=%s dry run: would refuse: %s", report.flow, message)
    report.refusals.append(message)


def _tails(flow: FlowConfig, source: ClusterAdmin, mark: CutoverMark, options: FailbackOptions) -> list[TailRange]:
    """A's divergent tail per partition of the mark: from the mark's position to A's end now."""
    partitions = sorted({(p.topic, p.partition) for p in mark.positions})
    topics = sorted({t for t, _p in partitions})
    if options.tail_topic is not None and len(topics) > 1:
        raise UsageError(
            f"--tail-topic {options.tail_topic}: the mark of {flow.name} covers {len(topics)} topics "
            f"({', '.join(topics)}); leave --tail-topic out to get one side topic per topic"
        )
    existing = source.list_topics()  # an unreachable A fails here (exit 3)
    present = [tp for tp in partitions if tp[0] in existing and tp[1] < existing[tp[0]].partitions]
    earliest = source.list_offsets(present, "earliest") if present else {}
    latest = source.list_offsets(present, "latest") if present else {}
    names = {topics[0]: options.tail_topic} if options.tail_topic is not None else None
    return divergent_tail(mark.positions, earliest, latest, names)


def _committed_on_target(
    flow: FlowConfig, target: ClusterAdmin, mark: CutoverMark, pattern: re.Pattern[str] | None
) -> dict[str, dict[tuple[str, int], int]]:
    """The matching groups' committed offsets on B on the mark's remote topics (groups of other topics left out)."""
    remote = {p.remote_topic for p in mark.positions}
    if pattern is not None:
        groups = [g for g in target.list_groups() if pattern.fullmatch(g)]
    else:
        group_filter = load_group_filter(flow.group_filter_class, flow.plugin_config())
        groups = [g for g in target.list_groups() if group_filter.should_replicate_group(g)]
    committed = {}
    for group in groups:
        offsets = {tp: o for tp, o in target.committed_offsets(group).items() if tp[0] in remote}
        if offsets:
            committed[group] = offsets
    return committed


def _reverse_starts(reverse: FlowConfig, pool: AdminPool, mark: CutoverMark) -> list[ReverseStart]:
    """Where B->A starts each partition of B's topics it replicates: the first record at or after the mark's time
    (ListOffsets by timestamp), or, for a remote topic of the mark (IdentityReplicationPolicy: the same name both
    ways), its end on B at the cut-over; unless its progress on A is already past that."""
    policy = flow_policy(reverse)
    plan = build_plan([reverse], pool).flows[0]  # B's topics, by B->A's filter and MM2's cycle rule
    partitions = [
        (t.topic, p) for t in plan.topics if not policy.is_heartbeats_topic(t.topic) for p in range(t.partitions)
    ]
    if not partitions:
        return []
    b = pool.admin(reverse.source, reverse)
    at_times = b.offsets_for_times(partitions, mark.at_ms)
    ends = b.list_offsets(partitions, "latest")
    progress = read_progress(reverse.target, reverse.target_consumer.settings(), reverse.source)
    cut_ends = {(p.remote_topic, p.partition): p.target_offset for p in mark.positions}
    return reverse_starts(at_times, ends, progress, cut_ends)

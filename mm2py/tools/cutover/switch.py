"""``mm2py cutover``: the planned switch-over of a flow's consumer groups from its source A to its target B.

The steps, each a check that names what blocks it: the flow is not cut over already; a run holding its lease hands
it over (control/handover.py: asked through the lease topic, it ends its generation and stands by), or the cut-over
refuses once --handover-timeout passes; A's end offsets are still for the quiet time (its producers stopped); the
groups have no members on A or B; the flow is copied to lag 0 (``run --once``'s engine entry, handed in by the CLI
so this module starts without a JVM) and B holds every record of A; every group's offsets translate exactly (or by
MM2's rule, reported); then the offsets are committed on B and the mark is written (control/cutover_mark.py), so
``run`` never writes into B again for this flow. A dry run does every check, reads the current lag instead of
copying, and changes nothing. Driver side only.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import FlowTranslator, GroupOffset, execute_translation
from mm2py.control.cutover_mark import CutoverMark, CutPosition, new_mark, read_marks, write_mark
from mm2py.control.handover import clear_handover, read_claims, request_handover, running_lease
from mm2py.control.lease import lease_group
from mm2py.control.plan import FlowPlan, ReplicationPlan, build_plan, flow_policy
from mm2py.control.topics import LEASE_TOPIC
from mm2py.errors import CheckFailed, KafkaOperationError, UsageError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.tools.cutover.between_syncs import matched
from mm2py.tools.cutover.deny_writes import allow_writes_again, deny_writes
from mm2py.tools.cutover.groups import moving_groups
from mm2py.tools.cutover.quiet import wait_for_quiet
from mm2py.tools.cutover.report import (
    CutoverReport,
    SourceRow,
    behind_refusal,
    group_moves,
    lease_refusal,
    members_refusal,
    topic_checks,
    untranslatable,
)
from mm2py.tools.cutover.returns import returning_rows
from mm2py.tools.lag import PartitionLag, partition_lags

log = logging.getLogger(__name__)

COMMAND = "cutover"
# The copy to lag 0: returns the flows it found held by another run (nothing was copied for those).
CopyOnce = Callable[[], list[str]]
HANDOVER_POLL_S = 0.5  # how often the lease group is described while its run lets go of the flow


@dataclass(frozen=True)
class CutoverOptions:
    groups: re.Pattern[str] | None = None  # None: the flow's groups / groups.exclude (its GroupFilter)
    quiet_s: float = 10.0
    quiet_timeout_s: float = 300.0
    allow_members: bool = False
    dry_run: bool = False
    handover_timeout_s: float = 60.0
    deny_writes: bool = False  # make the source refuse writes to the flow's topics (tools/cutover/deny_writes.py)

    def __post_init__(self) -> None:
        if self.quiet_timeout_s < self.quiet_s:
            raise UsageError(
                f"--quiet-timeout {self.quiet_timeout_s:g}: must be at least --quiet-seconds ({self.quiet_s:g})"
            )


class _Checks:
    """A refusal stops a cut-over at once (exit 1); a dry run notes it and goes on, to report every one."""

    def __init__(self, report: CutoverReport) -> None:
        self.report = report

    def refuse(self, message: str | None) -> None:
        if message is None:
            return
        if not self.report.dry_run:
            raise CheckFailed(message)
        log.warning("flow=%s dry run: would refuse: %s", self.report.flow, message)
        self.report.refusals.append(message)


def cut_over(
    flows: Sequence[FlowConfig],
    options: CutoverOptions,
    copy: CopyOnce,
    pool: AdminPool | None = None,
    wait: Callable[[float], object] | None = None,
    reverses: Mapping[str, FlowConfig] | None = None,
) -> CutoverReport:
    """Switch the groups of ``flows`` (one, or several into one target, cut over together) from their sources to
    the target (or, with ``options.dry_run``, say what would happen and what would refuse); the report says
    what was found and done. ``reverses`` (flow name -> its reverse flow) lets groups reading the reverse's
    copies on a source move back to the originals (returns.py)."""
    flows = list(flows)
    if len({f.target for f in flows}) != 1:
        raise UsageError(f"--flow {','.join(f.name for f in flows)}: flows cut over together share one target")
    pool = pool or AdminPool()
    wait = wait or threading.Event().wait
    first = flows[0]
    names, sources = ",".join(f.name for f in flows), ",".join(f.source for f in flows)
    report = CutoverReport(names, sources, first.target, options.dry_run)
    checks = _Checks(report)
    target = pool.admin(first.target, first)
    # One read of the lease topic for every flow's mark (they share the target); none when it does not exist.
    marks = read_marks(first.target, first.target_consumer.settings()) if LEASE_TOPIC in target.list_topics() else {}
    for flow in flows:
        existing = marks.get(flow.name)
        if existing is not None:
            checks.refuse(f"flow {flow.name} is already {existing.describe()}; `--reset` clears the mark")
    asked: list[FlowConfig] = []
    try:
        asked.extend(f for f in flows if _hand_over(f, target, options, report, checks, wait))
        return _switch(flows, options, copy, pool, report, checks, wait, reverses or {})
    finally:
        if not options.dry_run and not report.marked:
            _undo_denials(flows, report, pool)
        for flow in asked:  # after the marks (if any): a run that reads the request gone reads the mark too
            try:
                clear_handover(flow, target)
            except KafkaOperationError as exc:
                log.error("flow=%s: %s; `mm2py cutover --reset` clears the request", flow.name, exc)


def _undo_denials(flows: list[FlowConfig], report: CutoverReport, pool: AdminPool) -> None:
    """A cut-over that did not end leaves the sources taking writes as before."""
    for flow in flows:
        denied = report.denied.get(flow.source)
        if not denied:
            continue
        log.warning("flow=%s: the cut-over did not end: deleting the write denials it added", flow.name)
        try:
            allow_writes_again(pool.admin(flow.source, flow), denied)
        except KafkaOperationError as exc:
            named = ", ".join(f"DENY WRITE on topic {a.topic} for {a.principal}" for a in denied)
            log.error("flow=%s: %s; delete by hand on %s: %s", flow.name, exc, flow.source, named)


def _hand_over(
    flow: FlowConfig,
    target: ClusterAdmin,
    options: CutoverOptions,
    report: CutoverReport,
    checks: _Checks,
    wait: Callable[[float], object],
) -> bool:
    """Ask the runs in the flow's lease group to let go of it, and wait until the group is empty: True when it
    was asked (the request stands until the cut-over ends). A dry run only says whom it would ask."""
    info, holder = running_lease(flow, target)
    if not info.members:
        return False
    holder = holder or "the run holding it"
    if options.dry_run:
        report.handovers.append(f"would ask {holder} to hand {flow.name} over")
        return False
    request_handover(flow, target)
    started = time.monotonic()
    while info.members and time.monotonic() - started < options.handover_timeout_s:
        wait(HANDOVER_POLL_S)
        info = target.describe_group(lease_group(flow.source, flow.target))
    if info.members:
        clear_handover(flow, target)
        why = f", which did not hand the flow over within --handover-timeout {options.handover_timeout_s:g} s"
        checks.refuse(lease_refusal(flow.name, flow.target, info, holder, why))
    said = f"{holder} handed {flow.name} over in {time.monotonic() - started:.1f} s and stands by"
    report.handovers.append(said)
    log.info("flow=%s: %s", flow.name, said)
    return True


def _switch(
    flows: list[FlowConfig],
    options: CutoverOptions,
    copy: CopyOnce,
    pool: AdminPool,
    report: CutoverReport,
    checks: _Checks,
    wait: Callable[[float], object],
    reverses: Mapping[str, FlowConfig],
) -> CutoverReport:
    """The cut-over once no other run has the flows: quiet, members, copy, translation, commits and the marks."""
    plans = [_application_topics(f, p) for f, p in zip(flows, build_plan(flows, pool).flows, strict=True)]
    first, target = flows[0], pool.admin(flows[0].target, flows[0])
    for flow, plan in zip(flows, plans, strict=True):
        _quiet_source(flow, plan, pool.admin(flow.source, flow), options, report, checks, wait)
    groups = {
        f.name: moving_groups(f, pool.admin(f.source, f), options.groups, {t.topic for t in p.topics})
        for f, p in zip(flows, plans, strict=True)
    }
    if not options.allow_members:
        for flow in flows:
            for group in groups[flow.name]:
                checks.refuse(members_refusal(group, flow.source, pool.admin(flow.source, flow).describe_group(group)))
        for group in sorted({g for named in groups.values() for g in named}):
            checks.refuse(members_refusal(group, first.target, target.describe_group(group)))
    if not options.dry_run:
        held = copy()
        if held:
            raise CheckFailed(f"another run took a flow while it was being copied: {'; '.join(held)}")
        report.copied = True
    lags = partition_lags(flows, ReplicationPlan(tuple(plans)), pool, None, int(time.time() * 1000))
    report.topics = topic_checks(lags)
    if not options.dry_run:  # a dry run reports the current lag, which the copy would have closed
        checks.refuse(behind_refusal(first.target, report.topics))
    rows: list[SourceRow] = []
    translators = []
    for flow, plan in zip(flows, plans, strict=True):  # after the copy: the syncs and progress are complete
        translator = FlowTranslator(flow, plan, pool.admin(flow.source, flow))
        translators.append((translator, plan))
        topics = [t.topic for t in plan.topics]
        for group in groups[flow.name]:
            rows += [
                SourceRow(flow.source, r, translator.maps.get((r.topic, r.partition)))
                for r in translator.translate(group, topics)
            ]
    if len(flows) > 1:
        rows += _from_first_records(translators, rows)
    else:  # one source per partition: where MM2's syncs give no exact answer, match records (between_syncs.py)
        rows = matched(flows[0], rows)
    back = _returning(flows, reverses, pool, options, checks, {g for named in groups.values() for g in named})
    report.moves = group_moves(rows + back)
    # Refused where no position exists; a dry run's own topics not copied yet would be translated after the copy.
    complete = {(t.source, t.topic) for t in report.topics if t.holds_all} | {(r.source, r.row.topic) for r in back}
    for refusal in untranslatable(m for m in report.moves if (m.source, m.topic) in complete):
        checks.refuse(refusal)
    rows += back
    for flow in flows:
        positions = _positions([r for r in lags if r.flow == flow.name], target, pool, flow)
        report.marks.append(new_mark(flow, COMMAND, positions, report.denied.get(flow.source, ())))
    if options.dry_run:
        return report
    # A run started since the hand-over and not stood by (an mm2py without hand-over) would copy into B again.
    for flow in flows:
        checks.refuse(lease_refusal(flow.name, flow.target, *running_lease(flow, target)))
    for group, chosen in _committed_rows(rows).items():
        report.committed[group] = execute_translation(target, group, chosen)
        log.info("group=%s committed=%d on %s", group, report.committed[group], first.target)
    for flow, mark in zip(flows, report.marks, strict=True):
        write_mark(flow, target, mark)
    report.marked = True
    log.info("%s cut over to %s; run refuses them until `cutover --reset`", report.flow, first.target)
    return report


def _from_first_records(translators: list[tuple[FlowTranslator, FlowPlan]], rows: list[SourceRow]) -> list[SourceRow]:
    """Merged partitions: a source on which the group has no committed offset for a partition that other sources
    feed too. The group has read none of that source's records there, so on the target it must not start past
    that source's first record (else those records would be skipped): a row at the partition's first offset."""
    fed = {(r.row.group, r.row.remote_topic, r.row.partition) for r in rows}
    have = {(r.source, r.row.group, r.row.remote_topic, r.row.partition) for r in rows}
    extra: list[SourceRow] = []
    for translator, plan in translators:
        alias = translator.flow.source
        wanted = [
            (group, t.topic, t.remote_topic, p)
            for t in plan.topics
            for group, remote, p in sorted(fed)
            if remote == t.remote_topic and p < t.partitions and (alias, group, remote, p) not in have
        ]
        partitions = sorted({(topic, p) for _g, topic, _r, p in wanted})
        if not partitions:
            continue
        first = translator.source.list_offsets(partitions, "earliest")
        ends = translator.source.list_offsets(partitions, "latest")
        for group, topic, remote, p in wanted:
            start = first[(topic, p)]
            if start >= ends[(topic, p)]:
                continue  # no record of this source there: nothing to read
            reason = f"no committed offset on {alias}: from its first record"
            translation = replace(translator.translate_offset(topic, p, start), reason=reason)
            row = GroupOffset(group, topic, remote, p, start, translation)
            extra.append(SourceRow(alias, row, translator.maps.get((topic, p))))
    return extra


def _returning(
    flows: list[FlowConfig],
    reverses: Mapping[str, FlowConfig],
    pool: AdminPool,
    options: CutoverOptions,
    checks: _Checks,
    checked: set[str],
) -> list[SourceRow]:
    """The rows of groups that read the reverse flows' copies on the sources (returns.py), their members checked
    as the other groups' were."""
    back = [
        r for f in flows if (reverse := reverses.get(f.name)) for r in returning_rows(f, reverse, pool, options.groups)
    ]
    if not options.allow_members:
        for group in sorted({r.row.group for r in back} - checked):
            for flow in flows:
                for alias in (flow.source, flow.target):
                    checks.refuse(members_refusal(group, alias, pool.admin(alias, flow).describe_group(group)))
    return back


def _committed_rows(rows: list[SourceRow]) -> dict[str, list[GroupOffset]]:
    """Per group, the row committed on each remote partition: the smallest translation of the sources feeding
    it (``group_moves`` reports the same choice), with that source commit's metadata."""
    chosen: dict[str, dict[tuple[str, int], GroupOffset]] = {}
    for r in rows:
        offset = r.row.translation.offset
        if offset is None:
            continue
        per_group = chosen.setdefault(r.row.group, {})
        key = (r.row.remote_topic, r.row.partition)
        if key not in per_group or offset < (per_group[key].translation.offset or 0):
            per_group[key] = r.row
    return {group: list(per_partition.values()) for group, per_partition in chosen.items()}


def _quiet_source(
    flow: FlowConfig,
    plan: FlowPlan,
    source: ClusterAdmin,
    options: CutoverOptions,
    report: CutoverReport,
    checks: _Checks,
    wait: Callable[[float], object],
) -> None:
    """The flow's source made to refuse writes (``--deny-writes``), then its end offsets watched until still."""
    partitions = [(t.topic, p) for t in plan.topics for p in range(t.partitions)]
    if not partitions:
        raise CheckFailed(f"flow {flow.name} replicates no topic of {flow.source}: nothing to cut over")
    if options.deny_writes:
        try:
            report.denied[flow.source] = deny_writes(source, [t.topic for t in plan.topics], dry_run=options.dry_run)
        except CheckFailed as exc:
            checks.refuse(str(exc))
    try:
        quiet = wait_for_quiet(
            lambda: source.list_offsets(partitions, "latest"),
            cluster=flow.source,
            quiet_s=options.quiet_s,
            timeout_s=options.quiet_timeout_s,
            clock=time.monotonic,
            wait=wait,
        )
        report.quiet_waited_s = round((report.quiet_waited_s or 0.0) + quiet.waited_s, 1)
    except CheckFailed as exc:
        checks.refuse(str(exc))


def reset_mark(flow: FlowConfig, *, dry_run: bool, pool: AdminPool | None = None) -> CutoverMark | None:
    """``cutover --reset``: clear the flow's mark so ``run`` replicates it again; returns the mark cleared
    (or, in a dry run, the one that would be), None when there was none. A hand-over request left standing by a
    cut-over that was killed is cleared too, so the run standing by takes the flow again."""
    target = (pool or AdminPool()).admin(flow.target, flow)
    # One read of the lease topic for both; listing B's topics first names an unreachable B within seconds.
    exists = LEASE_TOPIC in target.list_topics()
    claims = read_claims(flow.name, flow.target, flow.target_consumer.settings()) if exists else None
    mark, request = (claims.mark, claims.request) if claims is not None else (None, None)
    if request is not None and not dry_run:
        clear_handover(flow, target)
        log.warning("flow=%s: cleared the hand-over request of %s", flow.name, request.describe())
    if mark is not None and not dry_run:
        write_mark(flow, target, None)
        log.info("flow=%s: cut-over mark cleared on %s (it was %s)", flow.name, flow.target, mark.describe())
    return mark


def _application_topics(flow: FlowConfig, plan: FlowPlan) -> FlowPlan:
    """The plan without heartbeats topics: MM2 replicates those whatever ``topics`` says, and any herder pair
    into the source writes them every second, so they are never still and no application reads them."""
    policy = flow_policy(flow)
    return replace(plan, topics=tuple(t for t in plan.topics if not policy.is_heartbeats_topic(t.topic)))


def _positions(lags: list[PartitionLag], target: ClusterAdmin, pool: AdminPool, flow: FlowConfig) -> list[CutPosition]:
    """Per source partition, its end on the source and its remote partition's end on the target (remote
    topics a dry run finds not created yet are left out)."""
    existing = pool.topics(flow.target, flow, refresh=True)
    remote = sorted({(r.remote_topic, r.partition) for r in lags if r.remote_topic in existing})
    ends = target.list_offsets(remote, "latest") if remote else {}
    return [
        CutPosition(r.topic, r.partition, r.source_end_offset, r.remote_topic, ends[(r.remote_topic, r.partition)])
        for r in lags
        if (r.remote_topic, r.partition) in ends
    ]

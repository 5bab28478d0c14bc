"""``mm2py cutover``: the planned switch-over of a flow's consumer groups from its source A to its target B.

The steps, each a check that names what blocks it: the flow is not cut over already and no run holds its
lease; A's end offsets are still for the quiet time (its producers stopped); the groups have no members on A
or B; the flow is copied to lag 0 (``run --once``'s engine entry, handed in by the CLI so this module starts
without a JVM) and B holds every record of A; every group's offsets translate exactly (or by MM2's rule,
reported); then the offsets are committed on B and the mark is written (control/cutover_mark.py), so ``run``
never writes into B again for this flow. A dry run does every check, reads the current lag instead of
copying, and changes nothing. Driver side only.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from mm2py.config.flow import FlowConfig
from mm2py.control.checkpoints import FlowTranslator, GroupOffset, execute_translation
from mm2py.control.cutover_mark import CutoverMark, CutPosition, new_mark, read_mark, write_mark
from mm2py.control.lease import lease_group, read_lease_holder
from mm2py.control.plan import AdminPool, FlowPlan, ReplicationPlan, build_plan, flow_policy
from mm2py.errors import CheckFailed, UsageError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.mirror.filters import load_group_filter
from mm2py.tools.cutover.quiet import wait_for_quiet
from mm2py.tools.cutover.report import (
    CutoverReport,
    behind_refusal,
    group_moves,
    lease_refusal,
    members_refusal,
    topic_checks,
    untranslatable,
)
from mm2py.tools.lag import PartitionLag, partition_lags

log = logging.getLogger(__name__)

COMMAND = "cutover"
# The copy to lag 0: returns the flows it found held by another run (nothing was copied for those).
CopyOnce = Callable[[], list[str]]


@dataclass(frozen=True)
class CutoverOptions:
    groups: re.Pattern[str] | None = None  # None: the flow's groups / groups.exclude (its GroupFilter)
    quiet_s: float = 10.0
    quiet_timeout_s: float = 300.0
    allow_members: bool = False
    dry_run: bool = False

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
    flow: FlowConfig,
    options: CutoverOptions,
    copy: CopyOnce,
    pool: AdminPool | None = None,
    wait: Callable[[float], object] | None = None,
) -> CutoverReport:
    """Switch ``flow``'s groups from its source to its target (or, with ``options.dry_run``, say what would
    happen and what would refuse); the report says what was found and done."""
    pool = pool or AdminPool()
    report = CutoverReport(flow.name, flow.source, flow.target, options.dry_run)
    checks = _Checks(report)
    source, target = pool.admin(flow.source, flow), pool.admin(flow.target, flow)
    existing = read_mark(flow, target)
    if existing is not None:
        checks.refuse(f"flow {flow.name} is already {existing.describe()}; `--reset` clears the mark")
    checks.refuse(_lease_refusal(flow, target))
    plan = _application_topics(flow, build_plan([flow], pool).flows[0])
    partitions = [(t.topic, p) for t in plan.topics for p in range(t.partitions)]
    if not partitions:
        raise CheckFailed(f"flow {flow.name} replicates no topic of {flow.source}: nothing to cut over")
    try:
        quiet = wait_for_quiet(
            lambda: source.list_offsets(partitions, "latest"),
            cluster=flow.source,
            quiet_s=options.quiet_s,
            timeout_s=options.quiet_timeout_s,
            clock=time.monotonic,
            wait=wait or threading.Event().wait,
        )
        report.quiet_waited_s = round(quiet.waited_s, 1)
    except CheckFailed as exc:
        checks.refuse(str(exc))
    groups = _groups(flow, source, options.groups, {t.topic for t in plan.topics})
    if not options.allow_members:
        for group in groups:
            for alias, admin in ((flow.source, source), (flow.target, target)):
                checks.refuse(members_refusal(group, alias, admin.describe_group(group)))
    if not options.dry_run:
        held = copy()
        if held:
            raise CheckFailed(f"another run took the flow while it was being copied: {'; '.join(held)}")
        report.copied = True
    lags = partition_lags([flow], ReplicationPlan((plan,)), pool, None, int(time.time() * 1000))
    report.topics = topic_checks(lags)
    if not options.dry_run:  # a dry run reports the current lag, which the copy would have closed
        checks.refuse(behind_refusal(flow.target, report.topics))
    translator = FlowTranslator(flow, plan, source)  # after the copy: its syncs and progress are complete
    topics = [t.topic for t in plan.topics]
    rows: dict[str, list[GroupOffset]] = {group: translator.translate(group, topics) for group in groups}
    report.moves = group_moves(row for group in groups for row in rows[group])
    complete = {t.topic for t in report.topics if t.holds_all}  # a dry run: the copy would translate the rest
    for refusal in untranslatable(m for m in report.moves if m.topic in complete):
        checks.refuse(refusal)
    report.mark = new_mark(flow, COMMAND, _positions(lags, target, pool, flow))
    if options.dry_run:
        return report
    checks.refuse(_lease_refusal(flow, target))  # a run started since the first check would copy into B again
    for group in groups:
        if rows[group]:
            report.committed[group] = execute_translation(target, group, rows[group])
            log.info("flow=%s group=%s committed=%d on %s", flow.name, group, report.committed[group], flow.target)
    write_mark(flow, target, report.mark)
    log.info("flow=%s cut over to %s; run refuses it until `cutover --reset`", flow.name, flow.target)
    return report


def reset_mark(flow: FlowConfig, *, dry_run: bool, pool: AdminPool | None = None) -> CutoverMark | None:
    """``cutover --reset``: clear the flow's mark so ``run`` replicates it again; returns the mark cleared
    (or, in a dry run, the one that would be), None when there was none."""
    target = (pool or AdminPool()).admin(flow.target, flow)
    mark = read_mark(flow, target)
    if mark is not None and not dry_run:
        write_mark(flow, target, None)
        log.info("flow=%s: cut-over mark cleared on %s (it was %s)", flow.name, flow.target, mark.describe())
    return mark


def _lease_refusal(flow: FlowConfig, target: ClusterAdmin) -> str | None:
    info = target.describe_group(lease_group(flow.source, flow.target))
    if not info.members:
        return None
    holder = read_lease_holder(flow.target, flow.target_consumer.settings(), flow.name)
    return lease_refusal(flow.name, flow.target, info, holder.describe() if holder else None)


def _application_topics(flow: FlowConfig, plan: FlowPlan) -> FlowPlan:
    """The plan without heartbeats topics: MM2 replicates those whatever ``topics`` says, and any herder pair
    into the source writes them every second, so they are never still and no application reads them."""
    policy = flow_policy(flow)
    return replace(plan, topics=tuple(t for t in plan.topics if not policy.is_heartbeats_topic(t.topic)))


def _groups(flow: FlowConfig, source: ClusterAdmin, pattern: re.Pattern[str] | None, topics: set[str]) -> list[str]:
    """The source groups that move: those ``--groups`` matches (else those the flow checkpoints, MM2's filter)
    with a committed offset on a topic of the flow. Other groups have nothing to move, so their members
    (consumers of other topics) must not block the cut-over."""
    if pattern is not None:
        named = [g for g in source.list_groups() if pattern.fullmatch(g)]
    else:
        group_filter = load_group_filter(flow.group_filter_class, flow.plugin_config())
        named = [g for g in source.list_groups() if group_filter.should_replicate_group(g)]
    return [g for g in named if any(topic in topics for topic, _p in source.committed_offsets(g))]


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

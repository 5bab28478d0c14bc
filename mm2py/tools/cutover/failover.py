"""``mm2py failover``: the unplanned failover of a flow A->B when A is lost. It never contacts A.

Everything comes from B: the mark and the lease (no run may still copy into B), the progress and the kept
listings of A's end offsets (``mm2-offsets.A.internal``), the checkpoints (``A.checkpoints.internal``), the
offset syncs where they live on B, and the remote partitions' ends and newest records. Each group's offsets
are committed on B from its latest checkpoints (recovery.py: MM2's rule, moved forward by the syncs where
that is exact), and the flow is marked as cut over by ``failover``, so a returning A is never copied into a
B that applications use. A dry run does every check and changes nothing. Driver side only: only admin
clients, consumers and a producer of B are ever created.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import read_offset_maps
from mm2py.control.cutover_mark import CutPosition, new_mark, read_mark, write_mark
from mm2py.control.handover import running_lease
from mm2py.control.plan import flow_policy, flow_topic_filter
from mm2py.control.progress_store import ReplicationState, read_replication_state
from mm2py.control.topics import checkpoints_topic
from mm2py.errors import CheckFailed
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.partition_reader import PartitionReader, read_topic
from mm2py.mirror.filters import load_group_filter
from mm2py.mirror.record_formats import Checkpoint, RecordFormatError
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.mirror.translation import OffsetMap
from mm2py.tools.cutover.recovery import (
    FailoverReport,
    GroupLanding,
    RecoveryPoint,
    StampedCheckpoint,
    landing,
    latest_checkpoints,
    recovery_points,
)
from mm2py.tools.cutover.report import lease_refusal, members_refusal

log = logging.getLogger(__name__)

COMMAND = "failover"


@dataclass(frozen=True)
class FailoverOptions:
    groups: re.Pattern[str] | None = None  # None: the flow's groups / groups.exclude (its GroupFilter)
    allow_members: bool = False
    dry_run: bool = False


class _Checks:
    """A refusal stops a failover at once (exit 1); a dry run notes it and goes on, to report every one."""

    def __init__(self, report: FailoverReport) -> None:
        self.report = report

    def refuse(self, message: str | None) -> None:
        if message is None:
            return
        if not self.report.dry_run:
            raise CheckFailed(message)
        log.warning("flow=%s dry run: would refuse: %s", self.report.flow, message)
        self.report.refusals.append(message)


def fail_over(flow: FlowConfig, options: FailoverOptions, pool: AdminPool | None = None) -> FailoverReport:
    """Move ``flow``'s groups to its target from what the target holds (or, in a dry run, say what would
    happen and what would refuse); the report says what is known of the source and what was done."""
    pool = pool or AdminPool()
    target = pool.admin(flow.target, flow)  # never flow.source: there is no client of A in this module
    report = FailoverReport(flow.name, flow.source, flow.target, options.dry_run)
    checks = _Checks(report)
    mark = read_mark(flow, target)  # lists B's topics first: an unreachable B fails here (exit 3)
    if mark is not None:
        checks.refuse(
            f"flow {flow.name} was already {mark.describe()}; clear the mark with "
            f"`mm2py cutover FILE --flow {flow.name} --reset` first if it is to be failed over again"
        )
    checks.refuse(lease_refusal(flow.name, flow.target, *running_lease(flow, target)))
    now_ms = int(time.time() * 1000)
    state = read_replication_state(flow.target, flow.target_consumer.settings(), flow.source)
    remote = _remote_topics(flow, state)
    ends = _remote_ends(target, remote, state)
    report.syncs_read = flow.offset_syncs_topic_location == "target"
    maps = read_offset_maps(flow) if report.syncs_read else {}
    beyond = _beyond_progress(state.progress, remote, ends, maps)
    report.points = recovery_points(remote, state.progress, state.losses, _newest_stamps(flow, ends), now_ms, beyond)
    upstream = {r: t for t, r in remote.items()}
    chosen = latest_checkpoints(_read_checkpoints(flow))
    moves = _group_test(flow, options.groups)
    report.landings = [
        landing(cp, maps.get((upstream[topic], p)), state.progress.get((upstream[topic], p)), now_ms)
        for (group, topic, p), cp in sorted(chosen.items())
        if topic in upstream and moves(group)
    ]
    if not options.allow_members:
        for group in report.groups:
            checks.refuse(members_refusal(group, flow.target, target.describe_group(group)))
    report.mark = new_mark(flow, COMMAND, _positions(report.points, ends))
    if options.dry_run:
        return report
    for group in report.groups:
        report.committed[group] = _commit(target, group, [g for g in report.landings if g.group == group])
        log.info("flow=%s group=%s committed=%d on %s", flow.name, group, report.committed[group], flow.target)
    write_mark(flow, target, report.mark)
    log.info("flow=%s failed over to %s; run refuses it until `cutover --reset`", flow.name, flow.target)
    return report


def _remote_topics(flow: FlowConfig, state: ReplicationState) -> dict[str, str]:
    """Source topic -> remote topic, for the source topics the target has progress or losses for and the
    flow's topic filter still selects (A cannot be asked which topics it has)."""
    policy = flow_policy(flow)
    topic_filter = flow_topic_filter(flow)
    topics = {t for t, _p in state.progress} | {t for t, _p in state.losses}
    return {
        t: policy.format_remote_topic(flow.source, t)
        for t in sorted(topics)
        if topic_filter.should_replicate_topic(t) and not policy.is_heartbeats_topic(t)
    }


def _remote_ends(target: ClusterAdmin, remote: Mapping[str, str], state: ReplicationState) -> dict[TopicPartition, int]:
    """The end offset of every remote partition the target has (remote topic, partition) -> end."""
    existing = target.list_topics()
    partitions = sorted(
        {(remote[t], p) for t, p in [*state.progress, *state.losses] if t in remote and remote[t] in existing}
    )
    return target.list_offsets(partitions, "latest") if partitions else {}


def _beyond_progress(
    progress: Mapping[TopicPartition, int],
    remote: Mapping[str, str],
    ends: Mapping[TopicPartition, int],
    maps: Mapping[TopicPartition, OffsetMap],
) -> dict[TopicPartition, int]:
    """Per source partition, the records its remote partition holds after the last replicated one: where the
    syncs tell the downstream offset right after it (a range whose records were written but whose progress was
    not, because the run died in between). Without syncs on the target this is not known, and taken as 0."""
    beyond = {}
    for (topic, partition), last in progress.items():
        end = ends.get((remote.get(topic, ""), partition))
        syncs = maps.get((topic, partition))
        if end is None or syncs is None:
            continue
        after = syncs.translate(last + 1, last).offset
        if after is not None:
            beyond[(topic, partition)] = max(0, end - after)
    return beyond


def _newest_stamps(
    flow: FlowConfig, ends: Mapping[TopicPartition, int], timeout_s: float = 15.0
) -> dict[TopicPartition, int]:
    """The timestamp of the newest record of each remote partition: its last few offsets are read (the very
    last may be a transaction marker), and the newest timestamp among them kept."""
    starts = {tp: max(0, end - 10) for tp, end in ends.items() if end > 0}
    if not starts:
        return {}
    settings = {**flow.target_consumer.settings(), "group.id": f"mm2py-failover-{flow.source}"}
    stamps: dict[TopicPartition, int] = {}
    with PartitionReader(flow.target, settings, starts, purpose="reading the newest replicated records") as reader:
        for msg in reader.records():
            tp = (msg.topic() or "", msg.partition() or 0)
            stamps[tp] = max(stamps.get(tp, 0), msg.timestamp()[1])
    return stamps


def _read_checkpoints(flow: FlowConfig) -> Iterable[StampedCheckpoint]:
    for msg in read_topic(
        flow.target, flow.target_consumer.settings(), checkpoints_topic(flow), purpose="reading checkpoints"
    ):
        try:
            yield StampedCheckpoint(Checkpoint.from_record(msg.key(), msg.value()), msg.timestamp()[1])
        except RecordFormatError as exc:  # skipped, as MirrorClient skips a record it cannot deserialize
            log.info("flow=%s skipping an undecodable checkpoint at offset %s: %s", flow.name, msg.offset(), exc)


def _group_test(flow: FlowConfig, pattern: re.Pattern[str] | None) -> Callable[[str], bool]:
    """Which groups move: those ``--groups`` matches, else those the flow's group filter accepts (the groups
    it checkpoints)."""
    if pattern is not None:
        return lambda group: pattern.fullmatch(group) is not None
    return load_group_filter(flow.group_filter_class, flow.plugin_config()).should_replicate_group


def _positions(points: Iterable[RecoveryPoint], ends: Mapping[TopicPartition, int]) -> list[CutPosition]:
    """Per source partition, the position the target holds it to and its remote partition's end: where a
    later failback finds the source's divergent tail."""
    return [
        CutPosition(
            p.topic, p.partition, p.replicated_to or 0, p.remote_topic, ends.get((p.remote_topic, p.partition), 0)
        )
        for p in points
    ]


def _commit(target: ClusterAdmin, group: str, landings: list[GroupLanding]) -> int:
    """Commit the group's landings on the target (the broker refuses while the group has members). As with
    ``translate-offsets --execute``, an operator's explicit move: it may move an offset backwards."""
    target.alter_group_offsets(
        group,
        {(g.remote_topic, g.partition): g.offset for g in landings},
        {(g.remote_topic, g.partition): g.metadata for g in landings},
    )
    return len(landings)

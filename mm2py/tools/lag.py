"""Replication lag per flow, topic and partition (records and seconds); flow liveness; mirrored group lag.

Records: the source's end offset minus the replicated position, the position being the progress mm2py — or
Java MM2 — keeps in ``mm2-offsets.<source>.internal`` (last replicated offset + 1). Seconds: the age of the
oldest source record not yet replicated (0 when caught up), read from that record's timestamp, which is what
an operator means by "how far behind are we".

Liveness: the age of a flow's newest heartbeat in the target's ``heartbeats`` topic and of the newest record
in ``<source>.checkpoints.internal``. Lag can be 0 on an idle source while the flow is dead; a heartbeat
that stopped ageing well is what tells. A checkpoint is written only when a group's offset moved, so an old
checkpoint age with idle consumer groups is normal.

Group lag (``--groups``): what ``kafka-consumer-groups --describe`` shows on the target for groups that read
the remote topics, i.e. whether the consumers that failed over (or read the replicas) keep up.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.plan import ReplicationPlan, build_plan
from mm2py.control.progress_store import read_replication_state
from mm2py.librdkafka.defaults import copy_consumer_settings
from mm2py.librdkafka.partition_reader import PartitionReader
from mm2py.mirror.resume import resume_position
from mm2py.tools.liveness import FlowAges, flow_ages

GROWS, SHRINKS, SAME = "↑", "↓", "="

K = TypeVar("K")


@dataclass(frozen=True)
class PartitionLag:
    flow: str
    source: str
    target: str
    topic: str
    remote_topic: str
    partition: int
    source_end_offset: int
    replicated_offset: int
    lag_records: int
    lag_seconds: float
    # Records that left the source before they were replicated: counted by runs, plus a gap the next run will
    # count (the same rule as run's), so lag says what is lost before a run has seen it.
    lost: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GroupLag:
    """One row of ``kafka-consumer-groups --describe`` on the target (``target`` is not part of the JSON)."""

    target: str
    group: str
    topic: str
    partition: int
    current_offset: int
    log_end_offset: int
    lag: int

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "topic": self.topic,
            "partition": self.partition,
            "current_offset": self.current_offset,
            "log_end_offset": self.log_end_offset,
            "lag": self.lag,
        }


@dataclass(frozen=True)
class LagSnapshot:
    """One answer of ``mm2py lag``: partition rows and flow ages, or group rows with ``--groups``."""

    checked_at: float  # Unix seconds
    partitions: tuple[PartitionLag, ...] = ()
    ages: Mapping[str, FlowAges] = field(default_factory=dict)
    groups: tuple[GroupLag, ...] | None = None
    over: tuple[PartitionLag | GroupLag, ...] = ()  # rows over a threshold
    limits: Mapping[str, int] = field(default_factory=dict)  # flow -> mm2py.throughput.max.bytes.per.second, if set

    def to_json(self) -> list[dict[str, Any]]:
        if self.groups is not None:
            return [g.to_json() for g in self.groups]
        none = {"heartbeat_age_seconds": None, "checkpoint_age_seconds": None}
        return [
            {
                **r.to_json(),
                **(self.ages[r.flow].to_json() if r.flow in self.ages else none),
                "throughput_limit_bytes_per_second": self.limits.get(r.flow),
            }
            for r in self.partitions
        ]

    def lags(self) -> dict[tuple[str, str, str, int], int]:
        """Lag in records per row key, what ``--watch`` compares between refreshes."""
        if self.groups is not None:
            return {(g.target, g.group, g.topic, g.partition): g.lag for g in self.groups}
        return {lag_key(r): r.lag_records for r in self.partitions}


def lag_key(row: PartitionLag | GroupLag) -> tuple[str, str, str, int]:
    if isinstance(row, GroupLag):
        return (row.target, row.group, row.topic, row.partition)
    return (row.flow, "", row.topic, row.partition)


def trend(previous: Mapping[K, int] | None, current: Mapping[K, int]) -> dict[K, str]:
    """Per key: ↑ when the lag grew since the previous refresh, ↓ when it shrank, = when unchanged, and ""
    for a key without an earlier value (first refresh, new partition)."""
    before = previous or {}
    return {
        key: "" if key not in before else GROWS if lag > before[key] else SHRINKS if lag < before[key] else SAME
        for key, lag in current.items()
    }


def breaches(
    rows: list[PartitionLag], max_lag: int | None, max_lag_seconds: float | None, max_lost: int | None = None
) -> list[PartitionLag]:
    return [
        r
        for r in rows
        if (max_lag is not None and r.lag_records > max_lag)
        or (max_lag_seconds is not None and r.lag_seconds > max_lag_seconds)
        or (max_lost is not None and r.lost > max_lost)
    ]


def group_breaches(rows: list[GroupLag], max_lag: int | None) -> list[GroupLag]:
    return [r for r in rows if max_lag is not None and r.lag > max_lag]


class LagCheck:
    """One ``mm2py lag`` question, asked once or on every ``--watch`` refresh over the same admin clients."""

    def __init__(
        self,
        flows: list[FlowConfig],
        topics: re.Pattern[str] | None = None,
        *,
        groups: bool = False,
        max_lag: int | None = None,
        max_lag_seconds: float | None = None,
        pool: AdminPool | None = None,
        max_lost: int | None = None,
    ) -> None:
        self.flows = flows
        self.topics = topics
        self.groups = groups
        self.max_lag = max_lag
        self.max_lag_seconds = max_lag_seconds
        self.max_lost = max_lost
        self.pool = pool or AdminPool()
        self._asked = False

    def run(self) -> LagSnapshot:
        checked_at = time.time()
        plan = build_plan(self.flows, self.pool, refresh=self._asked)  # topics may come and go while watching
        self._asked = True
        if self.groups:
            group_rows = group_lags(self.flows, plan, self.pool, self.topics)
            return LagSnapshot(
                checked_at, groups=tuple(group_rows), over=tuple(group_breaches(group_rows, self.max_lag))
            )
        now_ms = int(checked_at * 1000)
        rows = partition_lags(self.flows, plan, self.pool, self.topics, now_ms)
        ages = flow_ages(self.flows, self.pool, now_ms)
        limits = {f.name: f.throughput_max_bytes_per_second for f in self.flows if f.throughput_max_bytes_per_second}
        over = tuple(breaches(rows, self.max_lag, self.max_lag_seconds, self.max_lost))
        return LagSnapshot(checked_at, tuple(rows), ages, over=over, limits=limits)


def partition_lags(
    flows: list[FlowConfig], plan: ReplicationPlan, pool: AdminPool, topics: re.Pattern[str] | None, now_ms: int
) -> list[PartitionLag]:
    rows: list[PartitionLag] = []
    for flow, flow_plan in zip(flows, plan.flows, strict=True):
        selected = [t for t in flow_plan.topics if topics is None or topics.fullmatch(t.topic)]
        partitions = [(t.topic, p) for t in selected for p in range(t.partitions)]
        if not partitions:
            continue
        admin = pool.admin(flow.source, flow)
        # The same reads and the same resume rule as `run`, so lag is exactly what a run started now copies,
        # and lost what it counts.
        consumer = copy_consumer_settings(flow.source_consumer.settings(), "", exactly_once=flow.exactly_once)
        read_committed = consumer.get("isolation.level") == "read_committed"
        ends = admin.list_offsets(partitions, "latest", read_committed)
        starts = admin.list_offsets(partitions, "earliest")
        state = read_replication_state(flow.target, flow.target_consumer.settings(), flow.source)
        unplaced = [tp for tp in partitions if tp not in state.progress]
        at = flow.start_timestamp_ms
        timed = admin.offsets_for_times(unplaced, at) if at is not None and unplaced else {}
        reset = flow.source_consumer.settings().get("auto.offset.reset", "earliest")
        resumes = {
            tp: resume_position(
                state.progress.get(tp), starts[tp], ends[tp], reset, start_at=timed.get(tp), loss=state.losses.get(tp)
            )
            for tp in partitions
        }
        lagging = {tp: r.start for tp, r in resumes.items() if ends[tp] > r.start}
        ages = record_ages(flow, lagging, now_ms) if lagging else {}
        remote = {t.topic: t.remote_topic for t in selected}
        for tp in partitions:
            position = resumes[tp].start
            lag = ends[tp] - position
            rows.append(
                PartitionLag(
                    flow.name,
                    flow.source,
                    flow.target,
                    tp[0],
                    remote[tp[0]],
                    tp[1],
                    ends[tp],
                    position,
                    lag,
                    ages.get(tp, 0.0) if lag > 0 else 0.0,
                    resumes[tp].loss.lost,
                )
            )
    return rows


def record_ages(
    flow: FlowConfig, positions: Mapping[tuple[str, int], int], now_ms: int, timeout_s: float = 15.0
) -> dict[tuple[str, int], float]:
    """Age in seconds of the first record at or after each position (the oldest one not yet replicated)."""
    assert flow.source_consumer is not None
    settings = {**flow.source_consumer.settings(), "group.id": f"mm2py-lag-{flow.source}", "fetch.wait.max.ms": "50"}
    ages: dict[tuple[str, int], float] = {}
    with PartitionReader(
        flow.source, settings, positions, purpose="reading source records for lag", timeout_s=timeout_s
    ) as reader:
        for msg in reader.records():
            tp = (msg.topic() or "", msg.partition() or 0)
            ages[tp] = max(0.0, (now_ms - msg.timestamp()[1]) / 1000)
            reader.stop(*tp)  # its first record is all this needs of a partition
    return ages


def group_lags(
    flows: list[FlowConfig], plan: ReplicationPlan, pool: AdminPool, topics: re.Pattern[str] | None = None
) -> list[GroupLag]:
    """Lag of every group with committed offsets on the target on remote topics of ``flows``.

    Log end offsets are ListOffsets LATEST (read_uncommitted), as kafka-consumer-groups computes them.
    """
    remotes: dict[str, set[str]] = {}
    flow_of: dict[str, FlowConfig] = {}
    for flow, flow_plan in zip(flows, plan.flows, strict=True):
        remotes.setdefault(flow.target, set()).update(
            t.remote_topic for t in flow_plan.topics if topics is None or topics.fullmatch(t.topic)
        )
        flow_of.setdefault(flow.target, flow)
    rows: list[GroupLag] = []
    for target, remote_topics in remotes.items():
        if not remote_topics:
            continue
        admin = pool.admin(target, flow_of[target])
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for group in admin.list_groups():
            offsets = {tp: o for tp, o in admin.committed_offsets(group).items() if tp[0] in remote_topics}
            if offsets:
                committed[group] = offsets
        ends = admin.list_offsets(sorted({tp for offsets in committed.values() for tp in offsets}), "latest")
        for group, offsets in sorted(committed.items()):
            for tp, offset in sorted(offsets.items()):
                rows.append(GroupLag(target, group, tp[0], tp[1], offset, ends[tp], ends[tp] - offset))
    return rows

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
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from mm2py.config.flow import FlowConfig
from mm2py.control.plan import AdminPool, ReplicationPlan, build_plan, flow_policy
from mm2py.control.progress_store import read_progress
from mm2py.control.topics import checkpoints_topic
from mm2py.librdkafka.defaults import copy_consumer_settings
from mm2py.librdkafka.partition_reader import PartitionReader, read_partitions
from mm2py.mirror.record_formats import Checkpoint, Heartbeat, RecordFormatError
from mm2py.mirror.resume import resume_position

# Records read from the end of each partition of heartbeats/checkpoints to find the newest one; heartbeats
# come every second per flow, so an uncompacted tail of a week would otherwise be read in full every time.
TAIL_RECORDS = 1000
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FlowAges:
    """Seconds since the flow's newest heartbeat and newest checkpoint; None when there is none at all."""

    flow: str
    source: str
    target: str
    heartbeat_age_seconds: float | None
    checkpoint_age_seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "heartbeat_age_seconds": self.heartbeat_age_seconds,
            "checkpoint_age_seconds": self.checkpoint_age_seconds,
        }


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

    def to_json(self) -> list[dict[str, Any]]:
        if self.groups is not None:
            return [g.to_json() for g in self.groups]
        none = {"heartbeat_age_seconds": None, "checkpoint_age_seconds": None}
        return [
            {**r.to_json(), **(self.ages[r.flow].to_json() if r.flow in self.ages else none)} for r in self.partitions
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


def breaches(rows: list[PartitionLag], max_lag: int | None, max_lag_seconds: float | None) -> list[PartitionLag]:
    return [
        r
        for r in rows
        if (max_lag is not None and r.lag_records > max_lag)
        or (max_lag_seconds is not None and r.lag_seconds > max_lag_seconds)
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
    ) -> None:
        self.flows = flows
        self.topics = topics
        self.groups = groups
        self.max_lag = max_lag
        self.max_lag_seconds = max_lag_seconds
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
        return LagSnapshot(
            checked_at, tuple(rows), ages, over=tuple(breaches(rows, self.max_lag, self.max_lag_seconds))
        )


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
        # The same reads and the same resume rule as `run`, so lag is exactly what a run started now copies.
        consumer = copy_consumer_settings(flow.source_consumer.settings(), "", exactly_once=flow.exactly_once)
        read_committed = consumer.get("isolation.level") == "read_committed"
        ends = admin.list_offsets(partitions, "latest", read_committed)
        starts = admin.list_offsets(partitions, "earliest")
        progress = read_progress(flow.target, flow.target_consumer.settings(), flow.source)
        reset = consumer.get("auto.offset.reset", "earliest")
        positions = {tp: resume_position(progress.get(tp), starts[tp], ends[tp], reset).start for tp in partitions}
        lagging = {tp: pos for tp, pos in positions.items() if ends[tp] > pos}
        ages = record_ages(flow, lagging, now_ms) if lagging else {}
        remote = {t.topic: t.remote_topic for t in selected}
        for tp in partitions:
            lag = ends[tp] - positions[tp]
            rows.append(
                PartitionLag(
                    flow.name,
                    flow.source,
                    flow.target,
                    tp[0],
                    remote[tp[0]],
                    tp[1],
                    ends[tp],
                    positions[tp],
                    lag,
                    ages.get(tp, 0.0) if lag > 0 else 0.0,
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


def flow_ages(flows: list[FlowConfig], pool: AdminPool, now_ms: int) -> dict[str, FlowAges]:
    """Heartbeat and checkpoint age of every flow; flows into one target share one read of its heartbeats."""
    newest_heartbeats: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    result: dict[str, FlowAges] = {}
    for flow in flows:
        topic = flow_policy(flow).heartbeats_topic()
        if (flow.target, topic) not in newest_heartbeats:
            wanted = {
                (f.source, f.target)
                for f in flows
                if f.target == flow.target and flow_policy(f).heartbeats_topic() == topic
            }
            newest_heartbeats[(flow.target, topic)] = _newest_heartbeats(flow, pool, topic, wanted)
        heartbeat = newest_heartbeats[(flow.target, topic)].get((flow.source, flow.target))
        checkpoint = _newest_checkpoint(flow, pool)
        result[flow.name] = FlowAges(
            flow.name, flow.source, flow.target, _age(heartbeat, now_ms), _age(checkpoint, now_ms)
        )
    return result


def _age(timestamp_ms: int | None, now_ms: int) -> float | None:
    return None if timestamp_ms is None else max(0.0, (now_ms - timestamp_ms) / 1000)


def _newest_heartbeats(
    flow: FlowConfig, pool: AdminPool, topic: str, wanted: set[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """Newest Heartbeat timestamp per (source, target) in ``topic`` on the flow's target.

    The tail is read first; only a flow whose heartbeat is not in it (stopped long ago) costs a full read.
    """
    newest: dict[tuple[str, str], int] = {}

    def scan(starts: Mapping[tuple[str, int], int]) -> None:
        for msg in _read_from(flow, starts, purpose="reading heartbeats for lag"):
            try:
                hb = Heartbeat.from_record(msg.key(), msg.value())
            except RecordFormatError:
                continue
            key = (hb.source_cluster_alias, hb.target_cluster_alias)
            newest[key] = max(newest.get(key, hb.timestamp), hb.timestamp)

    starts, complete = _tail_starts(flow, pool, topic, TAIL_RECORDS)
    scan(starts)
    if not complete and not wanted <= newest.keys():
        scan(_tail_starts(flow, pool, topic, None)[0])
    return newest


def _newest_checkpoint(flow: FlowConfig, pool: AdminPool) -> int | None:
    """Timestamp of the newest Checkpoint record in the flow's checkpoints topic; None if it has none."""
    newest: int | None = None
    starts, _ = _tail_starts(flow, pool, checkpoints_topic(flow), TAIL_RECORDS)
    for msg in _read_from(flow, starts, purpose="reading checkpoints for lag"):
        try:
            Checkpoint.from_record(msg.key(), msg.value())
        except RecordFormatError:
            continue
        timestamp = msg.timestamp()[1]
        if timestamp >= 0:
            newest = timestamp if newest is None else max(newest, timestamp)
    return newest


def _tail_starts(
    flow: FlowConfig, pool: AdminPool, topic: str, window: int | None
) -> tuple[dict[tuple[str, int], int], bool]:
    """Where the last ``window`` records (all when None) of each partition of ``topic`` on the target start,
    and whether that is the whole topic. No partitions when the topic does not exist.

    A ListOffsets end that is too low (some brokers answer a stale one) only makes the tail longer; the
    reading goes on to partition EOF anyway, so the newest record is never missed.
    """
    info = pool.topics(flow.target, flow).get(topic)
    if info is None or info.partitions == 0:
        return {}, True
    admin = pool.admin(flow.target, flow)
    partitions = [(topic, p) for p in range(info.partitions)]
    earliest = admin.list_offsets(partitions, "earliest")
    if window is None:
        return earliest, True
    latest = admin.list_offsets(partitions, "latest")
    starts = {tp: max(earliest[tp], latest[tp] - window) for tp in partitions}
    return starts, starts == earliest


def _read_from(
    flow: FlowConfig, starts: Mapping[tuple[str, int], int], *, purpose: str, timeout_s: float = 30.0
) -> Iterator[Any]:
    """Every record of the target from ``starts`` up to partition EOF (the end ``read_topic`` reads to)."""
    if not starts:
        return
    assert flow.target_consumer is not None
    settings = {
        **flow.target_consumer.settings(),
        "group.id": f"mm2py-lag-{flow.target}",
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": "50",
    }
    yield from read_partitions(flow.target, settings, starts, purpose=purpose, timeout_s=timeout_s)


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

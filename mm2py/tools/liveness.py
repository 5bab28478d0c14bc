"""Whether a flow is alive, from what it writes on the target: the age of its newest heartbeat and checkpoint.

Lag can be 0 on an idle source while the flow is dead; a heartbeat that stopped ageing well is what tells. A
checkpoint is written only when a group's offset moved, so an old checkpoint age with idle consumer groups is
normal. ``mm2py lag`` shows both under each flow's table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.plan import flow_policy
from mm2py.control.topics import checkpoints_topic
from mm2py.librdkafka.partition_reader import read_partitions
from mm2py.mirror.record_formats import Checkpoint, Heartbeat, RecordFormatError

# Records read from the end of each partition of heartbeats/checkpoints to find the newest one; heartbeats
# come every second per flow, so an uncompacted tail of a week would otherwise be read in full every time.
TAIL_RECORDS = 1000


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

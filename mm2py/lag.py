"""Replication lag per flow, topic and partition, in records and in seconds.

Records: the source's end offset minus the replicated position, the position being the progress mm2py — or
Java MM2 — keeps in ``mm2-offsets.<source>.internal`` (last replicated offset + 1). Seconds: the age of the
oldest source record not yet replicated (0 when caught up), read from that record's timestamp, which is what
an operator means by "how far behind are we".
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from mm2py.config.flow import FlowConfig
from mm2py.errors import KafkaOperationError
from mm2py.kafka.clients import new_consumer
from mm2py.plan import AdminPool, build_plan
from mm2py.progress import read_progress


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


def flow_lags(flows: list[FlowConfig], pool: AdminPool | None = None, topics: re.Pattern[str] | None = None,
              now_ms: int | None = None) -> list[PartitionLag]:
    """Lag of every replicated partition of ``flows`` (optionally only source topics matching ``topics``)."""
    pool = pool or AdminPool()
    plan = build_plan(flows, pool)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    rows: list[PartitionLag] = []
    for flow, flow_plan in zip(flows, plan.flows, strict=True):
        selected = [t for t in flow_plan.topics if topics is None or topics.fullmatch(t.topic)]
        partitions = [(t.topic, p) for t in selected for p in range(t.partitions)]
        if not partitions:
            continue
        admin = pool.admin(flow.source, flow)
        assert flow.source_consumer is not None and flow.target_consumer is not None
        read_committed = flow.source_consumer.settings().get("isolation.level") == "read_committed"
        ends = admin.list_offsets(partitions, "latest", read_committed)
        starts = admin.list_offsets(partitions, "earliest")
        progress = read_progress(flow.target, flow.target_consumer.settings(), flow.source)
        positions = {tp: min(max(progress[tp] + 1, starts[tp]), ends[tp]) if tp in progress else starts[tp]
                     for tp in partitions}
        lagging = {tp: pos for tp, pos in positions.items() if ends[tp] > pos}
        ages = _record_ages(flow, lagging, now) if lagging else {}
        remote = {t.topic: t.remote_topic for t in selected}
        for tp in partitions:
            lag = ends[tp] - positions[tp]
            rows.append(PartitionLag(flow.name, flow.source, flow.target, tp[0], remote[tp[0]], tp[1], ends[tp],
                                     positions[tp], lag, ages.get(tp, 0.0) if lag > 0 else 0.0))
    return rows


def _record_ages(flow: FlowConfig, positions: Mapping[tuple[str, int], int], now_ms: int,
                 timeout_s: float = 15.0) -> dict[tuple[str, int], float]:
    """Age in seconds of the first record at or after each position (the oldest one not yet replicated)."""
    assert flow.source_consumer is not None
    settings = {**flow.source_consumer.settings(), "group.id": f"mm2py-lag-{flow.source}",
                "enable.partition.eof": "true", "fetch.wait.max.ms": "50"}
    consumer = new_consumer(settings)
    ages: dict[tuple[str, int], float] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in positions.items()])
        pending = set(positions)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=len(pending), timeout=0.5):
                tp = (msg.topic() or "", msg.partition() or 0)
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaOperationError(flow.source, f"reading {tp[0]}-{tp[1]} for lag", err.str())
                if tp in pending:
                    pending.discard(tp)
                    if err is None:
                        ages[tp] = max(0.0, (now_ms - msg.timestamp()[1]) / 1000)
                        consumer.pause([TopicPartition(tp[0], tp[1])])
    finally:
        consumer.close()
    return ages


def breaches(rows: list[PartitionLag], max_lag: int | None, max_lag_seconds: float | None) -> list[PartitionLag]:
    return [r for r in rows if (max_lag is not None and r.lag_records > max_lag)
            or (max_lag_seconds is not None and r.lag_seconds > max_lag_seconds)]

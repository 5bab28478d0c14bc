"""The failback record: where each side partition ended when a failback of flow A->B first began to copy the
source's tail into it, so that a failback run again after stopping half way knows which of the side partition's
records are this tail's, and copies none of them twice.

Why a record and not the side topic alone: a side topic outlives its failback. After a second cut-over of the
same flow, ``A.orders.failback-tail`` still holds the first tail, and its end offset would be taken for records
of the second tail already kept. The record names the cut-over it belongs to (the mark's time); one of another
cut-over is ignored. It lives in the lease topic on the target under ``failback:A->B``, beside the mark it
completes, and is cleared after the mark (cleared before it, a crash in between would copy the tail again).

Driver side only: reads and writes of one internal topic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.control.cutover_mark import write_lease_record
from mm2py.control.topics import LEASE_TOPIC
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.mirror.topic_partition import TopicPartition

FAILBACK_KEY_PREFIX = "failback:"


def failback_key(flow: str) -> bytes:
    return f"{FAILBACK_KEY_PREFIX}{flow}".encode()


@dataclass(frozen=True)
class FailbackRecord:
    flow: str
    mark_at_ms: int  # the cut-over (the mark's time) whose tail is being kept
    side_starts: tuple[tuple[str, int, int], ...]  # (side topic, partition, its end before the first copy)

    def starts(self) -> dict[TopicPartition, int]:
        return {(topic, partition): offset for topic, partition, offset in self.side_starts}

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "mark_at": self.mark_at_ms,
            "side_starts": [{"topic": t, "partition": p, "offset": o} for t, p, o in self.side_starts],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FailbackRecord:
        starts = tuple((str(s["topic"]), int(s["partition"]), int(s["offset"])) for s in data["side_starts"])
        return cls(str(data["flow"]), int(data["mark_at"]), starts)


def record_in(records: Iterable[tuple[bytes | None, bytes | None]], flow: str) -> FailbackRecord | None:
    """The flow's standing failback record from the lease topic's records in order (newest wins, a tombstone
    clears, anything undecodable is passed over)."""
    key = failback_key(flow)
    found: FailbackRecord | None = None
    for k, value in records:
        if k != key:
            continue
        if value is None:
            found = None
            continue
        try:
            found = FailbackRecord.from_json(json.loads(value))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def read_failback_record(flow: FlowConfig, admin: ClusterAdmin) -> FailbackRecord | None:
    if LEASE_TOPIC not in admin.list_topics():
        return None
    records = read_topic(
        flow.target, flow.target_consumer.settings(), LEASE_TOPIC, purpose="reading the failback record"
    )
    return record_in(((msg.key(), msg.value()) for msg in records), flow.name)


def write_failback_record(flow: FlowConfig, admin: ClusterAdmin, record: FailbackRecord | None) -> None:
    value = json.dumps(record.to_json()).encode() if record is not None else None
    write_lease_record(flow, admin, failback_key(flow.name), value, f"the failback record of {flow.name}")

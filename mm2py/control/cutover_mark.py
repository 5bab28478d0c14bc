"""The cut-over mark: flow A->B recorded *in B* as cut over, so no run writes into a B that applications use.

The mark lives in the lease topic (``mm2py-leases.internal``, compacted, one partition, on the target) under
the key ``cutover:A->B``, beside the flow's lease-holder record keyed ``A->B``. Both answer one question, who
may run this flow now, and every run already reads that topic on the target before it copies; a topic of its
own would be a second name for the same concept. A tombstone under the key clears the mark (``cutover
--reset``, and ``failback`` once the source's tail is kept and the reverse flow started). The value is JSON:
when, by which command and process, and the per-partition positions the flow was cut over at (source end
offset -> remote end offset on the target).

Driver side only: reads and writes of one internal topic, never records of the replicated topics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from confluent_kafka import KafkaError

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.lease import this_process
from mm2py.control.topics import LEASE_TOPIC, ensure_internal_topics, lease_topic
from mm2py.errors import FlowCutOverError, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.admin_acls import TopicAcl
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import read_topic

MARK_KEY_PREFIX = "cutover:"


def mark_key(flow: str) -> bytes:
    return f"{MARK_KEY_PREFIX}{flow}".encode()


@dataclass(frozen=True)
class CutPosition:
    """Where one source partition was cut over: its end on the source, and its remote partition's end."""

    topic: str
    partition: int
    source_offset: int
    remote_topic: str
    target_offset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source_offset": self.source_offset,
            "remote_topic": self.remote_topic,
            "target_offset": self.target_offset,
        }


@dataclass(frozen=True)
class CutoverMark:
    flow: str
    at_ms: int
    command: str  # "cutover" now; "failover" later
    by: str  # host:pid of the process that wrote it
    positions: tuple[CutPosition, ...] = ()
    denied_writes: tuple[TopicAcl, ...] = ()  # the ACLs `cutover --deny-writes` added on the source

    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.at_ms / 1000))

    def describe(self) -> str:
        return f"cut over at {self.when()} by `mm2py {self.command}` ({self.by})"

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "at": self.at_ms,
            "command": self.command,
            "by": self.by,
            "positions": [p.to_json() for p in self.positions],
            "denied_writes": [asdict(acl) for acl in self.denied_writes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CutoverMark:
        positions = tuple(
            CutPosition(
                str(p["topic"]),
                int(p["partition"]),
                int(p["source_offset"]),
                str(p["remote_topic"]),
                int(p["target_offset"]),
            )
            for p in data.get("positions", [])
        )
        denied = tuple(TopicAcl(**{k: str(v) for k, v in acl.items()}) for acl in data.get("denied_writes", []))
        return cls(str(data["flow"]), int(data["at"]), str(data["command"]), str(data["by"]), positions, denied)


def new_mark(
    flow: FlowConfig, command: str, positions: Iterable[CutPosition], denied_writes: Iterable[TopicAcl] = ()
) -> CutoverMark:
    return CutoverMark(
        flow.name, int(time.time() * 1000), command, this_process(), tuple(positions), tuple(denied_writes)
    )


def marks_in(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, CutoverMark]:
    """The standing mark per flow from the lease topic's records (key, value) in order: the newest wins, a
    tombstone clears, anything that is not a mark (holder records, undecodable values) is passed over."""
    marks: dict[str, CutoverMark] = {}
    prefix = MARK_KEY_PREFIX.encode()
    for key, value in records:
        if key is None or not key.startswith(prefix):
            continue
        flow = key[len(prefix) :].decode("utf-8", "replace")
        if value is None:
            marks.pop(flow, None)
            continue
        try:
            marks[flow] = CutoverMark.from_json(json.loads(value))
        except (ValueError, KeyError, TypeError):
            continue
    return marks


def read_marks(target: str, consumer_settings: Mapping[str, str], timeout_s: float = 30.0) -> dict[str, CutoverMark]:
    """Every standing mark on cluster ``target``; none when the lease topic does not exist yet."""
    records = read_topic(target, consumer_settings, LEASE_TOPIC, purpose="reading cut-over marks", timeout_s=timeout_s)
    return marks_in((msg.key(), msg.value()) for msg in records)


def read_mark(flow: FlowConfig, admin: ClusterAdmin) -> CutoverMark | None:
    """The flow's standing mark; the target's topics are listed first (an admin call, which names an
    unreachable target within seconds), and the lease topic read only if it exists."""
    if LEASE_TOPIC not in admin.list_topics():
        return None
    return read_marks(flow.target, flow.target_consumer.settings()).get(flow.name)


def write_mark(flow: FlowConfig, admin: ClusterAdmin, mark: CutoverMark | None) -> None:
    """Write ``mark`` for ``flow`` on its target, or clear it (``None``: a tombstone); the lease topic is
    created first when no run has created it yet (leases off, or a target never run into)."""
    value = json.dumps(mark.to_json()).encode() if mark is not None else None
    write_lease_record(flow, admin, mark_key(flow.name), value, f"the cut-over mark of {flow.name}")


def write_lease_record(flow: FlowConfig, admin: ClusterAdmin, key: bytes, value: bytes | None, what: str) -> None:
    """One record (``None``: a tombstone) in the lease topic on the flow's target, acknowledged or raised."""
    # The mark is what keeps a returning source out: the lease topic is not optional here.
    ensure_internal_topics({flow.target: admin}, [replace(lease_topic(flow), feature=None)])
    producer = new_producer(flow.target_producer.settings())
    failures: list[KafkaError] = []
    producer.produce(LEASE_TOPIC, value, key, 0, on_delivery=lambda err, _m: failures.append(err) if err else None)
    if producer.flush(30) > 0 or failures:
        cause = failures[0].str() if failures else "not acknowledged within 30 s"
        verb = "writing" if value is not None else "clearing"
        raise KafkaOperationError(flow.target, f"{verb} {what} in {LEASE_TOPIC}", cause)


def refuse_cut_over_flows(flows: Iterable[FlowConfig], pool: AdminPool) -> None:
    """``run``'s check, once on the driver before anything is created or copied: a flow marked as cut over
    is refused, naming when, by which command, and how to clear the mark.

    The target's topics are listed first (an admin call, which names an unreachable target within seconds) and
    the lease topic is read only where it exists: most targets of a first run have none."""
    by_target: dict[str, list[FlowConfig]] = {}
    for flow in flows:
        by_target.setdefault(flow.target, []).append(flow)
    for target, target_flows in by_target.items():
        first = target_flows[0]
        if LEASE_TOPIC not in pool.admin(target, first).list_topics():
            continue
        marks = read_marks(target, first.target_consumer.settings())
        for flow in target_flows:
            mark = marks.get(flow.name)
            if mark is not None:
                raise FlowCutOverError(
                    f"flow {flow.name} was {mark.describe()}; run will not write into {flow.target} again: "
                    f"clear the mark with `mm2py cutover FILE --flow {flow.name} --reset` to replicate it anew"
                )

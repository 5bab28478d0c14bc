"""Verifying flows: read both clusters partition by partition and feed the records to the matching.

Each side of a partition is read by its own consumer, forward and one window at a time, so the driver never
holds more than a window and one fetch per side.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import read_offset_maps
from mm2py.control.plan import TopicPlan, build_plan
from mm2py.control.progress_store import read_progress
from mm2py.librdkafka.partition_reader import PartitionReader
from mm2py.mirror.offset_syncs import Run
from mm2py.tools.verify.matching import (
    MAX_PROBLEMS,
    Discrepancy,
    Fingerprint,
    PartitionCheck,
    check_partition,
    fingerprint,
)
from mm2py.tools.verify.windows import WINDOW_RECORDS, Window, plan_windows, runs_from_points

log = logging.getLogger("mm2py.tools.verify")  # the name log lines carried before verify became a package

Status = Literal["ok", "mismatch", "not replicated"]
Method = Literal["offset-syncs", "content", "mixed", "none"]


@dataclass(frozen=True)
class PartitionVerification:
    flow: str
    source: str
    target: str
    topic: str
    remote_topic: str
    partition: int
    first_offset: int | None  # the verified upstream range; None when nothing was replicated
    last_offset: int | None
    source_records: int = 0
    target_records: int = 0
    source_digest: str = ""
    target_digest: str = ""
    method: Method = "none"
    missing: int = 0
    altered: int = 0
    duplicates: int = 0
    problems: tuple[Discrepancy, ...] = ()
    note: str = ""

    @property
    def status(self) -> Status:
        if self.last_offset is None:
            return "not replicated"
        return "mismatch" if self.problems or self.missing or self.altered or self.duplicates else "ok"

    def problem_lines(self) -> list[str]:
        """One line per problem, naming flow, topic, partition and offsets (for stderr and logs)."""
        where = f"verify: flow={self.flow} topic={self.topic} partition={self.partition}"
        lines = [f"{where} {p.describe()}" for p in self.problems]
        listed = sum(p.count for p in self.problems if p.kind != "order")
        total = self.missing + self.altered + self.duplicates
        if total > listed:
            lines.append(
                f"{where} and {total - listed} more: missing={self.missing} altered={self.altered} "
                f"duplicates={self.duplicates} in all"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "topic": self.topic,
            "remote_topic": self.remote_topic,
            "partition": self.partition,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "source_records": self.source_records,
            "target_records": self.target_records,
            "source_digest": self.source_digest,
            "target_digest": self.target_digest,
            "method": self.method,
            "status": self.status,
            "missing": self.missing,
            "altered": self.altered,
            "duplicates": self.duplicates,
            "problems": [p.to_json() for p in self.problems],
            "note": self.note,
        }


# -- reading (driver side, one consumer per side and partition) -----------------------------------------


class _WindowReader:
    """Reads one partition forward, one window at a time: never holds more than a window and one fetch."""

    def __init__(
        self,
        alias: str,
        settings: Mapping[str, str],
        topic: str,
        partition: int,
        start: int,
        purpose: str,
        timeout_s: float = 30.0,
    ) -> None:
        self._reader = PartitionReader(
            alias, settings, {(topic, partition): start}, purpose=purpose, timeout_s=timeout_s
        )
        self.timeout_s = timeout_s
        self._held: list[Any] = []
        self._next = start

    def read_through(self, last: int) -> list[tuple[int, Fingerprint]]:
        """Records at offsets up to ``last`` not returned before; stops early at the partition's end."""
        records: list[tuple[int, Fingerprint]] = []
        batch, self._held = self._held, []
        deadline = time.monotonic() + self.timeout_s
        while True:
            for i, msg in enumerate(batch):
                offset = msg.offset()
                if offset > last:
                    self._held = batch[i:]
                    return records
                fp = fingerprint(msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])
                records.append((offset, fp))
                self._next = offset + 1
            if self._next > last or self._reader.at_end:
                return records
            batch = self._reader.fetch(deadline)

    def close(self) -> None:
        self._reader.close()


def _reader_settings(settings: Mapping[str, str], alias: str, source_side: bool) -> dict[str, str]:
    # The source is read as the copy task read it (read_uncommitted unless the flow says otherwise), the
    # target as the flow's consumers would read it.
    defaults = {"isolation.level": "read_uncommitted"} if source_side else {}
    return {
        **defaults,
        "fetch.queue.backoff.ms": "10",
        "auto.offset.reset": "earliest",
        **settings,
        "group.id": f"mm2py-verify-{alias}",
    }


# -- per flow ------------------------------------------------------------------------------------------


def verify_flows(
    flows: list[FlowConfig],
    pool: AdminPool | None = None,
    topics: re.Pattern[str] | None = None,
    window_records: int = WINDOW_RECORDS,
    max_problems: int = MAX_PROBLEMS,
) -> list[PartitionVerification]:
    """Verify every replicated partition of ``flows`` (optionally only source topics matching ``topics``)."""
    pool = pool or AdminPool()
    plan = build_plan(flows, pool)
    rows: list[PartitionVerification] = []
    for flow, flow_plan in zip(flows, plan.flows, strict=True):
        selected = [t for t in flow_plan.topics if topics is None or topics.fullmatch(t.topic)]
        if selected:
            rows.extend(_FlowVerifier(flow, pool, window_records, max_problems).verify(selected))
    return rows


class _FlowVerifier:
    def __init__(self, flow: FlowConfig, pool: AdminPool, window_records: int, max_problems: int) -> None:
        assert flow.source_consumer is not None and flow.target_consumer is not None
        self.flow, self.pool = flow, pool
        self.window_records, self.max_problems = window_records, max_problems
        self.source_settings = _reader_settings(flow.source_consumer.settings(), flow.source, True)
        self.target_settings = _reader_settings(flow.target_consumer.settings(), flow.target, False)
        self.progress = read_progress(flow.target, flow.target_consumer.settings(), flow.source)
        self.maps = read_offset_maps(flow)

    def verify(self, topics: list[TopicPlan]) -> list[PartitionVerification]:
        flow = self.flow
        partitions = [(t.topic, p) for t in topics for p in range(t.partitions)]
        earliest = self.pool.admin(flow.source, flow).list_offsets(partitions, "earliest")
        existing = self.pool.topics(flow.target, flow)
        remote = [
            (t.remote_topic, p)
            for t in topics
            for p in range(t.partitions)
            if t.remote_topic in existing and p < existing[t.remote_topic].partitions
        ]
        target_admin = self.pool.admin(flow.target, flow)
        starts = target_admin.list_offsets(remote, "earliest")
        ends = target_admin.list_offsets(remote, "latest")
        rows = []
        for t in topics:
            for p in range(t.partitions):
                tp = (t.remote_topic, p)
                bounds = (starts[tp], ends[tp]) if tp in starts else None
                rows.append(self._partition(t, p, earliest[(t.topic, p)], bounds))
        return rows

    def _partition(
        self, t: TopicPlan, partition: int, source_start: int, target_bounds: tuple[int, int] | None
    ) -> PartitionVerification:
        flow = self.flow
        row = PartitionVerification(flow.name, flow.source, flow.target, t.topic, t.remote_topic, partition, None, None)
        last = self.progress.get((t.topic, partition))
        if last is None:
            return row
        offset_map = self.maps.get((t.topic, partition))
        runs = runs_from_points(offset_map.points) if offset_map else []
        first = max(source_start, runs[0].upstream) if runs else source_start
        notes = []
        if runs and runs[0].upstream > source_start:
            notes.append(
                f"offset syncs start at upstream offset {runs[0].upstream}: records before it are not verified"
            )
        target_start, target_end = target_bounds or (0, 0)
        windows = plan_windows(runs, first, last, target_start, target_end - 1, self.window_records)
        log.info(
            "verifying flow=%s topic=%s partition=%d upstream=%d..%d windows=%d",
            flow.name,
            t.topic,
            partition,
            first,
            last,
            len(windows),
        )
        check = PartitionCheck(self.max_problems)
        if windows:
            check = self._check(t, partition, runs, windows, first, target_bounds)
        if target_bounds is None:
            notes.append(f"{t.remote_topic} partition {partition} does not exist on {flow.target}")
        method: Method = (
            "none"
            if not check.source_records
            else "offset-syncs"
            if not check.by_content
            else "content"
            if not check.by_syncs
            else "mixed"
        )
        if method in ("content", "mixed"):
            notes.append(f"no dense offset syncs for {check.by_content} record(s): matched by content fingerprints")
        return PartitionVerification(
            flow.name,
            flow.source,
            flow.target,
            t.topic,
            t.remote_topic,
            partition,
            first,
            last,
            check.source_records,
            check.target_records,
            check.source_digest,
            check.target_digest,
            method,
            check.counts["missing"],
            check.counts["altered"],
            check.counts["duplicate"],
            tuple(check.sorted_problems()),
            "; ".join(notes),
        )

    def _check(
        self,
        t: TopicPlan,
        partition: int,
        runs: list[Run],
        windows: list[Window],
        first: int,
        target_bounds: tuple[int, int] | None,
    ) -> PartitionCheck:
        """Read both sides window by window and match their records."""
        flow = self.flow
        source = _WindowReader(
            flow.source, self.source_settings, t.topic, partition, first, "reading source records to verify"
        )
        target = None
        if target_bounds is not None:
            start = max(target_bounds[0], windows[0].downstream_start - self.window_records)
            target = _WindowReader(
                flow.target,
                self.target_settings,
                t.remote_topic,
                partition,
                start,
                "reading replicated records to verify",
            )
        try:
            return check_partition(
                runs,
                windows,
                source.read_through,
                target.read_through if target is not None else lambda _last: [],
                self.window_records,
                self.max_problems,
            )
        finally:
            source.close()
            if target is not None:
                target.close()

"""``mm2py verify``: compare what a flow replicated with what its source holds, record by record.

For every replicated partition the range is upstream offsets [first replicated, progress]. Both sides are
read window by window (at most ``window_records`` offsets of each side per window), so memory stays bounded
on partitions of any size. Every record is reduced to a fingerprint of (key, value, headers, timestamp);
each side gets an order-sensitive digest, and the records are matched to find what is missing, altered or
duplicated downstream.

Which downstream offsets hold *this* source's records comes from mm2py's dense offset syncs: between two
dense syncs of a one-to-one run the mapping is exact, and outside runs sit other sources' records (merged
topics) or copies from an interrupted task. Records are matched at the offset the syncs name first and by
content second, so a target that lost or gained a record is reported at that record, not as a shift of
everything after it. Where a partition has no dense syncs (Java MM2), records are matched by content only,
and the result says so. A record is reported as a duplicate when its copy lies within about one window of
the copy that counts: an interrupted copy task (at-least-once) leaves up to ``mm2py.batch.max.records``
copies just before its retry's, so a larger ``--window-records`` finds all of a large batch's.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import logging
import re
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import KafkaError, TopicPartition

from mm2py.config.flow import FlowConfig
from mm2py.errors import KafkaOperationError
from mm2py.kafka.clients import new_consumer
from mm2py.kafka.reader import read_topic
from mm2py.plan import AdminPool, TopicPlan, build_plan
from mm2py.progress import read_progress
from mm2py.topics import offset_syncs_topic
from mm2py.translation import SyncPoint, offset_maps

log = logging.getLogger(__name__)

WINDOW_RECORDS = 50_000
MAX_PROBLEMS = 100  # listed per partition; the counts are always complete

Fingerprint = tuple[int, int, int, int]  # hashes of key, value, headers; the timestamp
Kind = Literal["missing", "altered", "duplicate", "order"]
Status = Literal["ok", "mismatch", "not replicated"]
Method = Literal["offset-syncs", "content", "mixed", "none"]

_NONE = -1  # a null key or value; hashes are non-negative
_FIELDS = ("key", "value", "headers", "timestamp")
_PACK = struct.Struct(">qqqq")


def _hash(data: bytes | None) -> int:
    if data is None:
        return _NONE
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def fingerprint(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None,
                timestamp: int) -> Fingerprint:
    """What a copy must keep of a record; header order and repeated header names count, as in Kafka."""
    h = hashlib.blake2b(digest_size=8)
    for name, data in headers or ():
        encoded = name.encode()
        h.update(struct.pack(">i", len(encoded)) + encoded)
        h.update(struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data)
    return _hash(key), _hash(value), int.from_bytes(h.digest(), "big") >> 1, timestamp


# -- where this source's records are downstream (pure) ----------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Upstream offsets [upstream, upstream + length) sit at downstream [downstream, downstream + length)."""

    upstream: int
    downstream: int
    length: int


def runs_from_points(points: Sequence[SyncPoint]) -> list[Run]:
    """Exact runs from one partition's offset syncs (``OffsetMap.points``).

    Every sync is an exact point; two adjacent dense syncs that are one-to-one bracket an exact run. Syncs
    from before the last downstream reset (the remote topic was re-created) describe records that are gone.
    """
    start = max((i for i in range(1, len(points)) if points[i].downstream < points[i - 1].downstream),
                default=0)
    runs: list[Run] = []
    prev: SyncPoint | None = None
    for p in points[start:]:
        if (prev is not None and prev.dense and p.dense
                and p.upstream - prev.upstream == p.downstream - prev.downstream):
            last = runs[-1]
            runs[-1] = Run(last.upstream, last.downstream, p.upstream - last.upstream + 1)
        else:
            runs.append(Run(p.upstream, p.downstream, 1))
        prev = p
    return runs


def expected_downstream(runs: Sequence[Run], starts: Sequence[int], upstream: int) -> int | None:
    """The downstream offset the runs give ``upstream`` (``starts`` = the runs' upstream offsets)."""
    i = bisect.bisect_right(starts, upstream) - 1
    if i >= 0 and upstream < runs[i].upstream + runs[i].length:
        return runs[i].downstream + upstream - runs[i].upstream
    return None


@dataclass(frozen=True)
class Window:
    """Offsets read together, both ends inclusive (an end below its start: nothing on that side)."""

    upstream_start: int
    upstream_end: int
    downstream_start: int
    downstream_end: int


def plan_windows(runs: Sequence[Run], first: int, last: int, downstream_start: int, downstream_end: int,
                 max_records: int = WINDOW_RECORDS) -> list[Window]:
    """Cut upstream [first, last] and the downstream offsets that hold it into windows of at most
    ``max_records`` offsets per side; consecutive windows tile both sides without gaps or overlaps.

    Inside an exact run both sides are cut at the same record, so every record's expected copy lies in its
    own window. Between runs (and without runs) the mapping is unknown: such a stretch is cut in proportion
    on both sides. ``downstream_start``/``downstream_end`` bound the target where no run says more.
    """
    if last < first:
        return []
    clipped = [Run(max(r.upstream, first), r.downstream + max(0, first - r.upstream),
                   min(r.upstream + r.length, last + 1) - max(r.upstream, first))
               for r in runs if r.upstream <= last and r.upstream + r.length > first]
    spans: list[tuple[int, int]] = []  # (upstream offsets, downstream offsets), in order
    u, d = first, downstream_start
    if clipped:  # a run at ``first`` starts at its copy; before a later run, the target's start bounds it
        r0 = clipped[0]
        d = r0.downstream if r0.upstream == first else min(downstream_start, r0.downstream)
    d_first = d
    for r in clipped:
        if r.upstream > u or r.downstream > d:
            spans.append((r.upstream - u, max(0, r.downstream - d)))
        spans.append((-r.length, r.length))  # negative: an exact run
        u, d = r.upstream + r.length, max(d, r.downstream) + r.length
    if u <= last:  # records after the last run (or no runs): somewhere up to the target's end
        spans.append((last + 1 - u, max(0, downstream_end + 1 - d)))

    windows: list[Window] = []
    u, d = first, d_first
    used_u = used_d = 0
    for span_u, span_d in spans:
        exact = span_u < 0
        rest_u, rest_d = (-span_u if exact else span_u), span_d
        while rest_u or rest_d:
            cap_u, cap_d = max_records - used_u, max_records - used_d
            if exact:
                take_u = take_d = min(rest_u, cap_u, cap_d)
            elif rest_u <= cap_u and rest_d <= cap_d:
                take_u, take_d = rest_u, rest_d
            elif rest_u * cap_d <= rest_d * cap_u:  # the downstream side fills first
                take_u, take_d = rest_u * cap_d // rest_d, cap_d
            else:
                take_u, take_d = cap_u, rest_d * cap_u // rest_u
            used_u, used_d = used_u + take_u, used_d + take_d
            rest_u, rest_d = rest_u - take_u, rest_d - take_d
            if used_u == max_records or used_d == max_records or (take_u == take_d == 0):
                windows.append(Window(u, u + used_u - 1, d, d + used_d - 1))
                u, d, used_u, used_d = u + used_u, d + used_d, 0, 0
    if used_u or used_d:
        windows.append(Window(u, u + used_u - 1, d, d + used_d - 1))
    return windows


# -- matching (pure) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Discrepancy:
    """One problem, or a run: consecutive missing upstream offsets, or duplicates of consecutive ones."""

    kind: Kind
    upstream_offset: int | None
    downstream_offset: int | None = None
    count: int = 1
    upstream_last: int | None = None
    downstream_last: int | None = None
    detail: str = ""

    def describe(self) -> str:
        u, d, n = self.upstream_offset, self.downstream_offset, self.count
        if self.kind == "missing":
            return f"missing upstream offset {u}" if n == 1 else \
                f"missing upstream offsets {u}..{self.upstream_last} ({n} records)"
        if self.kind == "altered":
            return f"altered upstream offset {u} at downstream offset {d} ({self.detail})"
        if self.kind == "duplicate":
            return f"duplicate of upstream offset {u} at downstream offset {d}" if n == 1 else \
                (f"duplicates of upstream offsets {u}..{self.upstream_last} at downstream offsets "
                 f"{d}..{self.downstream_last} ({n} records)")
        return "the same records in another order (the digests differ)"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "upstream_offset": self.upstream_offset,
                "downstream_offset": self.downstream_offset, "count": self.count,
                "upstream_last": self.upstream_last, "downstream_last": self.downstream_last,
                "detail": self.detail, "message": self.describe()}


@dataclass(eq=False)
class _Src:
    offset: int
    fp: Fingerprint
    expected: int | None
    match: int | None = None


@dataclass(eq=False)
class _Tgt:
    offset: int
    fp: Fingerprint
    owner: int | None = None  # the upstream offset it is a copy (or an altered copy) of


@dataclass
class PartitionCheck:
    """Matches one partition's records window by window; feed ``add_window`` in order, last=True at the end.

    What a window cannot settle is carried on: source records whose copy was pushed past the window's end (a
    record lost or gained before it) for one window, then they are missing or altered; target records that
    may be copies of later records (an interrupted task's, left before the retry's copies) until
    ``carry_limit`` newer ones push them out, then they are another source's (ignored).
    """

    max_problems: int = MAX_PROBLEMS
    carry_limit: int = WINDOW_RECORDS
    source_records: int = 0
    target_records: int = 0
    by_syncs: int = 0
    by_content: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"missing": 0, "altered": 0, "duplicate": 0})
    problems: list[Discrepancy] = field(default_factory=list)
    _source_digest: Any = field(default_factory=lambda: hashlib.blake2b(digest_size=16))
    _target_digest: Any = field(default_factory=lambda: hashlib.blake2b(digest_size=16))
    _carry_src: list[_Src] = field(default_factory=list)
    _carry_tgt: list[_Tgt] = field(default_factory=list)
    _recent: dict[Fingerprint, int] = field(default_factory=dict)
    _claims_prev: list[tuple[int, bool]] = field(default_factory=list)
    _pending: list[tuple[int, Fingerprint]] = field(default_factory=list)
    _older_claim: tuple[int, bool] | None = None  # the latest claim before the windows in _claims_prev
    _prev_end: int | None = None
    _last_of_kind: dict[str, int] = field(default_factory=dict)

    def add_window(self, sources: Iterable[tuple[int, Fingerprint, int | None]],
                   targets: Iterable[tuple[int, Fingerprint]], downstream_end: int,
                   last: bool = False) -> None:
        """``sources``: (upstream offset, fingerprint, expected downstream offset or None) in offset order;
        ``targets``: (downstream offset, fingerprint) in offset order, following the previous window's."""
        new_src = [_Src(u, fp, exp) for u, fp, exp in sources]
        for s in new_src:
            self._source_digest.update(_PACK.pack(*s.fp))
            if s.expected is None:
                self.by_content += 1
            else:
                self.by_syncs += 1
        self.source_records += len(new_src)
        new_tgt = [_Tgt(d, fp) for d, fp in targets]
        pool_src, pool_tgt = self._carry_src + new_src, self._carry_tgt + new_tgt
        at = {t.offset: t for t in pool_tgt}
        claims: list[tuple[int, bool]] = []
        for s in pool_src:  # where the offset syncs say the copy is
            t = at.get(s.expected) if s.expected is not None else None
            if t is not None and t.owner is None and t.fp == s.fp:
                self._claim(s, t, claims)
        free: dict[Fingerprint, deque[_Tgt]] = {}
        for t in pool_tgt:
            if t.owner is None:
                free.setdefault(t.fp, deque()).append(t)
        for s in pool_src:  # anywhere in the window, in order
            candidates = free.get(s.fp)
            while s.match is None and candidates:
                t = candidates.popleft()
                if t.owner is None:
                    self._claim(s, t, claims)
        copied = {**self._recent, **{s.fp: s.offset for s in pool_src if s.match is not None}}
        for t in pool_tgt:
            if t.owner is None and (u := copied.get(t.fp)) is not None:
                t.owner = u
                self._attribute(t)
                self._problem("duplicate", u, t.offset)
        due = [s for s in self._carry_src if s.match is None]
        keep = [s for s in new_src if s.match is None]
        if last:
            due, keep = due + keep, []
        nearby = sorted(self._claims_prev + claims)
        for s in due:
            self._settle_unmatched(s, at, nearby, last)
        self._carry_src = keep
        self._carry_tgt = [] if last else [t for t in pool_tgt if t.owner is None][-self.carry_limit:]
        self._recent.update((s.fp, s.offset) for s in pool_src if s.match is not None)
        for fp in list(itertools.islice(self._recent, max(0, len(self._recent) - self.carry_limit))):
            del self._recent[fp]
        if self._claims_prev:
            self._older_claim = max(self._claims_prev + ([self._older_claim] if self._older_claim else []))
        self._claims_prev = claims
        if last:
            self._flush_digest(None)
        elif self._prev_end is not None:  # what is still carried may yet be attributed
            self._flush_digest(min([self._prev_end, *(t.offset - 1 for t in self._carry_tgt[:1])]))
        self._prev_end = downstream_end

    def _claim(self, s: _Src, t: _Tgt, claims: list[tuple[int, bool]]) -> None:
        s.match, t.owner = t.offset, s.offset
        claims.append((t.offset, s.expected is None or s.expected == t.offset))
        self._attribute(t)

    def _attribute(self, t: _Tgt) -> None:
        self.target_records += 1
        self._pending.append((t.offset, t.fp))

    def _settle_unmatched(self, s: _Src, at: Mapping[int, _Tgt], nearby: list[tuple[int, bool]],
                          last: bool) -> None:
        """Altered when the syncs' offset holds a record nobody claimed and the nearest copies on both sides
        sit where the syncs put them (or it is the partition's first or last); otherwise missing: a lost
        record shifts the copies after it, and a copy moved further than the carried window looks lost."""
        t = at.get(s.expected) if s.expected is not None else None
        if t is not None and t.owner is None:
            i = bisect.bisect_left(nearby, (t.offset, False))
            before = nearby[i - 1] if i > 0 else self._older_claim
            before_ok = before is None or before[1]
            after_ok = nearby[i][1] if i < len(nearby) else last
            if before_ok and after_ok:
                t.owner = s.offset
                self._attribute(t)
                differs = [name for name, a, b in zip(_FIELDS, s.fp, t.fp, strict=True) if a != b]
                self._problem("altered", s.offset, t.offset, f"{', '.join(differs)} differ"
                              if len(differs) > 1 else f"{differs[0]} differs")
                return
        self._problem("missing", s.offset, None)

    def _problem(self, kind: Kind, upstream: int, downstream: int | None, detail: str = "") -> None:
        self.counts[kind] += 1
        i = self._last_of_kind.get(kind)
        if kind in ("missing", "duplicate") and i is not None:
            prev = self.problems[i]
            assert prev.upstream_last is not None
            onward = downstream is None or (
                prev.downstream_last is not None and downstream > prev.downstream_last)
            if upstream == prev.upstream_last + 1 and onward:
                self.problems[i] = Discrepancy(kind, prev.upstream_offset, prev.downstream_offset,
                                               prev.count + 1, upstream, downstream, prev.detail)
                return
        if len(self.problems) < self.max_problems:
            self._last_of_kind[kind] = len(self.problems)
            self.problems.append(Discrepancy(kind, upstream, downstream, 1, upstream, downstream, detail))
        else:
            self._last_of_kind.pop(kind, None)

    def _flush_digest(self, through: int | None) -> None:
        """Feed the target digest in downstream order: only what no later window can still attribute."""
        self._pending.sort()
        n = len(self._pending) if through is None else bisect.bisect_right(self._pending, through,
                                                                            key=lambda e: e[0])
        for _offset, fp in self._pending[:n]:
            self._target_digest.update(_PACK.pack(*fp))
        del self._pending[:n]

    @property
    def source_digest(self) -> str:
        return str(self._source_digest.hexdigest())

    @property
    def target_digest(self) -> str:
        return str(self._target_digest.hexdigest())

    def sorted_problems(self) -> list[Discrepancy]:
        """The listed problems by offset; an order problem when all records matched but the digests differ."""
        problems = sorted(self.problems, key=lambda p: (p.upstream_offset or 0, p.downstream_offset or -1))
        if not any(self.counts.values()) and self.source_digest != self.target_digest:
            problems.append(Discrepancy("order", None))
        return problems


Reader = Callable[[int], list[tuple[int, Fingerprint]]]


def check_partition(runs: Sequence[Run], windows: Sequence[Window], read_source: Reader, read_target: Reader,
                    lookahead: int = WINDOW_RECORDS, max_problems: int = MAX_PROBLEMS) -> PartitionCheck:
    """Stream one partition through ``PartitionCheck``. A reader returns the records up to the offset it is
    given that it has not returned yet. The target reader should start up to ``lookahead`` offsets before the
    first window: an interrupted first copy task leaves its copies there."""
    check = PartitionCheck(max_problems, carry_limit=lookahead)
    starts = [r.upstream for r in runs]
    for i, w in enumerate(windows):
        last = i == len(windows) - 1
        sources = [(u, fp, expected_downstream(runs, starts, u)) for u, fp in read_source(w.upstream_end)]
        # the last window looks further, for copies pushed past the end by an extra record before them
        targets = read_target(w.downstream_end + (lookahead if last else 0))
        check.add_window(sources, targets, w.downstream_end, last=last)
    return check


# -- results -------------------------------------------------------------------------------------------


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
            lines.append(f"{where} and {total - listed} more: missing={self.missing} altered={self.altered} "
                         f"duplicates={self.duplicates} in all")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"flow": self.flow, "source": self.source, "target": self.target, "topic": self.topic,
                "remote_topic": self.remote_topic, "partition": self.partition,
                "first_offset": self.first_offset, "last_offset": self.last_offset,
                "source_records": self.source_records, "target_records": self.target_records,
                "source_digest": self.source_digest, "target_digest": self.target_digest,
                "method": self.method, "status": self.status, "missing": self.missing,
                "altered": self.altered, "duplicates": self.duplicates,
                "problems": [p.to_json() for p in self.problems], "note": self.note}


# -- reading (driver side, one consumer per side and partition) -----------------------------------------


class _PartitionReader:
    """Reads one partition forward, one window at a time: never holds more than a window and one fetch."""

    def __init__(self, alias: str, settings: Mapping[str, str], topic: str, partition: int, start: int,
                 purpose: str, timeout_s: float = 30.0) -> None:
        self.alias, self.topic, self.partition = alias, topic, partition
        self.operation = f"{purpose} ({topic}-{partition})"
        self.timeout_s = timeout_s
        self._consumer = new_consumer(settings)
        self._consumer.assign([TopicPartition(topic, partition, start)])
        self._held: list[Any] = []
        self._next = start
        self._at_end = False

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
            if self._next > last or self._at_end:
                return records
            batch = self._fetch(deadline)

    def _fetch(self, deadline: float) -> list[Any]:
        while True:
            if time.monotonic() > deadline:
                raise KafkaOperationError(self.alias, self.operation,
                                          f"no records and no end of partition at offset {self._next} "
                                          f"within {self.timeout_s:.0f} s")
            batch = []
            for msg in self._consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is None:
                    self._at_end = False
                    batch.append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._at_end = True
                else:
                    raise KafkaOperationError(self.alias, self.operation, err.str())
            if batch or self._at_end:
                return batch

    def close(self) -> None:
        self._consumer.close()


def _reader_settings(settings: Mapping[str, str], alias: str, source_side: bool) -> dict[str, str]:
    # The source is read as the copy task read it (read_uncommitted unless the flow says otherwise), the
    # target as the flow's consumers would read it.
    defaults = {"isolation.level": "read_uncommitted"} if source_side else {}
    return {**defaults, "fetch.queue.backoff.ms": "10", "auto.offset.reset": "earliest", **settings,
            "group.id": f"mm2py-verify-{alias}", "enable.partition.eof": "true",
            "enable.auto.commit": "false"}


# -- per flow ------------------------------------------------------------------------------------------


def verify_flows(flows: list[FlowConfig], pool: AdminPool | None = None,
                 topics: re.Pattern[str] | None = None, window_records: int = WINDOW_RECORDS,
                 max_problems: int = MAX_PROBLEMS) -> list[PartitionVerification]:
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
        syncs_settings = (flow.source_consumer if flow.offset_syncs_topic_location == "source"
                          else flow.target_consumer).settings()
        messages = read_topic(flow.offset_syncs_cluster, syncs_settings, offset_syncs_topic(flow),
                              purpose="reading offset syncs")
        self.maps, skipped = offset_maps((m.key(), m.value(), dict(m.headers() or [])) for m in messages)
        if skipped:
            log.warning("flow=%s skipped %d undecodable offset-sync records", flow.name, skipped)

    def verify(self, topics: list[TopicPlan]) -> list[PartitionVerification]:
        flow = self.flow
        partitions = [(t.topic, p) for t in topics for p in range(t.partitions)]
        earliest = self.pool.admin(flow.source, flow).list_offsets(partitions, "earliest")
        existing = self.pool.topics(flow.target, flow)
        remote = [(t.remote_topic, p) for t in topics for p in range(t.partitions)
                  if t.remote_topic in existing and p < existing[t.remote_topic].partitions]
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

    def _partition(self, t: TopicPlan, partition: int, source_start: int,
                   target_bounds: tuple[int, int] | None) -> PartitionVerification:
        flow = self.flow
        row = PartitionVerification(flow.name, flow.source, flow.target, t.topic, t.remote_topic, partition,
                                    None, None)
        last = self.progress.get((t.topic, partition))
        if last is None:
            return row
        offset_map = self.maps.get((t.topic, partition))
        runs = runs_from_points(offset_map.points) if offset_map else []
        first = max(source_start, runs[0].upstream) if runs else source_start
        notes = []
        if runs and runs[0].upstream > source_start:
            notes.append(f"offset syncs start at upstream offset {runs[0].upstream}: records before it are "
                         "not verified")
        target_start, target_end = target_bounds or (0, 0)
        windows = plan_windows(runs, first, last, target_start, target_end - 1, self.window_records)
        log.info("verifying flow=%s topic=%s partition=%d upstream=%d..%d windows=%d", flow.name, t.topic,
                 partition, first, last, len(windows))
        check = PartitionCheck(self.max_problems)
        if windows:
            source = _PartitionReader(flow.source, self.source_settings, t.topic, partition, first,
                                      "reading source records to verify")
            start = max(target_start, windows[0].downstream_start - self.window_records)
            target = (_PartitionReader(flow.target, self.target_settings, t.remote_topic, partition, start,
                                       "reading replicated records to verify")
                      if target_bounds is not None else None)
            try:
                check = check_partition(runs, windows, source.read_through,
                                        target.read_through if target is not None else lambda _last: [],
                                        self.window_records, self.max_problems)
            finally:
                source.close()
                if target is not None:
                    target.close()
        if target_bounds is None:
            notes.append(f"{t.remote_topic} partition {partition} does not exist on {flow.target}")
        method: Method = ("none" if not check.source_records else "offset-syncs" if not check.by_content
                          else "content" if not check.by_syncs else "mixed")
        if method in ("content", "mixed"):
            notes.append(f"no dense offset syncs for {check.by_content} record(s): matched by content "
                         "fingerprints")
        return PartitionVerification(
            flow.name, flow.source, flow.target, t.topic, t.remote_topic, partition, first, last,
            check.source_records, check.target_records, check.source_digest, check.target_digest, method,
            check.counts["missing"], check.counts["altered"], check.counts["duplicate"],
            tuple(check.sorted_problems()), "; ".join(notes))

"""Matching one partition's source and target records, window by window, without brokers.

Every record is reduced to a fingerprint of (key, value, headers, timestamp); each side gets an
order-sensitive digest. Records are matched at the offset the syncs name first and by content second, so a
target that lost or gained a record is reported at that record, not as a shift of everything after it.
A record is reported as a duplicate when its copy lies within about one window of the copy that counts: an
interrupted copy task (at-least-once) leaves up to ``mm2py.range.max.records`` copies just before its
retry's.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mm2py.mirror.offset_syncs import Run
from mm2py.tools.verify.windows import WINDOW_RECORDS, Window, expected_downstream

MAX_PROBLEMS = 100  # listed per partition; the counts are always complete

Fingerprint = tuple[int, int, int, int]  # hashes of key, value, headers; the timestamp
Kind = Literal["missing", "altered", "duplicate", "order"]

_NONE = -1  # a null key or value; hashes are non-negative
_FIELDS = ("key", "value", "headers", "timestamp")
_PACK = struct.Struct(">qqqq")


def _hash(data: bytes | None) -> int:
    if data is None:
        return _NONE
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def fingerprint(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None, timestamp: int
) -> Fingerprint:
    """What a copy must keep of a record; header order and repeated header names count, as in Kafka."""
    h = hashlib.blake2b(digest_size=8)
    for name, data in headers or ():
        encoded = name.encode()
        h.update(struct.pack(">i", len(encoded)) + encoded)
        h.update(struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data)
    return _hash(key), _hash(value), int.from_bytes(h.digest(), "big") >> 1, timestamp


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
            return (
                f"missing upstream offset {u}"
                if n == 1
                else f"missing upstream offsets {u}..{self.upstream_last} ({n} records)"
            )
        if self.kind == "altered":
            return f"altered upstream offset {u} at downstream offset {d} ({self.detail})"
        if self.kind == "duplicate":
            return (
                f"duplicate of upstream offset {u} at downstream offset {d}"
                if n == 1
                else (
                    f"duplicates of upstream offsets {u}..{self.upstream_last} at downstream offsets "
                    f"{d}..{self.downstream_last} ({n} records)"
                )
            )
        return "the same records in another order (the digests differ)"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "upstream_offset": self.upstream_offset,
            "downstream_offset": self.downstream_offset,
            "count": self.count,
            "upstream_last": self.upstream_last,
            "downstream_last": self.downstream_last,
            "detail": self.detail,
            "message": self.describe(),
        }


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

    def add_window(
        self,
        sources: Iterable[tuple[int, Fingerprint, int | None]],
        targets: Iterable[tuple[int, Fingerprint]],
        downstream_end: int,
        last: bool = False,
    ) -> None:
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
        self._carry_tgt = [] if last else [t for t in pool_tgt if t.owner is None][-self.carry_limit :]
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

    def _settle_unmatched(self, s: _Src, at: Mapping[int, _Tgt], nearby: list[tuple[int, bool]], last: bool) -> None:
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
                self._problem(
                    "altered",
                    s.offset,
                    t.offset,
                    f"{', '.join(differs)} differ" if len(differs) > 1 else f"{differs[0]} differs",
                )
                return
        self._problem("missing", s.offset, None)

    def _problem(self, kind: Kind, upstream: int, downstream: int | None, detail: str = "") -> None:
        self.counts[kind] += 1
        i = self._last_of_kind.get(kind)
        if kind in ("missing", "duplicate") and i is not None:
            prev = self.problems[i]
            assert prev.upstream_last is not None
            onward = downstream is None or (prev.downstream_last is not None and downstream > prev.downstream_last)
            if upstream == prev.upstream_last + 1 and onward:
                self.problems[i] = Discrepancy(
                    kind,
                    prev.upstream_offset,
                    prev.downstream_offset,
                    prev.count + 1,
                    upstream,
                    downstream,
                    prev.detail,
                )
                return
        if len(self.problems) < self.max_problems:
            self._last_of_kind[kind] = len(self.problems)
            self.problems.append(Discrepancy(kind, upstream, downstream, 1, upstream, downstream, detail))
        else:
            self._last_of_kind.pop(kind, None)

    def _flush_digest(self, through: int | None) -> None:
        """Feed the target digest in downstream order: only what no later window can still attribute."""
        self._pending.sort()
        n = len(self._pending) if through is None else bisect.bisect_right(self._pending, through, key=lambda e: e[0])
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


def check_partition(
    runs: Sequence[Run],
    windows: Sequence[Window],
    read_source: Reader,
    read_target: Reader,
    lookahead: int = WINDOW_RECORDS,
    max_problems: int = MAX_PROBLEMS,
) -> PartitionCheck:
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

"""Exact consumer-offset translation from offset syncs.

MM2 translates conservatively: at most one past the nearest sync, so a failed-over group re-reads up to
``offset.lag.max`` records, more for lagging groups (KIP-1292). mm2py's copy task writes *dense* syncs: the
first and last record of every run in which upstream and downstream offsets both advance by one (marked with
a record header MM2 ignores). Between two adjacent dense syncs the mapping is then known exactly, so for any
committed offset g inside the replicated range the translated offset d satisfies: every record of this source
at or after g is at or after d, and none before g is. Resuming at d loses nothing and re-reads nothing of
that source - also in a topic that several sources merge into.

Where that cannot be shown (syncs written by Java MM2, history compacted away, g not replicated yet), the
answer falls back to MM2's conservative rule and says why.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from mm2py.mirror.offset_syncs import DENSE_SYNC_HEADER, DENSE_SYNC_VALUE
from mm2py.mirror.record_formats import OffsetSync, RecordFormatError

Method = Literal["exact", "conservative", "unavailable"]


@dataclass(frozen=True)
class Translation:
    upstream_offset: int
    offset: int | None  # downstream offset to resume at; None when unavailable
    method: Method
    reason: str = ""


@dataclass(frozen=True)
class SyncPoint:
    upstream: int
    downstream: int
    dense: bool


class OffsetMap:
    """Every offset sync of one upstream partition, in the order written; the latest copy of a range wins.

    A sync whose upstream offset is not above the previous one means that range was copied again (a task
    retried after a crash) or the upstream topic was re-created: later syncs replace the older ones from
    that offset on, keeping an exact point just below the cut when the older run allows it.

    A dense sync that goes on a one-to-one run of dense syncs replaces the run's last point instead of joining it:
    a following copy task writes a dense sync per partition at every recording (each piece's last record, and its
    first when the piece does not go on from the last recording's), so a run's points would grow every second per
    partition for as long as the flow runs (a continuous run's driver holds its flow's maps, and merges them at
    every checkpoint). Every answer below is the same without those points: between two dense one-to-one points,
    an offset translates by the same arithmetic either way.
    """

    def __init__(self) -> None:
        self.points: list[SyncPoint] = []
        self._upstream: list[int] = []

    def add(self, upstream: int, downstream: int, dense: bool) -> None:
        point = SyncPoint(upstream, downstream, dense)
        if self.points and upstream <= self._upstream[-1]:
            cut = bisect.bisect_left(self._upstream, upstream)
            keep = self._exact_point(upstream - 1, cut)
            del self.points[cut:]
            del self._upstream[cut:]
            if keep is not None and (not self.points or keep.upstream > self._upstream[-1]):
                self._append(keep)
        self._append(point)

    def _append(self, point: SyncPoint) -> None:
        points = self.points
        if point.dense and len(points) >= 2:
            a, b = points[-2], points[-1]
            if a.dense and b.dense and _one_to_one(a, b) and _one_to_one(b, point):
                points[-1] = point  # ``b`` lies inside the run from ``a`` to ``point``
                self._upstream[-1] = point.upstream
                return
        points.append(point)
        self._upstream.append(point.upstream)

    def drop_from(self, upstream: int) -> None:
        """Forget the syncs at and above ``upstream``."""
        cut = bisect.bisect_left(self._upstream, upstream)
        del self.points[cut:]
        del self._upstream[cut:]

    def _exact_point(self, upstream: int, cut: int) -> SyncPoint | None:
        """The exact sync point at ``upstream`` if the run holding it (points cut-1, cut) is one-to-one."""
        if cut <= 0 or cut >= len(self.points):
            return None
        a, b = self.points[cut - 1], self.points[cut]
        if a.dense and b.dense and _one_to_one(a, b) and a.upstream <= upstream:
            return SyncPoint(upstream, a.downstream + (upstream - a.upstream), True)
        return None

    def translate(self, group_offset: int, last_replicated: int | None = None) -> Translation:
        """Where a consumer committed at ``group_offset`` upstream resumes downstream.

        ``last_replicated`` is the offset of the last record the flow has copied (its progress), which tells
        whether records after the newest sync exist downstream yet.
        """
        g = group_offset
        if not self.points:
            return Translation(g, None, "unavailable", "no offset syncs for this partition: nothing replicated yet")
        i = bisect.bisect_right(self._upstream, g) - 1
        if i < 0:
            return Translation(
                g,
                None,
                "unavailable",
                f"older than the oldest offset sync ({self.points[0].upstream}): not replicated, "
                "or its syncs were compacted away",
            )
        a = self.points[i]
        if a.upstream == g:
            return Translation(g, a.downstream, "exact")
        if i + 1 < len(self.points):
            b = self.points[i + 1]
            if a.dense and b.dense:
                offset = a.downstream + (g - a.upstream) if _one_to_one(a, b) else a.downstream + 1
                return Translation(g, offset, "exact")
            return Translation(g, a.downstream + 1, "conservative", "between offset syncs written by MM2")
        if last_replicated is not None and g > last_replicated + 1:
            return Translation(
                g, a.downstream + 1, "conservative", f"not replicated yet (replicated up to {last_replicated})"
            )
        if a.dense and last_replicated == a.upstream:
            return Translation(g, a.downstream + 1, "exact")
        return Translation(g, a.downstream + 1, "conservative", "after the newest offset sync")

    def sync_below(self, upstream: int) -> SyncPoint | None:
        """The newest sync at or below ``upstream`` (where MM2's rule anchors a translation of it)."""
        i = bisect.bisect_right(self._upstream, upstream) - 1
        return self.points[i] if i >= 0 else None

    def translate_back(self, downstream: int, last_replicated: int | None) -> Translation:
        """Where a consumer at ``downstream`` on the target resumes on the source: the upstream offset of the
        next record of this partition it has not read (the Translation's input offset is ``downstream``).

        For a group moving back to the cluster the records came from (a cut-over back after a failback). Exact
        between dense syncs: inside a one-to-one run by arithmetic, in a gap between two runs at the next run's
        first record, past the newest sync at the record after it when the flow's progress is there.
        """
        d = downstream
        below = [i for i, p in enumerate(self.points) if p.downstream <= d]
        if not below:
            reason = "before the oldest offset sync: not replicated, or its syncs were compacted away"
            return Translation(d, None, "unavailable", reason)
        i = below[-1]
        a = self.points[i]
        if a.downstream == d:
            return Translation(d, a.upstream, "exact")
        if i + 1 < len(self.points):
            b = self.points[i + 1]
            if not (a.dense and b.dense):
                return Translation(d, a.upstream, "conservative", "between offset syncs written by MM2")
            return Translation(d, a.upstream + (d - a.downstream) if _one_to_one(a, b) else b.upstream, "exact")
        if a.dense and last_replicated == a.upstream:
            return Translation(d, a.upstream + 1, "exact")
        return Translation(d, a.upstream, "conservative", "after the newest offset sync")

    def records_downstream(self, lo: int, hi: int) -> int | None:
        """How many records of this upstream partition were copied to downstream offsets ``lo`` to ``hi - 1``.

        Where several sources merge into one partition, this is what a group re-reads of this source when it
        resumes at ``lo`` while its own translation was ``hi``. The dense syncs mark the first and last record of
        every one-to-one run, so every downstream offset of this source is known; None when a sync in the range
        is MM2's (sparse: where each record went between two of them is not known).
        """
        if hi <= lo:
            return 0
        count, i, points = 0, 0, self.points
        while i < len(points):
            start = points[i]
            while i + 1 < len(points) and start.dense and points[i + 1].dense and _one_to_one(points[i], points[i + 1]):
                i += 1
            end = points[i]  # a run from start to end (one record when they are the same point)
            if start.downstream >= hi:
                break
            if end.downstream >= lo and not (start.dense and end.dense):
                return None
            count += max(0, min(end.downstream + 1, hi) - max(start.downstream, lo))
            i += 1
        return count


def _one_to_one(a: SyncPoint, b: SyncPoint) -> bool:
    return b.upstream - a.upstream == b.downstream - a.downstream


def offset_maps(
    records: Iterable[tuple[bytes | None, bytes | None, Mapping[str, bytes | None]]],
) -> tuple[dict[tuple[str, int], OffsetMap], int]:
    """Build one OffsetMap per upstream partition from offset-sync records (key, value, headers).

    Returns the maps and how many records could not be decoded (they are skipped, as MM2 skips them).
    """
    maps: dict[tuple[str, int], OffsetMap] = {}
    skipped = 0
    for key, value, headers in records:
        if not add_offset_sync(maps, key, value, headers):
            skipped += 1
    return maps, skipped


def add_offset_sync(
    maps: dict[tuple[str, int], OffsetMap], key: bytes | None, value: bytes | None, headers: Mapping[str, bytes | None]
) -> bool:
    """Add one offset-sync record to ``maps``; False when it cannot be decoded (skipped, as MM2 skips it)."""
    try:
        sync = OffsetSync.from_record(key, value)
    except RecordFormatError:
        return False
    dense = headers.get(DENSE_SYNC_HEADER) == DENSE_SYNC_VALUE
    maps.setdefault((sync.topic, sync.partition), OffsetMap()).add(sync.upstream_offset, sync.downstream_offset, dense)
    return True


def drop_covered(mm2: Mapping[tuple[str, int], OffsetMap], dense: Mapping[tuple[str, int], OffsetMap]) -> None:
    """Forget MM2's syncs of each partition from its first dense sync on: :func:`combine_offset_maps` never uses
    them (from there the dense syncs are the whole truth), and a store that reads both topics on for as long as a
    run lasts would otherwise keep every one (MM2's delayed sync of each active partition at each commit, and one
    every ``offset.lag.max`` records). A partition's first dense sync never moves up (a range copied again cuts its
    map from below), so what is dropped is never needed later either."""
    for tp, newer in dense.items():
        older = mm2.get(tp)
        if older is not None and newer.points:
            older.drop_from(newer.points[0].upstream)


def combine_offset_maps(
    mm2: Mapping[tuple[str, int], OffsetMap], dense: Mapping[tuple[str, int], OffsetMap]
) -> dict[tuple[str, int], OffsetMap]:
    """One map per partition from MM2's compacted syncs topic and mm2py's dense syncs topic.

    mm2py writes every sync MM2's rule makes due to both topics, so where the dense topic has syncs it is the
    whole truth from its first sync on; MM2's topic only adds what lies below that (history written by Java MM2
    before mm2py took the flow over, or dense syncs already past their retention).
    """
    combined: dict[tuple[str, int], OffsetMap] = {}
    for tp in set(mm2) | set(dense):
        older, newer = mm2.get(tp), dense.get(tp)
        if newer is None or not newer.points:
            if older is not None:
                combined[tp] = older
            continue
        merged = OffsetMap()
        first = newer.points[0].upstream
        for point in older.points if older is not None else []:
            if point.upstream < first:
                merged.add(point.upstream, point.downstream, point.dense)
        for point in newer.points:
            merged.add(point.upstream, point.downstream, point.dense)
        combined[tp] = merged
    return combined

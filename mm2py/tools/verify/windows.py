"""Where one source's records are downstream, and how a partition is cut into windows read together.

mm2py's dense offset syncs give exact runs: between two dense syncs of a one-to-one run every record's copy
is at a known downstream offset. Windows keep such a run's records and their copies together, so matching
never has to look past a window for a record the syncs place; between runs the mapping is unknown and
both sides are cut in proportion.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from mm2py.mirror.offset_syncs import Run
from mm2py.mirror.translation import SyncPoint

WINDOW_RECORDS = 50_000


def runs_from_points(points: Sequence[SyncPoint]) -> list[Run]:
    """Exact runs from one partition's offset syncs (``OffsetMap.points``).

    Every sync is an exact point; two adjacent dense syncs that are one-to-one bracket an exact run. Syncs
    from before the last downstream reset (the remote topic was re-created) describe records that are gone.
    """
    start = max((i for i in range(1, len(points)) if points[i].downstream < points[i - 1].downstream), default=0)
    runs: list[Run] = []
    prev: SyncPoint | None = None
    for p in points[start:]:
        if prev is not None and prev.dense and p.dense and p.upstream - prev.upstream == p.downstream - prev.downstream:
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


def plan_windows(
    runs: Sequence[Run],
    first: int,
    last: int,
    downstream_start: int,
    downstream_end: int,
    max_records: int = WINDOW_RECORDS,
) -> list[Window]:
    """Cut upstream [first, last] and the downstream offsets that hold it into windows of at most
    ``max_records`` offsets per side; consecutive windows tile both sides without gaps or overlaps.

    Inside an exact run both sides are cut at the same record, so every record's expected copy lies in its
    own window. Between runs (and without runs) the mapping is unknown: such a stretch is cut in proportion
    on both sides. ``downstream_start``/``downstream_end`` bound the target where no run says more.
    """
    if last < first:
        return []
    clipped = [
        Run(
            max(r.upstream, first),
            r.downstream + max(0, first - r.upstream),
            min(r.upstream + r.length, last + 1) - max(r.upstream, first),
        )
        for r in runs
        if r.upstream <= last and r.upstream + r.length > first
    ]
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

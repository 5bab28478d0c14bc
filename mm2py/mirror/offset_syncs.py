"""When to write an OffsetSync: MM2's emission rule (OffsetSyncWriter), per partition.

An offset sync maps an upstream offset to the downstream offset its record got on the target. Checkpoints
and ``translate-offsets`` are only as good as these syncs, so mm2py follows MM2's rule exactly: a sync is
due for the first record, whenever the downstream offset has run ``offset.lag.max`` past the last sync, and
whenever offsets stop being contiguous (upstream gaps from compaction or transactions, downstream resets).
At each commit the newest not-yet-due sync is written too (MM2's ``commit()``, KAFKA-15906), so a quiet
partition is still translatable up to its end. The rule is written out in docs/mm2-semantics.md,
*Offset-sync emission*.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mm2py.mirror.record_formats import OffsetSync

# Marks the offset syncs mm2py writes densely (every run boundary); MM2's readers ignore record headers.
DENSE_SYNC_HEADER = "mm2py.sync"
DENSE_SYNC_VALUE = b"dense"


@dataclass
class PartitionOffsetSyncState:
    """MM2's per-partition state; one lives as long as one copy task (MM2: one task lifetime)."""

    prev_upstream: int = -1
    prev_downstream: int = -1
    last_sync_downstream: int = -1
    pending: bool = False

    def update(self, upstream: int, downstream: int, offset_lag_max: int) -> bool:
        """Record one acknowledged record; True when a sync should be sent for it now."""
        due = (
            self.last_sync_downstream == -1
            or downstream - (self.last_sync_downstream + 1) >= offset_lag_max
            or upstream - self.prev_upstream != 1
            or downstream < self.prev_downstream
        )
        if due:
            self.last_sync_downstream = downstream
            self.pending = True
        self.prev_upstream = upstream
        self.prev_downstream = downstream
        return self.pending

    def clear(self) -> None:
        self.pending = False

    def follows(self, upstream: int, downstream: int) -> bool:
        """Whether a record at these offsets comes right after the last one recorded, on both sides."""
        return self.prev_upstream >= 0 and (upstream, downstream) == (self.prev_upstream + 1, self.prev_downstream + 1)


def offset_syncs_for(
    topic: str,
    partition: int,
    pairs: Iterable[tuple[int, int]],
    offset_lag_max: int,
    state: PartitionOffsetSyncState | None = None,
    dense: bool = False,
) -> list[OffsetSync]:
    """:func:`offset_syncs_for_offsets` for (upstream, downstream) pairs."""
    pairs = list(pairs)
    return offset_syncs_for_offsets(
        topic, partition, [u for u, _ in pairs], [d for _, d in pairs], offset_lag_max, state, dense
    )


def offset_syncs_for_offsets(
    topic: str,
    partition: int,
    upstream: Sequence[int],
    downstream: Sequence[int],
    offset_lag_max: int,
    state: PartitionOffsetSyncState | None = None,
    dense: bool = False,
) -> list[OffsetSync]:
    """The syncs to write for the acknowledged records of one partition (upstream[i] -> downstream[i]), in order:
    :func:`offset_syncs_for_runs` of :func:`runs_of` them."""
    return offset_syncs_for_runs(topic, partition, runs_of(upstream, downstream), offset_lag_max, state, dense)


class Run(NamedTuple):
    """Copied records whose upstream offsets [upstream, upstream + length) sit at downstream [downstream,
    downstream + length): inside a run both offsets advance by one from record to record. The copy keeps its runs
    maximal (the next run does not continue this one); ``verify`` reads them back from the dense syncs.

    A named tuple: the copy builds one per batch in its hot loop, and code that unpacks it stays as it is."""

    upstream: int
    downstream: int
    length: int


def runs_of(upstream: Sequence[int], downstream: Sequence[int]) -> list[Run]:
    """The runs of upstream[i] -> downstream[i] (a look at every record: the record path's lists)."""
    n = len(upstream)
    if n == 0:
        return []
    up, down = upstream, downstream
    starts = [0, *(i for i in range(1, n) if up[i] - up[i - 1] != 1 or down[i] - down[i - 1] != 1)]
    ends = [*starts[1:], n]
    return [Run(up[first], down[first], end - first) for first, end in zip(starts, ends, strict=True)]


def extend_runs(runs: list[Run], upstream: Sequence[int], downstream_start: int) -> None:
    """Add one acknowledged batch (upstream[i] -> downstream_start + i) to ``runs``.

    Why: the batch path learns offsets a batch at a time, and most batches are contiguous (``upstream`` a
    range), so a batch costs O(1) here instead of a look at each of its records when the syncs are computed."""
    count = len(upstream)
    if isinstance(upstream, range) and upstream.step == 1:
        pieces = [Run(upstream.start, downstream_start, count)] if count else []
    else:
        pieces = runs_of(upstream, range(downstream_start, downstream_start + count))
    for first_up, first_down, length in pieces:
        if runs:
            last_up, last_down, last_length = runs[-1]
            if first_up == last_up + last_length and first_down == last_down + last_length:
                runs[-1] = Run(last_up, last_down, last_length + length)
                continue
        runs.append(Run(first_up, first_down, length))


def runs_after(runs: Sequence[Run], skip: int) -> list[Run]:
    """The runs of the records after the first ``skip`` ones (what was copied since an earlier count)."""
    out: list[Run] = []
    for first_up, first_down, length in runs:
        if skip >= length:
            skip -= length
            continue
        out.append(Run(first_up + skip, first_down + skip, length - skip))
        skip = 0
    return out


def offset_syncs_for_runs(
    topic: str,
    partition: int,
    runs: Sequence[Run],
    offset_lag_max: int,
    state: PartitionOffsetSyncState | None = None,
    dense: bool = False,
    delayed: bool = True,
) -> list[OffsetSync]:
    """The syncs to write for the acknowledged records of one partition, given as maximal runs, in order.

    Every sync MM2's rule makes due is kept (MM2 sends them as they come), and, with ``delayed``, the last record
    is added if it was not due (MM2's delayed sync, sent at commit; a caller that commits less often than it
    writes syncs adds it itself, :func:`newest_sync`). With ``dense``, the first and last record of every run in
    which both offsets advance by one are synced too: between two such syncs the mapping is then known
    exactly, which is what exact offset translation (``mm2py.mirror.translation``) relies on. A run that goes on
    from the last record of ``state``'s previous call (both offsets one past it) is the same run: that record was
    synced, so its first record is not: a following task records every second, and a partition that only this
    flow writes then gets one dense sync per recording, not two. Merged topics get two per interleaved run.

    Inside a run only the ``offset.lag.max`` condition of the rule can fire, at positions that are computed,
    not searched: the cost is per run and per sync, not per record.
    """
    if not runs:
        return []
    state = state or PartitionOffsetSyncState()
    chosen: set[tuple[int, int]] = set()  # (run, record in the run): upstream offsets may go back between runs
    for k, (first_up, first_down, length) in enumerate(runs):
        goes_on = state.follows(first_up, first_down)
        if state.update(first_up, first_down, offset_lag_max):
            chosen.add((k, 0))
            state.clear()
        i = 0
        while True:  # next record of the run where down - (last_sync + 1) >= offset.lag.max
            j = max(i + 1, state.last_sync_downstream + 1 + offset_lag_max - first_down)
            if j >= length:
                break
            chosen.add((k, j))
            state.last_sync_downstream = first_down + j
            i = j
        state.prev_upstream, state.prev_downstream = first_up + length - 1, first_down + length - 1
        if dense:
            if not goes_on:
                chosen.add((k, 0))
            chosen.add((k, length - 1))
    if delayed:
        chosen.add((len(runs) - 1, runs[-1][2] - 1))  # MM2's delayed sync of the newest record
    return [OffsetSync(topic, partition, runs[k][0] + t, runs[k][1] + t) for k, t in sorted(chosen)]


def newest_sync(topic: str, partition: int, runs: Sequence[Run]) -> OffsetSync:
    """The sync of the newest of ``runs``' records: MM2's delayed sync for them, due at its next commit."""
    up, down, length = runs[-1]
    return OffsetSync(topic, partition, up + length - 1, down + length - 1)

"""When to write an OffsetSync: MM2's emission rule (OffsetSyncWriter, reference §4.5.3), per partition.

An offset sync maps an upstream offset to the downstream offset its record got on the target. Checkpoints
and ``translate-offsets`` are only as good as these syncs, so mm2py follows MM2's rule exactly: a sync is
due for the first record, whenever the downstream offset has run ``offset.lag.max`` past the last sync, and
whenever offsets stop being contiguous (upstream gaps from compaction or transactions, downstream resets).
At the end of a batch the newest not-yet-due sync is written too (MM2's ``commit()``, KAFKA-15906), so a
quiet partition is still translatable up to its end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mm2py.records import OffsetSync

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


def offset_syncs_for(topic: str, partition: int, pairs: Iterable[tuple[int, int]], offset_lag_max: int,
                     state: PartitionOffsetSyncState | None = None, dense: bool = False) -> list[OffsetSync]:
    """The syncs to write for acknowledged (upstream, downstream) pairs of one partition, in order.

    Every sync MM2's rule makes due is kept (MM2 sends them as they come), and the last pair is added if it was
    not due (MM2's delayed sync, sent at commit). With ``dense``, the first and last record of every run in
    which both offsets advance by one are synced too: between two such syncs the mapping is then known
    exactly, which is what exact offset translation (``mm2py.translation``) relies on. In a topic that only
    this flow writes, that is two extra syncs per batch; merged topics get two per interleaved run.
    """
    pairs = list(pairs)
    state = state or PartitionOffsetSyncState()
    chosen: list[int] = []
    for i, (upstream, downstream) in enumerate(pairs):
        if state.update(upstream, downstream, offset_lag_max):
            chosen.append(i)
            state.clear()
    if pairs and (not chosen or chosen[-1] != len(pairs) - 1):
        chosen.append(len(pairs) - 1)
    if dense:
        chosen.extend(_run_boundaries(pairs))
        chosen = sorted(set(chosen))
    return [OffsetSync(topic, partition, pairs[i][0], pairs[i][1]) for i in chosen]


def _run_boundaries(pairs: list[tuple[int, int]]) -> list[int]:
    """Indexes of the first and last pair of each run where upstream and downstream both step by one."""
    boundaries = []
    last = len(pairs) - 1
    for i, (upstream, downstream) in enumerate(pairs):
        starts = i == 0 or (upstream - pairs[i - 1][0], downstream - pairs[i - 1][1]) != (1, 1)
        ends = i == last or (pairs[i + 1][0] - upstream, pairs[i + 1][1] - downstream) != (1, 1)
        if starts or ends:
            boundaries.append(i)
    return boundaries

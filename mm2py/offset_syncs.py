"""When to write an OffsetSync: MM2's emission rule (OffsetSyncWriter), per partition.

An offset sync maps an upstream offset to the downstream offset its record got on the target. Checkpoints
and ``translate-offsets`` are only as good as these syncs, so mm2py follows MM2's rule exactly: a sync is
due for the first record, whenever the downstream offset has run ``offset.lag.max`` past the last sync, and
whenever offsets stop being contiguous (upstream gaps from compaction or transactions, downstream resets).
At the end of a batch the newest not-yet-due sync is written too (MM2's ``commit()``, KAFKA-15906), so a
quiet partition is still translatable up to its end. The rule is written out in docs/mm2-semantics.md,
*Offset-sync emission*.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    """The syncs to write for the acknowledged records of one partition (upstream[i] -> downstream[i]), in order.

    Every sync MM2's rule makes due is kept (MM2 sends them as they come), and the last record is added if it
    was not due (MM2's delayed sync, sent at commit). With ``dense``, the first and last record of every run in
    which both offsets advance by one are synced too: between two such syncs the mapping is then known
    exactly, which is what exact offset translation (``mm2py.translation``) relies on. In a topic that only
    this flow writes, that is two extra syncs per batch; merged topics get two per interleaved run.

    This runs once per copied range over every record, so it works run by run: inside a run only the
    ``offset.lag.max`` condition of the rule can fire, at positions that are computed, not searched.
    """
    n = len(upstream)
    if n == 0:
        return []
    state = state or PartitionOffsetSyncState()
    up, down = upstream, downstream
    starts = [0, *(i for i in range(1, n) if up[i] - up[i - 1] != 1 or down[i] - down[i - 1] != 1)]
    chosen: list[int] = []
    for k, first in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n
        if state.update(up[first], down[first], offset_lag_max):
            chosen.append(first)
            state.clear()
        i = first
        while True:  # next index where down - (last_sync + 1) >= offset.lag.max
            j = max(i + 1, first + (state.last_sync_downstream + 1 + offset_lag_max - down[first]))
            if j >= end:
                break
            chosen.append(j)
            state.last_sync_downstream = down[j]
            i = j
        state.prev_upstream, state.prev_downstream = up[end - 1], down[end - 1]
        if dense:
            chosen.append(first)
            chosen.append(end - 1)
    chosen.append(n - 1)  # MM2's delayed sync of the newest record (a no-op if it was due anyway)
    return [OffsetSync(topic, partition, up[i], down[i]) for i in sorted(set(chosen))]

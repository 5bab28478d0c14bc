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
                     state: PartitionOffsetSyncState | None = None) -> list[OffsetSync]:
    """The syncs to write for acknowledged (upstream, downstream) pairs of one partition, in order.

    Every due sync is kept (MM2 sends them as they come), and the last pair is added if it was not due
    (MM2's delayed sync, sent at commit).
    """
    state = state or PartitionOffsetSyncState()
    syncs: list[OffsetSync] = []
    last: tuple[int, int] | None = None
    delayed = False
    for upstream, downstream in pairs:
        last = (upstream, downstream)
        if state.update(upstream, downstream, offset_lag_max):
            syncs.append(OffsetSync(topic, partition, upstream, downstream))
            state.clear()
            delayed = False
        else:
            delayed = True
    if delayed and last is not None:
        syncs.append(OffsetSync(topic, partition, last[0], last[1]))
    return syncs

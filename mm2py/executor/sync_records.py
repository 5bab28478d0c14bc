"""Which offset-sync records a range's copied records make, on both copy paths: MM2's syncs topic gets exactly
what MM2's emission rule makes due (:mod:`mm2py.mirror.offset_syncs`), so MM2's readers see what MM2 would
write; with dense syncs on, mm2py's own syncs topic gets those plus the run boundaries exact translation needs.
Which client writes them is the copy path's business (:mod:`mm2py.executor.delivery`,
:mod:`mm2py.executor.control_writes`)."""

from __future__ import annotations

from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.mirror.offset_syncs import (
    DENSE_SYNC_HEADER,
    DENSE_SYNC_VALUE,
    PartitionOffsetSyncState,
    Run,
    offset_syncs_for_runs,
)
from mm2py.mirror.record_formats import OffsetSync

SyncRecord = tuple[str, bytes, bytes, list[tuple[str, str | bytes | None]] | None]  # topic, key, value, headers


def offset_sync_records(
    spec: CopySpec,
    rng: PartitionRange,
    runs: list[Run],
    states: dict[bool, PartitionOffsetSyncState] | None = None,
    delayed: bool = True,
) -> list[SyncRecord]:
    """One range's offset syncs (its copied records as runs, ``mm2py.mirror.offset_syncs``) as records: MM2's
    syncs topic gets exactly what MM2's rule makes due (and, with ``delayed``, MM2's delayed sync of the newest
    record, which a caller that commits less often than it writes syncs sends itself, :func:`delayed_sync_record`);
    mm2py's dense topic those plus the run boundaries. ``states`` (per topic: dense or not) carries MM2's rule
    across calls for the same partition."""
    assert spec.syncs_topic is not None
    targets: list[tuple[str, bool]] = [(spec.syncs_topic, False)]
    if spec.dense_syncs_topic is not None:
        targets.append((spec.dense_syncs_topic, True))
    records: list[SyncRecord] = []
    for topic, dense in targets:
        headers: list[tuple[str, str | bytes | None]] | None = (
            [(DENSE_SYNC_HEADER, DENSE_SYNC_VALUE)] if dense else None
        )
        state = states.setdefault(dense, PartitionOffsetSyncState()) if states is not None else None
        syncs = offset_syncs_for_runs(
            rng.topic, rng.partition, runs, spec.offset_lag_max, state, dense=dense, delayed=delayed or dense
        )
        records.extend((topic, sync.record_key(), sync.record_value(), headers) for sync in syncs)
    return records


def delayed_sync_record(spec: CopySpec, sync: OffsetSync) -> SyncRecord:
    """MM2's delayed sync (the newest record of a partition that no due sync covered) for MM2's syncs topic."""
    assert spec.syncs_topic is not None
    return (spec.syncs_topic, sync.record_key(), sync.record_value(), None)

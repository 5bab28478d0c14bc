"""MM2's offset-sync emission rule, with the sequences pinned by MirrorSourceTaskTest
(docs/mm2-semantics.md, *Offset-sync emission*)."""

from __future__ import annotations

import itertools

from mm2py.mirror.offset_syncs import (
    PartitionOffsetSyncState,
    Run,
    extend_runs,
    offset_syncs_for,
    offset_syncs_for_offsets,
    offset_syncs_for_runs,
    runs_of,
)
from mm2py.mirror.record_formats import OffsetSync


def test_sync_emission_follows_mm2s_pinned_sequence() -> None:
    # (upstream, downstream, expected, reset-after) with offset.lag.max = 50 (MirrorSourceTaskTest.testOffsetSync)
    steps = [
        (0, 100, True, True),
        (2, 102, True, True),
        (3, 152, False, True),
        (4, 153, True, True),
        (5, 154, False, True),
        (6, 203, False, True),
        (7, 204, True, True),
        (2, 206, True, True),
        (3, 207, False, True),
        (4, 3, True, True),
        (5, 4, False, False),
        (7, 6, True, False),
        (7, 6, True, False),
        (8, 7, True, False),
        (10, 57, True, True),
        (11, 58, False, False),
    ]
    state = PartitionOffsetSyncState()
    for upstream, downstream, expected, reset in steps:
        assert state.update(upstream, downstream, 50) is expected, (upstream, downstream)
        if reset:
            state.clear()


def test_zero_offset_lag_max_syncs_every_record() -> None:
    state = PartitionOffsetSyncState()
    results = []
    for u in range(5):
        results.append(state.update(u, u + 10, 0))
        state.clear()
    assert results == [True] * 5


def test_contiguous_batch_syncs_first_every_lag_max_and_the_delayed_last() -> None:
    pairs = [(u, u + 1000) for u in range(250)]
    syncs = offset_syncs_for("orders", 3, pairs, 100)
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [
        (0, 1000),
        (101, 1101),
        (202, 1202),
        (249, 1249),
    ]  # due once d - (last + 1) >= offset.lag.max
    assert all(s.topic == "orders" and s.partition == 3 for s in syncs)


def test_upstream_gap_forces_a_sync() -> None:
    syncs = offset_syncs_for("t", 0, [(0, 0), (1, 1), (5, 2), (6, 3)], 100)
    assert syncs == [OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 5, 2), OffsetSync("t", 0, 6, 3)]


def test_merged_topic_downstream_jumps_trigger_syncs_by_lag() -> None:
    # Another source's records sit between ours: downstream advances 3 per upstream record.
    pairs = [(u, 3 * u) for u in range(100)]
    syncs = offset_syncs_for("t", 0, pairs, 100)
    downstream = [s.downstream_offset for s in syncs]
    assert downstream[0] == 0 and downstream[-1] == 297
    assert all(b - a <= 102 for a, b in itertools.pairwise(downstream))


def test_empty_batch_has_no_syncs() -> None:
    assert offset_syncs_for("t", 0, [], 100) == []


def test_dense_syncs_bracket_every_run_of_a_merged_partition() -> None:
    # ours: u 0..4 at d 0..4, then 3 foreign records, then u 5..7 at d 8..10, then an upstream gap (u 10).
    pairs = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 8), (6, 9), (7, 10), (10, 11)]
    syncs = offset_syncs_for("t", 0, pairs, 100, dense=True)
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [(0, 0), (4, 4), (5, 8), (7, 10), (10, 11)]


def test_dense_adds_nothing_to_a_single_contiguous_run_but_its_ends() -> None:
    pairs = [(u, u + 50) for u in range(10)]
    assert [(s.upstream_offset, s.downstream_offset) for s in offset_syncs_for("t", 0, pairs, 100, dense=True)] == [
        (0, 50),
        (9, 59),
    ]


def reference_syncs(pairs: list[tuple[int, int]], lag: int, dense: bool) -> list[tuple[int, int]]:
    """MM2's rule applied record by record (the obvious, slow way), plus run boundaries when dense."""
    state = PartitionOffsetSyncState()
    chosen = set()
    for i, (u, d) in enumerate(pairs):
        if state.update(u, d, lag):
            chosen.add(i)
            state.clear()
        if dense:
            prev_break = i == 0 or (u - pairs[i - 1][0], d - pairs[i - 1][1]) != (1, 1)
            next_break = i == len(pairs) - 1 or (pairs[i + 1][0] - u, pairs[i + 1][1] - d) != (1, 1)
            if prev_break or next_break:
                chosen.add(i)
    if pairs:
        chosen.add(len(pairs) - 1)
    return [pairs[i] for i in sorted(chosen)]


def test_run_by_run_computation_equals_mm2s_record_by_record_rule() -> None:
    import random

    rng = random.Random(42)
    for _ in range(300):
        pairs, u, d = [], rng.randint(0, 5), rng.randint(0, 5)
        for _ in range(rng.randint(0, 400)):
            roll = rng.random()
            if roll < 0.03:
                u += rng.randint(1, 4)
            elif roll < 0.06:
                d += rng.randint(1, 30)
            elif roll < 0.065:
                u -= rng.randint(1, 3)  # a rewind upstream
            pairs.append((u, d))
            u, d = u + 1, d + 1
        lag = rng.choice([0, 1, 5, 50, 100])
        for dense in (False, True):
            got = [(s.upstream_offset, s.downstream_offset) for s in offset_syncs_for("t", 0, pairs, lag, dense=dense)]
            assert got == reference_syncs(pairs, lag, dense), (lag, dense, pairs[:20])


def test_runs_built_a_batch_at_a_time_give_the_syncs_of_the_records() -> None:
    """The batch path hands each acknowledged batch to extend_runs (a range when contiguous, a list when
    rebuilt, merged or compacted); its runs must be the per-record ones and give the same syncs."""
    import random

    rng = random.Random(7)
    for _ in range(300):
        runs: list[Run] = []
        upstream: list[int] = []
        downstream: list[int] = []
        u, d = rng.randint(0, 5), rng.randint(0, 5)
        for _ in range(rng.randint(0, 30)):
            count = rng.randint(1, 40)
            if rng.random() < 0.7:
                batch: range | list[int] = range(u, u + count)
                u += count
            else:  # a compacted batch: gaps between its offsets
                batch = []
                for _ in range(count):
                    batch.append(u)
                    u += rng.choice([1, 1, 1, 2, 5])
            if rng.random() < 0.2:
                u += rng.randint(1, 9)  # a gap between batches (a transaction marker, compaction)
            if rng.random() < 0.2:
                d += rng.randint(1, 9)  # another producer's records between ours on the target
            extend_runs(runs, batch, d)
            upstream.extend(batch)
            downstream.extend(range(d, d + len(batch)))
            d += len(batch)
        assert runs == runs_of(upstream, downstream)
        lag = rng.choice([0, 1, 5, 50, 100])
        for dense in (False, True):
            by_runs = offset_syncs_for_runs("t", 0, runs, lag, dense=dense)
            assert by_runs == offset_syncs_for_offsets("t", 0, upstream, downstream, lag, dense=dense)

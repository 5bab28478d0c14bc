"""Exact offset translation: resuming at the translated offset loses nothing and re-reads nothing of a source."""

from __future__ import annotations

import random

import pytest

from mm2py.mirror.offset_syncs import PartitionOffsetSyncState, Run, offset_syncs_for, offset_syncs_for_runs
from mm2py.mirror.translation import OffsetMap, SyncPoint, Translation, combine_offset_maps, drop_covered
from mm2py.tools.verify.windows import runs_from_points


def simulate_merge(seed: int, ours: int, foreign_runs: int) -> list[tuple[int, int]]:
    """(upstream, downstream) of our records in a target partition that other sources also write to,
    with upstream gaps (transaction markers, compaction) on our side."""
    rng = random.Random(seed)
    pairs, upstream, downstream = [], 0, 0
    for _ in range(ours):
        if rng.random() < 0.05:
            upstream += rng.randint(1, 3)  # gap upstream
        if rng.random() < foreign_runs / ours:
            downstream += rng.randint(1, 40)  # other sources' records in between
        pairs.append((upstream, downstream))
        upstream += 1
        downstream += 1
    return pairs


def oracle(pairs: list[tuple[int, int]], g: int) -> tuple[int, int]:
    """The range of resume offsets that lose nothing and re-read nothing of this source for group offset g."""
    before = [d for u, d in pairs if u < g]
    after = [d for u, d in pairs if u >= g]
    low = before[-1] + 1 if before else 0
    high = after[0] if after else pairs[-1][1] + 1
    return low, high


def build(pairs: list[tuple[int, int]], batches: int) -> OffsetMap:
    offset_map = OffsetMap()
    size = max(1, len(pairs) // batches)
    for start in range(0, len(pairs), size):  # one copy task per batch, each with its own sync state
        for sync in offset_syncs_for("t", 0, pairs[start : start + size], 100, dense=True):
            offset_map.add(sync.upstream_offset, sync.downstream_offset, dense=True)
    return offset_map


@pytest.mark.parametrize("seed", range(8))
def test_every_offset_of_a_merged_partition_translates_exactly(seed: int) -> None:
    pairs = simulate_merge(seed, ours=2_000, foreign_runs=150)
    offset_map = build(pairs, batches=7)
    last_replicated = pairs[-1][0]
    for g in range(0, last_replicated + 2):
        t = offset_map.translate(g, last_replicated)
        low, high = oracle(pairs, g)
        assert t.method == "exact", (g, t)
        assert t.offset is not None and low <= t.offset <= high, (g, t, low, high)


def test_lagging_group_far_behind_is_exact_where_mm2_would_reread_a_lot() -> None:
    pairs = [(u, u + 7) for u in range(5_000)]
    offset_map = build(pairs, batches=1)
    t = offset_map.translate(1_234, 4_999)
    assert (t.offset, t.method) == (1_241, "exact")


def test_a_range_copied_twice_after_a_crash_uses_the_latest_copy_and_stays_exact_below_it() -> None:
    offset_map = OffsetMap()
    first = [(u, 1000 + u) for u in range(100, 151)]  # copied, then the task crashed before progress
    second = [(u, 2000 + u) for u in range(120, 200)]  # retried from 120
    for batch in (first, second):
        for s in offset_syncs_for("t", 0, batch, 100, dense=True):
            offset_map.add(s.upstream_offset, s.downstream_offset, True)
    assert offset_map.translate(110).offset == 1110
    assert offset_map.translate(119).offset == 1119
    assert offset_map.translate(120).offset == 2120
    assert offset_map.translate(199, 199).method == "exact"


def test_sparse_mm2_syncs_fall_back_to_the_conservative_rule_and_say_so() -> None:
    offset_map = OffsetMap()
    offset_map.add(100, 200, dense=False)
    offset_map.add(250, 351, dense=False)
    t = offset_map.translate(150)
    assert (t.offset, t.method) == (201, "conservative") and "MM2" in t.reason
    assert offset_map.translate(100).method == "exact"


def test_offsets_not_yet_replicated_or_older_than_history_are_labelled() -> None:
    offset_map = OffsetMap()
    offset_map.add(100, 10, dense=True)
    offset_map.add(110, 20, dense=True)
    assert offset_map.translate(50).method == "unavailable"
    t = offset_map.translate(500, last_replicated=110)
    assert (t.offset, t.method) == (21, "conservative") and "not replicated yet" in t.reason
    assert offset_map.translate(111, last_replicated=110).method == "exact"
    assert OffsetMap().translate(5).method == "unavailable"


def _runs() -> OffsetMap:
    """Upstream 0-4 at downstream 0-4, 5-9 at 10-14 (another source's records between), 10 alone at 20."""
    offsets = OffsetMap()
    for upstream, downstream in ((0, 0), (4, 4), (5, 10), (9, 14), (10, 20)):
        offsets.add(upstream, downstream, True)
    return offsets


def test_translated_back_a_downstream_position_is_the_next_upstream_record_it_has_not_read() -> None:
    offsets = _runs()
    back = {d: offsets.translate_back(d, 10) for d in (0, 3, 5, 9, 12, 15, 20, 21)}
    assert {d: (t.offset, t.method) for d, t in back.items()} == {
        0: (0, "exact"),
        3: (3, "exact"),
        5: (5, "exact"),  # between two runs: the next run's first record
        9: (5, "exact"),
        12: (7, "exact"),
        15: (10, "exact"),
        20: (10, "exact"),
        21: (11, "exact"),  # read all the flow copied (its progress is at 10): the first record never copied
    }
    # Past the newest sync without the progress there, or between MM2's syncs: never past the true position.
    assert offsets.translate_back(21, 8) == Translation(21, 10, "conservative", "after the newest offset sync")
    sparse = OffsetMap()
    sparse.add(0, 0, False)
    sparse.add(100, 100, False)
    assert sparse.translate_back(50, None).method == "conservative" and sparse.translate_back(50, None).offset == 0
    late = OffsetMap()
    late.add(40, 10, True)
    assert late.translate_back(5, None).method == "unavailable"


@pytest.mark.parametrize("seed", range(4))
def test_every_position_of_a_merged_partition_translates_back_and_counts_its_records_exactly(seed: int) -> None:
    """Against the merge simulation: back to the first upstream record at or after a downstream position, and
    the records of this source in any downstream range, whatever other sources wrote between them."""
    pairs = simulate_merge(seed, ours=1_500, foreign_runs=120)
    offset_map = build(pairs, batches=5)
    last_upstream, last_downstream = pairs[-1]
    downstreams = [d for _u, d in pairs]
    for d in range(0, last_downstream + 2):
        following = [u for u, down in pairs if down >= d]
        expected = following[0] if following else last_upstream + 1
        t = offset_map.translate_back(d, last_upstream)
        if d < pairs[0][1]:
            continue  # before this source's first record: nothing of it was read
        assert (t.offset, t.method) == (expected, "exact"), (d, t)
    rng = random.Random(seed)
    for _ in range(300):
        lo = rng.randint(0, last_downstream + 1)
        hi = rng.randint(lo, last_downstream + 2)
        assert offset_map.records_downstream(lo, hi) == sum(lo <= down < hi for down in downstreams), (lo, hi)


class _EveryPoint(OffsetMap):
    """The map as it was before a run's inner dense points were dropped: every sync kept."""

    def _append(self, point: SyncPoint) -> None:
        self.points.append(point)
        self._upstream.append(point.upstream)


def _following_syncs(seed: int, recordings: int, every_first: bool = False) -> list[tuple[int, int, bool]]:
    """(upstream, downstream, dense) as a following task's recordings write them to both syncs topics: pieces of
    runs with gaps on either side, MM2's sparse syncs among them, now and then a range copied again. With
    ``every_first``, each piece's first record is in the dense syncs too, as the writer had it before a piece that
    goes on from the last recording's last record stopped syncing its first."""
    rng = random.Random(seed)
    state = {True: PartitionOffsetSyncState(), False: PartitionOffsetSyncState()}
    syncs: list[tuple[int, int, bool]] = []
    upstream = downstream = 0
    for _ in range(recordings):
        if rng.random() < 0.05:  # a task retried: the range copied again from a little further back
            upstream = max(0, upstream - rng.randint(1, 30))
            state = {True: PartitionOffsetSyncState(), False: PartitionOffsetSyncState()}
        runs = []
        for _piece in range(rng.randint(1, 3)):
            if rng.random() < 0.2:
                upstream += rng.randint(1, 3)  # a gap upstream (markers, compaction)
            if rng.random() < 0.2:
                downstream += rng.randint(1, 5)  # another source's records between
            length = rng.randint(1, 60)
            runs.append(Run(upstream, downstream, length))
            upstream, downstream = upstream + length, downstream + length
        for dense in (True, False):
            written = {
                (sync.upstream_offset, sync.downstream_offset)
                for sync in offset_syncs_for_runs("t", 0, runs, 100, state[dense], dense=dense, delayed=dense)
            }
            if dense and every_first:
                written |= {(run.upstream, run.downstream) for run in runs}
            syncs.extend((u, d, dense) for u, d in sorted(written))  # upstream rises within one recording
    return syncs


def _assert_same_answers(one: OffsetMap, other: OffsetMap, syncs: list[tuple[int, int, bool]], seed: int) -> None:
    """Every translation either way, 300 records_downstream ranges and verify's runs, alike for both maps, over
    the offsets ``syncs`` span and a little past them."""
    last_upstream = max(u for u, _d, _dense in syncs)
    last_downstream = max(d for _u, d, _dense in syncs)
    for progress in (None, last_upstream, last_upstream - 3):
        for g in range(last_upstream + 3):
            assert one.translate(g, progress) == other.translate(g, progress), (g, progress)
        for d in range(last_downstream + 3):
            assert one.translate_back(d, progress) == other.translate_back(d, progress), (d, progress)
    rng = random.Random(seed)
    for _ in range(300):
        lo = rng.randint(0, last_downstream + 1)
        hi = rng.randint(lo, last_downstream + 2)
        assert one.records_downstream(lo, hi) == other.records_downstream(lo, hi), (lo, hi)
    assert runs_from_points(one.points) == runs_from_points(other.points)


@pytest.mark.parametrize("seed", range(6))
def test_a_piece_that_goes_on_from_the_last_recording_syncs_only_its_last_record_and_no_answer_changes(
    seed: int,
) -> None:
    """The last recording's last record was synced, so the first record of a piece right after it (on both sides)
    adds no knowledge: the maps with and without those syncs answer every question alike."""
    written = _following_syncs(seed, recordings=150)
    before = _following_syncs(seed, recordings=150, every_first=True)
    assert sum(dense for *_o, dense in written) < sum(dense for *_o, dense in before)
    maps = []
    for syncs in (written, before):
        topics = {True: {("t", 0): OffsetMap()}, False: {("t", 0): OffsetMap()}}  # as the two topics are read
        for upstream, downstream, dense in syncs:
            topics[dense][("t", 0)].add(upstream, downstream, dense)
        maps.append(combine_offset_maps(topics[False], topics[True])[("t", 0)])
    now, then = maps
    _assert_same_answers(now, then, before, seed)


@pytest.mark.parametrize("seed", range(6))
def test_a_runs_inner_dense_points_are_dropped_and_every_answer_stays_the_same(seed: int) -> None:
    syncs = _following_syncs(seed, recordings=150)
    kept, every = OffsetMap(), _EveryPoint()
    for upstream, downstream, dense in syncs:
        kept.add(upstream, downstream, dense)
        every.add(upstream, downstream, dense)
    assert len(kept.points) < len(every.points)
    _assert_same_answers(kept, every, syncs, seed)


def test_a_partition_followed_for_long_keeps_two_points_per_run() -> None:
    """A following task records every second; one unbroken run keeps its first and last point however long it
    runs (before: two more points at every recording, held by a continuous run's driver)."""
    state = PartitionOffsetSyncState()
    offsets = OffsetMap()
    for recording in range(10_000):
        piece = Run(recording * 3, 7 + recording * 3, 3)
        for sync in offset_syncs_for_runs("t", 0, [piece], 100, state, dense=True, delayed=True):
            offsets.add(sync.upstream_offset, sync.downstream_offset, True)
    assert offsets.points == [SyncPoint(0, 7, True), SyncPoint(29_999, 30_006, True)]
    assert offsets.translate(12_345, 29_999) == Translation(12_345, 12_352, "exact")


@pytest.mark.parametrize("seed", range(4))
def test_mm2_syncs_the_dense_ones_cover_are_dropped_and_the_combined_answers_stay_the_same(seed: int) -> None:
    """As a continuous run's store reads both topics on, a refresh at a time: dropping MM2's syncs from each
    partition's first dense sync on changes no answer of the combined map, now or after later refreshes."""
    rng = random.Random(seed)
    history = [(u + 500, d + 500, dense) for u, d, dense in _following_syncs(seed, recordings=120)]
    older = sorted({rng.randint(0, 20) * 20 for _ in range(10)})  # Java MM2's syncs, below all of mm2py's
    mm2 = {("t", 0): OffsetMap()}
    dense = {("t", 0): OffsetMap()}
    every_mm2 = {("t", 0): _EveryPoint()}
    for u in older:
        mm2[("t", 0)].add(u, u, False)
        every_mm2[("t", 0)].add(u, u, False)
    for start in range(0, len(history), 40):  # one refresh
        for u, d, is_dense in history[start : start + 40]:
            (dense if is_dense else mm2)[("t", 0)].add(u, d, is_dense)
            if not is_dense:
                every_mm2[("t", 0)].add(u, d, False)
        drop_covered(mm2, dense)
        kept, every = combine_offset_maps(mm2, dense)[("t", 0)], combine_offset_maps(every_mm2, dense)[("t", 0)]
        last = max(u for u, _d, _dense in history[: start + 40])
        for g in range(last + 3):
            assert kept.translate(g, last) == every.translate(g, last), (start, g)
        for d in range(last + 3):
            assert kept.translate_back(d, last) == every.translate_back(d, last), (start, d)
    first_dense = dense[("t", 0)].points[0].upstream
    assert all(p.upstream < first_dense for p in mm2[("t", 0)].points)
    assert len(mm2[("t", 0)].points) < len(every_mm2[("t", 0)].points)

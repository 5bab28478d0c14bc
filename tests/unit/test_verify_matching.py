"""mm2py verify without brokers: window planning, and matching source and target partitions held in memory."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from mm2py.mirror.offset_syncs import Run, offset_syncs_for
from mm2py.mirror.translation import OffsetMap, SyncPoint
from mm2py.tools.verify import (
    Fingerprint,
    PartitionCheck,
    PartitionVerification,
    Reader,
    Window,
    check_partition,
    fingerprint,
    plan_windows,
    runs_from_points,
)

# -- window planning ---------------------------------------------------------------------------------------


def assert_tiles(windows: list[Window], first: int, last: int, max_records: int) -> None:
    assert windows[0].upstream_start == first and windows[-1].upstream_end == last
    for a, b in itertools.pairwise(windows):
        assert b.upstream_start == a.upstream_end + 1 and b.downstream_start == a.downstream_end + 1
    for w in windows:
        assert 0 <= w.upstream_end - w.upstream_start + 1 <= max_records
        assert 0 <= w.downstream_end - w.downstream_start + 1 <= max_records


def test_one_long_run_is_cut_at_the_same_record_on_both_sides() -> None:
    windows = plan_windows([Run(0, 1_000, 120_000)], 0, 119_999, 0, 200_000, max_records=50_000)
    assert [(w.upstream_start, w.upstream_end, w.downstream_start, w.downstream_end) for w in windows] == [
        (0, 49_999, 1_000, 50_999),
        (50_000, 99_999, 51_000, 100_999),
        (100_000, 119_999, 101_000, 120_999),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_merged_partition_windows_tile_both_sides_and_keep_each_copy_in_its_records_window(seed: int) -> None:
    pairs = interleave(random.Random(seed), ours=3_000, foreign_every=0.1)
    runs = runs_from_points(build_map(pairs, batch=400).points)
    windows = plan_windows(runs, 0, pairs[-1][0], 0, pairs[-1][1] + 500, max_records=250)
    assert_tiles(windows, 0, pairs[-1][0], 250)
    assert windows[-1].downstream_end == pairs[-1][1], "nothing after the last copy is planned"
    for u, d in pairs:
        (w,) = [w for w in windows if w.upstream_start <= u <= w.upstream_end]
        assert w.downstream_start <= d <= w.downstream_end, (u, d, w)


def test_without_syncs_both_sides_are_cut_in_proportion() -> None:
    windows = plan_windows([], 0, 99, 0, 299, max_records=50)
    assert_tiles(windows, 0, 99, 50)
    assert windows[-1].downstream_end == 299
    assert [w.upstream_end - w.upstream_start + 1 for w in windows] == [16, 16, 17, 17, 17, 17]


def test_range_starting_inside_a_run_starts_at_that_records_copy() -> None:
    windows = plan_windows([Run(0, 10, 100)], 40, 59, 0, 500, max_records=1_000)
    assert [(w.upstream_start, w.upstream_end, w.downstream_start, w.downstream_end) for w in windows] == [
        (40, 59, 50, 69)
    ]


def test_nothing_replicated_plans_no_window() -> None:
    assert plan_windows([Run(0, 0, 10)], 5, 4, 0, 10) == []


def test_dense_one_to_one_syncs_form_runs_and_other_syncs_stay_points() -> None:
    points = [
        SyncPoint(0, 10, True),
        SyncPoint(9, 19, True),
        SyncPoint(10, 25, True),
        SyncPoint(12, 27, True),
        SyncPoint(13, 28, False),
        SyncPoint(100, 130, False),
    ]
    assert runs_from_points(points) == [Run(0, 10, 10), Run(10, 25, 3), Run(13, 28, 1), Run(100, 130, 1)]


def test_syncs_before_the_remote_topic_was_re_created_are_dropped() -> None:
    points = [SyncPoint(0, 500, True), SyncPoint(9, 509, True), SyncPoint(10, 0, True), SyncPoint(19, 9, True)]
    assert runs_from_points(points) == [Run(10, 0, 10)]


# -- matching ------------------------------------------------------------------------------------------------


def fp(tag: str, ts: int = 0) -> Fingerprint:
    return fingerprint(f"k-{tag}".encode(), f"v-{tag}".encode(), [("h", b"1")], ts)


def interleave(rng: random.Random, ours: int, foreign_every: float) -> list[tuple[int, int]]:
    """(upstream, downstream) of our copies in a partition other sources write to."""
    pairs, d = [], 0
    for u in range(ours):
        while rng.random() < foreign_every:
            d += 1
        pairs.append((u, d))
        d += 1
    return pairs


def build_map(pairs: list[tuple[int, int]], batch: int) -> OffsetMap:
    offset_map = OffsetMap()
    for start in range(0, len(pairs), batch):
        for sync in offset_syncs_for("t", 0, pairs[start : start + batch], 100, dense=True):
            offset_map.add(sync.upstream_offset, sync.downstream_offset, dense=True)
    return offset_map


@dataclass
class Partition:
    """A source partition, the target partition it was copied into, and the syncs the copy wrote."""

    source: list[Fingerprint]
    target: list[Fingerprint] = field(default_factory=list)
    offset_map: OffsetMap = field(default_factory=OffsetMap)

    def copy(self, upstream: range, foreign_every: float = 0.0, syncs: bool = True, seed: int = 0) -> None:
        rng, pairs = random.Random(seed), []
        for u in upstream:
            while rng.random() < foreign_every:
                self.target.append(fp(f"foreign-{len(self.target)}"))
            pairs.append((u, len(self.target)))
            self.target.append(self.source[u])
        if syncs:
            for sync in offset_syncs_for("t", 0, pairs, 100, dense=True):
                self.offset_map.add(sync.upstream_offset, sync.downstream_offset, dense=True)


def reader(records: list[tuple[int, Fingerprint]]) -> Reader:
    position = 0

    def read_through(last: int) -> list[tuple[int, Fingerprint]]:
        nonlocal position
        start = position
        while position < len(records) and records[position][0] <= last:
            position += 1
        return records[start:position]

    return read_through


def verify(p: Partition, window: int = 50, syncs: bool = True) -> PartitionCheck:
    runs = runs_from_points(p.offset_map.points) if syncs else []
    last = len(p.source) - 1
    windows = plan_windows(runs, 0, last, 0, len(p.target) - 1, window)
    target = [(d, f) for d, f in enumerate(p.target) if d >= windows[0].downstream_start - window]
    return check_partition(runs, windows, reader(list(enumerate(p.source))), reader(target), window)


def merged(n: int = 400, seed: int = 1) -> Partition:
    p = Partition([fp(f"r{i}", 1_000 + i) for i in range(n)])
    for start in range(0, n, 60):
        p.copy(range(start, min(n, start + 60)), foreign_every=0.3, seed=seed + start)
    return p


def summary(check: PartitionCheck) -> list[tuple[str, int | None, int | None, int]]:
    return [(x.kind, x.upstream_offset, x.downstream_offset, x.count) for x in check.sorted_problems()]


def test_a_clean_merged_partition_matches_and_other_sources_records_are_ignored() -> None:
    p = merged()
    check = verify(p)
    assert summary(check) == []
    assert (check.source_records, check.target_records) == (400, 400) and len(p.target) > 500
    assert check.source_digest == check.target_digest
    assert (check.by_syncs, check.by_content) == (400, 0)


def test_a_lost_record_is_missing_at_its_upstream_offset_not_a_shift_of_the_rest() -> None:
    p = merged()
    d = p.target.index(p.source[123])
    del p.target[d]  # every copy after it moves down by one
    check = verify(p)
    assert summary(check) == [("missing", 123, None, 1)]
    assert check.target_records == 399 and check.source_digest != check.target_digest


def test_a_changed_value_is_altered_at_the_offset_the_syncs_name() -> None:
    p = merged()
    d = p.target.index(p.source[200])
    key, _value, headers, ts = p.source[200]
    p.target[d] = (key, 42, headers, ts)
    check = verify(p)
    assert summary(check) == [("altered", 200, d, 1)]
    assert (
        check.sorted_problems()[0].describe() == f"altered upstream offset 200 at downstream offset {d} (value differs)"
    )


def test_a_repeated_record_is_one_duplicate_at_the_repeats_downstream_offset() -> None:
    p = merged()
    d = p.target.index(p.source[77])
    p.target.insert(d + 1, p.source[77])  # every copy after it moves up by one
    check = verify(p)
    assert summary(check) == [("duplicate", 77, d + 1, 1)]
    assert check.target_records == 401


@pytest.mark.parametrize("at", [48, 49, 50, 99, 399])
def test_a_shift_across_a_window_boundary_is_still_one_problem(at: int) -> None:
    p = Partition([fp(f"r{i}") for i in range(400)])
    p.copy(range(400))
    p.target.insert(at + 1, p.source[at])
    assert summary(verify(p, window=50)) == [("duplicate", at, at + 1, 1)]
    del p.target[at : at + 2]
    assert summary(verify(p, window=50)) == [("missing", at, None, 1)]


def test_copies_left_by_an_interrupted_task_are_duplicates_with_their_count_and_offsets() -> None:
    p = Partition([fp(f"r{i}") for i in range(300)])
    p.copy(range(0, 100))
    p.copy(range(100, 130), syncs=False)  # the task died after producing, before its syncs and progress
    p.copy(range(100, 200))  # Spark retried it
    p.copy(range(200, 300))
    check = verify(p, window=64)
    assert summary(check) == [("duplicate", 100, 100, 30)]
    assert (
        check.sorted_problems()[0].describe()
        == "duplicates of upstream offsets 100..129 at downstream offsets 100..129 (30 records)"
    )
    assert (check.source_records, check.target_records, check.counts["duplicate"]) == (300, 330, 30)


def test_without_dense_syncs_records_are_matched_by_content() -> None:
    p = merged()
    clean = verify(p, syncs=False)
    assert summary(clean) == [] and (clean.by_syncs, clean.by_content) == (0, 400)
    del p.target[p.target.index(p.source[5])]
    assert summary(verify(p, syncs=False)) == [("missing", 5, None, 1)]


def test_consecutive_missing_records_are_reported_as_one_range() -> None:
    p = Partition([fp(f"r{i}") for i in range(200)])
    p.copy(range(200))
    del p.target[20:45]  # across a window boundary
    check = verify(p, window=30)
    assert summary(check) == [("missing", 20, None, 25)]
    assert check.sorted_problems()[0].describe() == "missing upstream offsets 20..44 (25 records)"


def test_swapped_records_only_change_the_digest() -> None:
    p = Partition([fp(f"r{i}") for i in range(10)])
    p.copy(range(10))
    p.target[3], p.target[4] = p.target[4], p.target[3]
    check = verify(p)
    assert [x.kind for x in check.sorted_problems()] == ["order"]


def test_a_record_differing_only_in_its_timestamp_is_altered() -> None:
    p = Partition([fp(f"r{i}", ts=i) for i in range(10)])
    p.copy(range(10))
    p.target[6] = fp("r6", ts=999)
    assert (
        verify(p).sorted_problems()[0].describe() == "altered upstream offset 6 at downstream offset 6 "
        "(timestamp differs)"
    )


def test_fingerprints_tell_null_from_empty_and_keep_header_order() -> None:
    assert fingerprint(None, b"v", [], 1) != fingerprint(b"", b"v", [], 1)
    assert fingerprint(b"k", b"v", [("a", b"1"), ("b", None)], 1) != fingerprint(
        b"k", b"v", [("b", None), ("a", b"1")], 1
    )
    assert fingerprint(b"k", b"v", [("a", None)], 1) != fingerprint(b"k", b"v", [("a", b"")], 1)
    assert fingerprint(b"k", b"v", None, 1) == fingerprint(b"k", b"v", [], 1)


def test_problem_lines_name_flow_topic_partition_and_offsets() -> None:
    p = Partition([fp(f"r{i}") for i in range(1_300)])
    p.copy(range(1_300))
    del p.target[1_234]
    check = verify(p, window=500)
    row = PartitionVerification(
        "dc1->target",
        "dc1",
        "target",
        "orders",
        "orders",
        2,
        0,
        1_299,
        problems=tuple(check.sorted_problems()),
        missing=check.counts["missing"],
    )
    assert row.status == "mismatch"
    assert row.problem_lines() == ["verify: flow=dc1->target topic=orders partition=2 missing upstream offset 1234"]


def test_problems_beyond_the_listed_ones_are_counted_in_a_last_line() -> None:
    p = Partition([fp(f"r{i}") for i in range(100)])
    p.copy(range(100))
    for d in range(90, 0, -10):
        p.target.insert(d, fp(f"r{d - 1}"))  # nine separate duplicates
    runs = runs_from_points(p.offset_map.points)
    windows = plan_windows(runs, 0, 99, 0, len(p.target) - 1, 1_000)
    check = check_partition(
        runs, windows, reader(list(enumerate(p.source))), reader(list(enumerate(p.target))), max_problems=3
    )
    assert check.counts["duplicate"] == 9 and len(check.problems) == 3
    row = PartitionVerification(
        "f", "a", "b", "t", "t", 0, 0, 99, duplicates=9, problems=tuple(check.sorted_problems())
    )
    assert (
        row.problem_lines()[-1] == "verify: flow=f topic=t partition=0 and 6 more: missing=0 altered=0 "
        "duplicates=9 in all"
    )


@pytest.mark.parametrize("seed", range(60))
def test_any_single_damage_anywhere_in_a_merged_partition_is_reported_exactly_once(seed: int) -> None:
    rng = random.Random(seed)
    p = merged(n=300, seed=seed)
    window = rng.choice([20, 50, 128, 1_000])
    u = rng.randrange(300)
    d = p.target.index(p.source[u])
    kind = rng.choice(["missing", "altered", "duplicate"])
    expected: list[tuple[str, int | None, int | None, int]]
    if kind == "missing":
        del p.target[d]
        expected = [("missing", u, None, 1)]
    elif kind == "altered":
        key, value, headers, ts = p.source[u]
        p.target[d] = (key, value, headers + 1, ts)
        expected = [("altered", u, d, 1)]
    else:
        p.target.insert(d + 1, p.source[u])
        expected = [("duplicate", u, d + 1, 1)]
    assert summary(verify(p, window=window)) == expected, (kind, u, d, window)


def test_the_first_and_the_last_record_can_be_altered() -> None:
    p = Partition([fp(f"r{i}") for i in range(100)])
    p.copy(range(100))
    p.target[0], p.target[99] = fp("x"), fp("y")
    assert summary(verify(p, window=30)) == [("altered", 0, 0, 1), ("altered", 99, 99, 1)]


def test_a_loss_larger_than_a_window_is_reported_as_missing_never_as_altered() -> None:
    p = Partition([fp(f"r{i}") for i in range(300)])
    p.copy(range(300))
    del p.target[20:180]
    check = verify(p, window=30)
    assert check.counts["altered"] == 0 and check.counts["missing"] >= 160
    assert check.sorted_problems()[0].describe().startswith("missing upstream offsets 20..")

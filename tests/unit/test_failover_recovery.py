"""``mm2py failover``'s pure logic: the recovery point's lower bound, MM2's checkpoint choice, and where a
group lands when the syncs on the target are read again. No broker, no JVM."""

from __future__ import annotations

from mm2py.mirror.loss import LossState
from mm2py.mirror.record_formats import Checkpoint
from mm2py.mirror.translation import OffsetMap
from mm2py.tools.cutover.recovery import (
    FailoverReport,
    StampedCheckpoint,
    landing,
    latest_checkpoints,
    recovery_points,
)

NOW = 1_000_000


def _stamped(group: str, partition: int, upstream: int, downstream: int, at: int = NOW) -> StampedCheckpoint:
    return StampedCheckpoint(Checkpoint(group, "A.orders", partition, upstream, downstream, "m"), at)


def _dense(*runs: tuple[int, int, int]) -> OffsetMap:
    """Dense syncs: each (upstream, downstream, length) is a one-to-one run, its first and last record synced."""
    syncs = OffsetMap()
    for up, down, length in runs:
        syncs.add(up, down, True)
        syncs.add(up + length - 1, down + length - 1, True)
    return syncs


def test_not_replicated_is_the_listed_end_minus_the_position_the_target_holds() -> None:
    rows = recovery_points(
        {"orders": "A.orders"},
        {("orders", 0): 99, ("orders", 1): 499},
        {("orders", 0): LossState(end=250), ("orders", 1): LossState(end=400)},
        {("A.orders", 0): NOW - 3_000},
        NOW,
    )
    assert [(r.partition, r.replicated_to, r.listed_end, r.not_replicated) for r in rows] == [
        (0, 100, 250, 150),
        (1, 500, 400, 0),  # the listing is older than the copy: nothing known beyond it, never negative
    ]
    assert (rows[0].newest_age_s, rows[1].newest_age_s) == (3.0, None)


def test_a_partition_without_a_kept_listing_or_without_progress_counts_nothing_it_cannot_know() -> None:
    rows = recovery_points(
        {"orders": "A.orders"},
        {("orders", 0): 9},
        {("orders", 1): LossState(lost=2, counted_to=5, end=80), ("orders", 2): LossState(lost=1)},
        {},
        NOW,
    )
    assert [(r.partition, r.replicated_to, r.listed_end, r.not_replicated) for r in rows] == [
        (0, 10, None, 0),  # no run listed beyond what it copied
        (1, None, 80, 0),  # listed, but nothing copied: no position to count from (its log start is unknown)
    ]


def test_records_the_target_holds_past_its_progress_are_taken_off_the_bound() -> None:
    # A run killed between writing a range and recording it: 40 records of partition 0 are on the target already.
    rows = recovery_points(
        {"orders": "A.orders"},
        {("orders", 0): 99, ("orders", 1): 99},
        {("orders", 0): LossState(end=250), ("orders", 1): LossState(end=120)},
        {},
        NOW,
        {("orders", 0): 40, ("orders", 1): 30},
    )
    assert [(r.partition, r.not_replicated) for r in rows] == [(0, 110), (1, 0)]


def test_topics_the_flow_no_longer_selects_are_left_out_and_the_report_sums_the_bound() -> None:
    rows = recovery_points(
        {"orders": "A.orders"},
        {("orders", 0): 9, ("old", 0): 3},
        {("orders", 0): LossState(end=30), ("old", 0): LossState(end=90)},
        {("A.orders", 0): NOW - 500},
        NOW,
    )
    report = FailoverReport("A->B", "A", "B", dry_run=False, points=rows)
    assert [r.topic for r in rows] == ["orders"]
    assert (report.not_replicated(), report.newest_age_s()) == (20, 0.5)
    assert report.to_json()["recovery_point"]["lower_bound"] is True
    assert report.to_json()["source_contacted"] is False


def test_the_last_checkpoint_in_the_topic_wins_per_partition_as_mm2s_mirror_client_reads_them() -> None:
    read = [
        _stamped("billing", 0, 100, 90),
        _stamped("other", 0, 7, 7),
        _stamped("billing", 1, 50, 50),
        _stamped("billing", 0, 40, 30),  # a rewind upstream: MM2 takes it, being the newest record
    ]
    chosen = latest_checkpoints(read, ["billing"])
    assert {k: (s.checkpoint.upstream_offset, s.checkpoint.downstream_offset) for k, s in chosen.items()} == {
        ("billing", "A.orders", 0): (40, 30),
        ("billing", "A.orders", 1): (50, 50),
    }
    assert set(latest_checkpoints(read)) == {*chosen, ("other", "A.orders", 0)}


def test_without_syncs_a_group_lands_where_its_checkpoint_says() -> None:
    g = landing(_stamped("billing", 0, 120, 101, at=NOW - 2_500), None, 200, NOW)
    assert (g.offset, g.method, g.checkpoint_age_s, g.metadata) == (101, "checkpoint", 2.5, "m")


def test_a_checkpoint_made_before_its_position_was_replicated_lands_exactly_with_the_syncs_on_the_target() -> None:
    # When checkpointed, upstream 0..99 had been copied to 1000..1099 and the group was at 150: MM2's rule said
    # 1100. Since then 100..199 were copied to 1100..1199: the group's position 150 is 1150 exactly.
    syncs = _dense((0, 1000, 200))
    g = landing(_stamped("billing", 0, 150, 1100), syncs, 199, NOW)
    assert (g.offset, g.method) == (1150, "exact")


def test_a_group_still_ahead_of_the_copy_lands_after_everything_the_target_holds() -> None:
    syncs = _dense((0, 1000, 120))  # copied up to upstream 119; the group had processed up to 149 on A
    g = landing(_stamped("billing", 0, 150, 1100), syncs, 119, NOW)
    # Skips nothing the target holds. Records it holds past 1119 (a range written as the run died, before its
    # syncs) came from upstream offsets not known without the source: the group reads them again, MM2's rule.
    assert (g.offset, g.method) == (1120, "syncs")


def test_syncs_that_would_move_a_group_backwards_are_not_taken() -> None:
    syncs = OffsetMap()
    syncs.add(0, 1000, False)  # sparse syncs (Java MM2's): MM2's rule says 1001 for anything past 0
    g = landing(_stamped("billing", 0, 150, 1140), syncs, 199, NOW)
    assert (g.offset, g.method) == (1140, "checkpoint")

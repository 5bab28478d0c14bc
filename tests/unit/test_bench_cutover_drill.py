"""bench.cutover_drill's judgement of a run: which re-reads on B count against the failover (those the offset syncs
on B cover), and that a run missing any must-show of its scenario is named as failed."""

from __future__ import annotations

from typing import Any

from bench.cutover_drill import failed_checks, twice_covered
from tests.harness.recording_consumer import Processed


def _read(cluster: str, partition: int, offsets: range, ids: range) -> list[Processed]:
    return [Processed(cluster, "orders", partition, o, str(i).encode()) for o, i in zip(offsets, ids, strict=True)]


def test_only_re_reads_at_offsets_the_syncs_cover_count_against_the_failover() -> None:
    on_a = _read("A", 0, range(0, 100), range(0, 100))
    # On B the group resumed at 90: 90..94 are covered by syncs (newest sync at downstream 94), 95..99 are not.
    on_b = _read("B", 0, range(90, 110), range(90, 110))
    assert twice_covered(on_a, on_b, {0: 94}) == 5
    assert twice_covered(on_a, on_b, {0: 200}) == 10
    assert twice_covered(on_a, on_b, {}) == 0  # no sync of the partition: nothing is covered


def test_a_record_read_twice_on_b_itself_counts_too() -> None:
    on_b = _read("B", 0, range(0, 3), range(0, 3)) + _read("B", 0, range(1, 2), range(1, 2))
    assert twice_covered([], on_b, {0: 10}) == 1


def _planned(**changes: Any) -> dict[str, Any]:
    groups = {"ahead": {"on_a": 10, "on_b": 0, "read_twice": 0, "skipped": 0}}
    run = {
        "cutover_exit": 0,
        "handover": "host:1 (since t) handed A->B over in 1.5 s and stands by",
        "run_stood_down": True,
        "run_exit": 0,
        "run_traceback": False,
        "groups": groups,
        "a_records": 10,
        "copy_exact": True,
    }
    return {**run, **changes}


def test_a_planned_run_that_showed_everything_passes() -> None:
    assert failed_checks("planned", _planned()) == []


def test_a_planned_run_is_failed_for_a_skipped_record_or_a_run_that_did_not_hand_over() -> None:
    skipped = {"ahead": {"on_a": 9, "on_b": 0, "read_twice": 0, "skipped": 1}}
    assert failed_checks("planned", _planned(groups=skipped)) == [
        "nothing skipped",
        "every record processed once across A and B",
    ]
    assert failed_checks("planned", _planned(handover="")) == ["the run handed over"]

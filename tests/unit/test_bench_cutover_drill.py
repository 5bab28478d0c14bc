"""bench.cutover_drill's judgement of a run: which re-reads on B count against the failover (those the offset syncs
on B cover), what T holds of each source merged into it, and that a run missing any must-show of its scenario is
named as failed."""

from __future__ import annotations

from typing import Any

from bench.cutover_drill import failed_checks, twice_covered
from bench.cutover_merged import FLOWS, copy_of_sources, read_again_reported, stood_down
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


# -- the merged scenario (bench/cutover_merged.py) ---------------------------------------------------------------


def test_what_t_holds_of_each_merged_source_is_counted_per_source_and_partition() -> None:
    sources = {"A": {0: [b"a1", b"a2"], 1: [b"a3"]}, "C": {0: [b"c1", b"c2"]}}
    exact = {0: [b"c1", b"a1", b"c2", b"a2"], 1: [b"a3"]}  # interleaved, each source in its own order
    assert copy_of_sources(sources, exact) == (
        {
            "A": {"lost": 0, "duplicated": 0, "reordered_partitions": 0},
            "C": {"lost": 0, "duplicated": 0, "reordered_partitions": 0},
        },
        0,
    )
    # a2 before a1, c1 twice, c2 missing, and a3 in the wrong partition (lost there, unexpected where it is).
    wrong = {0: [b"c1", b"a2", b"c1", b"a1", b"a3"], 1: []}
    per_source, unexpected = copy_of_sources(sources, wrong)
    assert per_source == {
        "A": {"lost": 1, "duplicated": 0, "reordered_partitions": 1},
        "C": {"lost": 1, "duplicated": 1, "reordered_partitions": 0},
    }
    assert unexpected == 1


def test_the_run_stood_down_for_a_flow_only_when_its_log_says_both_steps_for_that_flow() -> None:
    log = (
        "WARNING flow=A->T: host:1 (since t) asks for the flow; handing it over\n"
        "WARNING flow=A->T was cut over at t; this run copies nothing more for it\n"
        "WARNING flow=C->T: host:1 (since t) asks for the flow; handing it over\n"
    )
    assert stood_down(log, "A->T")
    assert not stood_down(log, "C->T")  # asked, but it never said it copies nothing more
    assert not stood_down(log, "D->T")


def test_the_reported_read_again_of_a_source_is_the_sum_of_its_rows_or_unknown() -> None:
    report = {
        "groups": [
            {"source": "A", "read_again": 7},
            {"source": "A", "read_again": 3},
            {"source": "D", "read_again": 0},
            {"source": "C", "read_again": None},
        ]
    }
    assert read_again_reported(report, "A") == 10
    assert read_again_reported(report, "D") == 0
    assert read_again_reported(report, "C") is None  # MM2's rule: not counted, so it cannot match
    assert read_again_reported(report, "X") is None  # no rows: the cut-over did not report the source


def _merged(**changes: Any) -> dict[str, Any]:
    source = {"records": 10, "on_source": 6, "on_t": 6, "read_twice": 2, "skipped": 0, "read_again_reported": 2}
    exact = {"lost": 0, "duplicated": 0, "reordered_partitions": 0}
    run = {
        "cutover_exit": 0,
        "handovers": [f"host:1 (since t) handed {flow} over in 1.0 s and stands by" for flow in FLOWS],
        "run_stood_down": dict.fromkeys(FLOWS, True),
        "run_exit": 0,
        "run_traceback": False,
        "sources": {s: dict(source) for s in ("A", "C", "D")},
        "copy": {s: dict(exact) for s in ("A", "C", "D")},
        "t_unexpected": 0,
        "t_records": 30,
    }
    return {**run, **changes}


def test_a_merged_run_that_showed_everything_passes() -> None:
    assert failed_checks("merged", _merged()) == []


def test_a_merged_run_is_failed_for_re_reads_the_report_did_not_count_or_a_flow_not_handed_over() -> None:
    run = _merged()
    run["sources"]["C"]["read_twice"] = 3  # one re-read more than the report counted (and so one more on T)
    assert failed_checks("merged", run) == [
        "read twice as the report counts, per source",
        "every record processed across the source and T",
    ]
    two = _merged(handovers=_merged()["handovers"][:2])
    assert failed_checks("merged", two) == ["the run handed all three flows over"]
    down = _merged(run_stood_down={"A->T": True, "C->T": True, "D->T": False})
    assert failed_checks("merged", down) == ["the run stood down for every flow and exited 0"]


def test_a_merged_run_is_failed_for_a_skipped_record_or_a_copy_that_lost_one() -> None:
    run = _merged()
    run["sources"]["D"].update(skipped=1, on_t=5)
    run["copy"]["D"]["lost"] = 1
    assert failed_checks("merged", run) == [
        "nothing of any source skipped",
        "every record processed across the source and T",
        "T holds every record of each source once, in order",
    ]

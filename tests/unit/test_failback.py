"""The pure logic of ``mm2py failback`` (the divergent tail per partition, where the reverse flow starts, where the
groups would stand on the source, the report) and its command line without a broker. No JVM."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mm2py.cli.app import main
from mm2py.control.cutover_mark import CutoverMark, CutPosition
from mm2py.control.failback_record import FailbackRecord, failback_key, record_in
from mm2py.errors import UsageError
from mm2py.tools.cutover.failback import FailbackOptions
from mm2py.tools.cutover.tail import (
    FailbackReport,
    TailCopy,
    divergent_tail,
    group_returns,
    progress_to_write,
    reverse_starts,
    side_starts,
    side_topic_name,
)

POSITIONS = (
    CutPosition("orders", 0, 100, "A.orders", 90),
    CutPosition("orders", 1, 50, "A.orders", 50),
    CutPosition("orders", 2, 70, "A.orders", 70),
    CutPosition("orders", 3, 40, "A.orders", 40),
)
MARK = CutoverMark("A->B", 1_700_000_000_000, "cutover", "host:1", POSITIONS)


def test_the_tail_is_every_offset_from_the_marks_position_to_the_sources_end_now() -> None:
    latest = {("orders", 0): 130, ("orders", 1): 50, ("orders", 2): 75, ("orders", 3): 30}
    earliest = {("orders", 0): 0, ("orders", 1): 0, ("orders", 2): 72, ("orders", 3): 0}
    rows = {t.partition: t for t in divergent_tail(POSITIONS, earliest, latest)}
    assert (rows[0].from_offset, rows[0].to_offset, rows[0].count) == (100, 130, 30)
    assert rows[1].count == 0  # nothing written to A after the cut-over
    # Retention deleted 2 offsets of the tail before failback: they are said, not counted as kept.
    assert (rows[2].from_offset, rows[2].count, rows[2].deleted) == (72, 3, 2)
    # A now ends before the mark: the topic was re-created or truncated, its offsets are not the mark's.
    assert rows[3].truncated and rows[3].count == 0
    assert {t.side_topic for t in rows.values()} == {"A.orders.failback-tail"}


def test_the_side_topic_is_named_after_the_remote_topic_unless_tail_topic_names_it() -> None:
    assert side_topic_name("A.orders") == "A.orders.failback-tail"
    rows = divergent_tail(POSITIONS[:1], {}, {("orders", 0): 101}, {"orders": "kept-from-a"})
    assert [(t.side_topic, t.count) for t in rows] == [("kept-from-a", 1)]


def test_the_reverse_flow_starts_at_the_first_record_since_the_cut_over_and_never_goes_back() -> None:
    at_times = {("orders", 0): 40, ("orders", 1): -1, ("orders", 2): 10, ("orders", 3): 10}
    ends = {("orders", 0): 60, ("orders", 1): 25, ("orders", 2): 30, ("orders", 3): 30}
    progress = {("orders", 2): 19, ("orders", 3): 3}
    starts = {s.partition: s for s in reverse_starts(at_times, ends, progress)}
    assert (starts[0].offset, starts[0].reason) == (40, "cut-over time")
    assert (starts[1].offset, starts[1].reason) == (25, "end (nothing since the cut-over)")
    assert (starts[2].offset, starts[2].reason) == (20, "progress already past it")  # copied already: not again
    assert (starts[3].offset, starts[3].reason) == (10, "cut-over time")  # B's older history is skipped
    # Progress is the last replicated offset; a partition already past its start is not written.
    assert progress_to_write(starts.values()) == {("orders", 0): 39, ("orders", 1): 24, ("orders", 3): 9}


def test_under_identity_replication_a_remote_partition_of_the_mark_starts_at_its_end_at_the_cut_over() -> None:
    # B->A replicates B's "orders" (also A's remote topic there) and B's own "invoices".
    at_times = {("orders", 0): 70, ("orders", 1): -1, ("invoices", 0): 5}
    ends = {("orders", 0): 95, ("orders", 1): 60, ("invoices", 0): 9}
    cut_ends = {("orders", 0): 90, ("orders", 1): 50}
    starts = {(s.topic, s.partition): s for s in reverse_starts(at_times, ends, {}, cut_ends)}
    # Not by time: B's records up to 90 came from A (their CreateTimes are A's producers' clocks, not the mark's),
    # and none of them may go back to A.
    assert (starts[("orders", 0)].offset, starts[("orders", 0)].reason) == (90, "end at the cut-over (the mark)")
    assert starts[("orders", 1)].offset == 50
    assert (starts[("invoices", 0)].offset, starts[("invoices", 0)].reason) == (5, "cut-over time")


def test_a_group_that_read_all_the_cut_over_gave_stands_where_the_tail_begins_on_the_source() -> None:
    tails = divergent_tail(POSITIONS, {}, {("orders", 0): 130, ("orders", 1): 50, ("orders", 2): 70})
    committed = {
        "billing": {("A.orders", 0): 90, ("A.orders", 1): 45, ("B.other", 0): 3},
        "audit": {("A.orders", 2): 70},
    }
    rows = {(g.group, g.partition): g for g in group_returns(committed, MARK, tails)}
    assert set(rows) == {("billing", 0), ("billing", 1), ("audit", 2)}  # topics outside the mark left out
    assert (rows[("billing", 0)].source_offset, rows[("billing", 0)].tail) == (100, 30)
    behind = rows[("billing", 1)]
    assert (behind.source_offset, behind.behind) == (None, 5)  # said, not guessed
    assert rows[("audit", 2)].source_offset == 70


def test_the_report_as_json_names_the_tail_the_copies_and_the_starts() -> None:
    report = FailbackReport("A->B", "B->A", "A", "B", dry_run=True, leave_tail=False, mark=MARK)
    report.tails = divergent_tail(POSITIONS[:2], {}, {("orders", 0): 130, ("orders", 1): 50})
    report.copies = [TailCopy("orders", 0, "A.orders.failback-tail", 30, 10, 20, 0, 30, True)]
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["tail_count"] == 30 and doc["reverse_flow"] == "B->A"
    assert [(t["partition"], t["from"], t["to"], t["count"]) for t in doc["tail"]] == [
        (0, 100, 130, 30),
        (1, 50, 50, 0),
    ]
    assert doc["preserved"][0]["verified"] and doc["preserved"][0]["kept_before"] == 10
    assert not TailCopy("orders", 0, "s", 30, 0, 30, 0, 29, True).verified
    assert TailCopy("orders", 0, "s", 30, 0, 30, 12, 42, True).verified  # after an earlier cut-over's 12


def test_a_failback_of_the_same_cut_over_resumes_from_the_recorded_starts_and_another_cut_overs_are_ignored() -> None:
    side = {("A.orders.failback-tail", 0): 900, ("A.orders.failback-tail", 1): 750}
    mine = FailbackRecord("A->B", MARK.at_ms, (("A.orders.failback-tail", 0, 600), ("A.orders.failback-tail", 1, 750)))
    # Stopped half way: partition 0 holds 300 of this tail after its start 600; nothing new to record.
    assert side_starts(mine, MARK, side) == (
        {("A.orders.failback-tail", 0): 600, ("A.orders.failback-tail", 1): 750},
        False,
    )
    # A record of an earlier cut-over: its tail (the 900 and 750 records there) is not this one's.
    earlier = FailbackRecord("A->B", MARK.at_ms - 86_400_000, mine.side_starts)
    assert side_starts(earlier, MARK, side) == (side, True)
    assert side_starts(None, MARK, side) == (side, True)


def test_the_failback_record_read_back_is_the_newest_of_its_flow_and_a_tombstone_clears_it() -> None:
    record = FailbackRecord("A->B", 5, (("A.orders.failback-tail", 0, 7),))
    value = json.dumps(record.to_json()).encode()
    other = json.dumps(FailbackRecord("C->B", 9, ()).to_json()).encode()
    assert record_in([(failback_key("A->B"), value), (failback_key("C->B"), other), (b"A->B", b"{}")], "A->B") == record
    assert record_in([(failback_key("A->B"), value), (failback_key("A->B"), None)], "A->B") is None
    assert record_in([(failback_key("A->B"), b"not json")], "A->B") is None


def test_tail_topic_and_leave_tail_exclude_each_other() -> None:
    with pytest.raises(UsageError, match="--tail-topic kept and --leave-tail"):
        FailbackOptions(tail_topic="kept", leave_tail=True)


CONFIG = (
    "clusters = east, west\neast.bootstrap.servers = 127.0.0.1:1\nwest.bootstrap.servers = 127.0.0.1:1\n"
    "east->west.enabled = true\nadmin.timeout.ms = 1000\n"
)


def _failback(tmp_path: Path, body: str, *args: str) -> int | str | None:
    config = tmp_path / "mm2.properties"
    config.write_text(body)
    with pytest.raises(SystemExit) as exit_:
        main(["failback", str(config), *args])
    return exit_.value.code


def test_a_reverse_flow_not_enabled_is_a_config_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _failback(tmp_path, CONFIG, "--flow", "east->west", "--dry-run") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "west->east.enabled" in line and "allowed: west->east.enabled = true" in line, line


def test_with_no_flow_enabled_the_missing_reverse_flow_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As the runbook asks: A->B disabled while B is primary; B->A forgotten.
    body = CONFIG.replace("east->west.enabled = true", "east->west.enabled = false")
    assert _failback(tmp_path, body, "--flow", "east->west") == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after validate's warning that no flow is enabled
    assert line.startswith("mm2py: error: ") and "west->east.enabled" in line and "not enabled" in line, line


def test_an_unreachable_target_exits_3_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert _failback(tmp_path, CONFIG + "west->east.enabled = true\n", "--flow", "east->west", "--dry-run") == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("mm2py: error: ") and "west" in line, line
    assert time.monotonic() - started < 30

"""Flows merged into one target cut over together (IdentityReplicationPolicy, several sources feeding ``orders``):
the offset each merged partition gets and what the group reads again of each source, counted from the dense
syncs (mirror/translation.py OffsetMap.records_downstream, tools/cutover/report.py group_moves)."""

from __future__ import annotations

from mm2py.control.checkpoints import GroupOffset
from mm2py.mirror.translation import OffsetMap, Translation
from mm2py.tools.cutover.report import SourceRow, group_moves


def dense(*runs: tuple[int, int, int]) -> OffsetMap:
    """A source's dense syncs: runs of (first upstream, first downstream, records), as a copy task writes them."""
    offsets = OffsetMap()
    for upstream, downstream, records in runs:
        offsets.add(upstream, downstream, True)
        if records > 1:
            offsets.add(upstream + records - 1, downstream + records - 1, True)
    return offsets


# Partition 0 of `orders` on T, merged from A and C in turns of five records:
# T offsets 0-4 A 0-4, 5-9 C 0-4, 10-14 A 5-9, 15-19 C 5-9, 20 A 10 (a run of one record).
A = dense((0, 0, 5), (5, 10, 5), (10, 20, 1))
C = dense((0, 5, 5), (5, 15, 5))


def test_records_of_one_source_in_a_downstream_range_are_counted_run_by_run() -> None:
    assert A.records_downstream(0, 21) == 11 and C.records_downstream(0, 21) == 10
    assert A.records_downstream(3, 12) == 4  # T 3, 4 and 10, 11
    assert A.records_downstream(5, 10) == 0 and C.records_downstream(20, 21) == 0
    assert A.records_downstream(20, 21) == 1 and A.records_downstream(9, 9) == 0


def test_a_range_holding_a_sync_written_by_mm2_is_not_counted() -> None:
    mixed = OffsetMap()
    mixed.add(0, 0, True)
    mixed.add(4, 4, True)
    mixed.add(100, 140, False)  # MM2's sparse sync: where the records between went is not known
    assert mixed.records_downstream(0, 5) == 5 and mixed.records_downstream(0, 141) is None


def row(group: str, upstream: int, offsets: OffsetMap) -> GroupOffset:
    """A group's commit on a source translated as the cut-over does, after the copy: everything replicated."""
    replicated = offsets.points[-1].upstream
    return GroupOffset(group, "orders", "orders", 0, upstream, offsets.translate(upstream, replicated))


def test_the_smallest_translation_is_committed_and_the_other_sources_records_past_it_are_read_again() -> None:
    # billing processed A up to offset 7 (T 12) and C up to offset 2 (T 7): it resumes at T 7.
    moves = group_moves([SourceRow("A", row("billing", 7, A), A), SourceRow("C", row("billing", 2, C), C)])
    by_source = {m.source: m for m in moves}
    assert [(m.target_offset, m.method, m.skipped) for m in moves] == [(7, "exact", 0), (7, "exact", 0)]
    assert by_source["C"].read_again == 0  # its own translation
    assert by_source["A"].read_again == 2  # A 5 and 6, at T 10 and 11, already processed on A


def test_sources_caught_up_alike_read_nothing_again() -> None:
    moves = group_moves([SourceRow("A", row("billing", 11, A), A), SourceRow("C", row("billing", 10, C), C)])
    assert {(m.source, m.target_offset, m.read_again) for m in moves} == {("A", 20, 1), ("C", 20, 0)}
    moves = group_moves([SourceRow("A", row("ledger", 10, A), A), SourceRow("C", row("ledger", 5, C), C)])
    assert {(m.source, m.target_offset, m.read_again) for m in moves} == {("A", 15, 0), ("C", 15, 0)}


def test_a_source_translated_by_mm2s_rule_says_its_re_read_is_unknown() -> None:
    sparse = OffsetMap()
    sparse.add(0, 5, False)
    sparse.add(9, 19, False)
    conservative = GroupOffset("billing", "orders", "orders", 0, 4, Translation(4, 6, "conservative", "MM2's syncs"))
    moves = group_moves([SourceRow("A", row("billing", 1, A), A), SourceRow("C", conservative, sparse)])
    assert {(m.source, m.target_offset, m.read_again) for m in moves} == {("A", 1, 0), ("C", 1, None)}

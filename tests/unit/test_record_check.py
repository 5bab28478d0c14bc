"""The fault tests' record checker (tests/harness/record_check.py) counts what it claims to: a copy that lost,
duplicated, reordered, altered or misplaced records is never reported exact, and each count is the number of
records concerned, not of places where the copy differs."""

from __future__ import annotations

from array import array

import pytest

from tests.harness.record_check import compare, compare_partition, record_hash


def hashes(*values: int) -> array:
    return array("Q", values)


def test_an_exact_copy_is_exact() -> None:
    source = {0: hashes(1, 2, 3), 1: hashes(4, 5)}
    result = compare(source, {0: hashes(1, 2, 3), 1: hashes(4, 5)})
    assert result.exact and result.source_records == result.target_records == 5


def test_lost_duplicated_and_reordered_records_are_counted_one_by_one() -> None:
    # 2 lost (4, 6); 3 extra copies (1 twice more, 3 once more); 5 comes after 7's first copy: 1 reordered
    counts = compare_partition(hashes(1, 2, 3, 4, 5, 6, 7), hashes(1, 2, 3, 1, 1, 7, 5, 3))
    assert counts == {"records": 7, "lost": 2, "duplicated": 3, "reordered": 1, "unexpected": 0}


def test_a_re_copied_range_is_duplicates_only_not_reordering() -> None:
    # at-least-once after a crash: the range 3..4 written again after it had been written
    counts = compare_partition(hashes(1, 2, 3, 4, 5), hashes(1, 2, 3, 4, 3, 4, 5))
    assert counts["duplicated"] == 2 and counts["reordered"] == 0 and counts["lost"] == 0


def test_a_record_in_another_partition_is_lost_there_and_unexpected_here() -> None:
    result = compare({0: hashes(1, 2), 1: hashes(3)}, {0: hashes(1), 1: hashes(3, 2)})
    assert (result.lost, result.unexpected, result.duplicated) == (1, 1, 0)
    assert not result.exact
    assert result.per_partition[0]["lost"] == 1 and result.per_partition[1]["unexpected"] == 1


def test_every_field_a_copy_keeps_changes_the_hash() -> None:
    base = (b"k", b"v", [("h", b"1")], (1, 1000))
    variants = [
        (None, b"v", [("h", b"1")], (1, 1000)),
        (b"k", b"", [("h", b"1")], (1, 1000)),
        (b"k", None, [("h", b"1")], (1, 1000)),
        (b"k", b"v", [("h", None)], (1, 1000)),
        (b"k", b"v", [("h", b"1"), ("h", b"1")], (1, 1000)),
        (b"k", b"v", None, (1, 1000)),
        (b"k", b"v", [("h", b"1")], (1, 1001)),
        (b"k", b"v", [("h", b"1")], (2, 1000)),  # LogAppendTime instead of CreateTime
    ]
    assert len({record_hash(*v) for v in [base, *variants]}) == len(variants) + 1


def test_a_source_holding_a_record_twice_cannot_be_checked_by_hash() -> None:
    with pytest.raises(ValueError, match="twice"):
        compare_partition(hashes(1, 1), hashes(1))

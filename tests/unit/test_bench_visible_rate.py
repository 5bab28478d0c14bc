"""bench.steady's visible rate: defined for a transactional copy that commits only a few times, where the slope of
the read_committed end has too few steps, and equal to the log end's slope when nothing waits in a transaction."""

from __future__ import annotations

from bench.steady import visible_rate

TOTAL = 1000


def test_one_commit_at_the_end_counts_from_the_writes_to_the_commit() -> None:
    written = [(0.0, 0), (1.0, 100), (2.0, 500), (3.0, 1000)]
    committed = [(0.0, 0), (3.0, 0), (4.0, 1000)]  # one step: no slope between 10% and 90% exists
    assert visible_rate(written, committed, TOTAL) == {"visible_records_per_s": (1000 - 100) / (4.0 - 1.0)}


def test_without_transactions_it_is_the_slope_of_the_log_end() -> None:
    written = [(float(t), 100 * t) for t in range(11)]
    assert visible_rate(written, written, TOTAL) == {"visible_records_per_s": 100.0}


def test_a_copy_that_never_got_readable_has_no_rate() -> None:
    written = [(0.0, 0), (1.0, 1000)]
    assert visible_rate(written, [(0.0, 0), (1.0, 0)], TOTAL) == {"visible_records_per_s": None}

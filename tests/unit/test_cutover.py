"""The pure logic of ``mm2py cutover``: the quiet wait, the report's rows, the refusals, the mark's records."""

from __future__ import annotations

import json

import pytest

from mm2py.control.checkpoints import GroupOffset
from mm2py.control.cutover_mark import CutoverMark, CutPosition, mark_key, marks_in
from mm2py.errors import CheckFailed, UsageError
from mm2py.librdkafka.admin_groups import GroupInfo, GroupMember
from mm2py.mirror.translation import Translation
from mm2py.tools.cutover import CutoverOptions, CutoverReport
from mm2py.tools.cutover.quiet import QuietWatch, wait_for_quiet
from mm2py.tools.cutover.report import (
    SourceRow,
    behind_refusal,
    group_moves,
    lease_refusal,
    members_refusal,
    topic_checks,
    untranslatable,
)
from mm2py.tools.lag import PartitionLag


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def ends_over_time(clock: FakeClock, moving_until: float) -> dict[tuple[str, int], int]:
    """Partition 0 grows until ``moving_until``; partition 1 never moves."""
    grown = int(min(clock.now, moving_until) * 10)
    return {("orders", 0): 100 + grown, ("orders", 1): 50}


def test_quiet_wait_ends_once_the_last_moving_partition_has_been_still_for_the_quiet_time() -> None:
    clock = FakeClock()
    quiet = wait_for_quiet(
        lambda: ends_over_time(clock, 7.0), cluster="A", quiet_s=5.0, timeout_s=60.0, clock=clock, wait=clock.wait
    )
    # Partition 0 last moved at 7 s; quiet 5 s after that, observed within one poll interval (0.5 s).
    assert 12.0 <= quiet.waited_s <= 12.5
    assert quiet.ends == {("orders", 0): 170, ("orders", 1): 50}
    assert max(clock.waits) <= 1.0  # it polls; it never sleeps the whole quiet time


def test_quiet_wait_observes_a_whole_quiet_time_even_when_nothing_moves() -> None:
    clock = FakeClock()
    quiet = wait_for_quiet(
        lambda: {("orders", 0): 5}, cluster="A", quiet_s=3.0, timeout_s=60.0, clock=clock, wait=clock.wait
    )
    assert 3.0 <= quiet.waited_s < 3.5


def test_quiet_wait_gives_up_naming_the_partitions_still_moving_and_the_cluster() -> None:
    clock = FakeClock()
    with pytest.raises(CheckFailed) as failure:
        wait_for_quiet(
            lambda: ends_over_time(clock, 1e9), cluster="dc1", quiet_s=2.0, timeout_s=10.0, clock=clock, wait=clock.wait
        )
    message = str(failure.value)
    assert "on dc1" in message and "orders-0" in message and "orders-1" not in message
    assert failure.value.exit_code == 1


def test_quiet_watch_counts_a_new_partition_as_a_change() -> None:
    watch = QuietWatch(2.0)
    watch.observe({("t", 0): 1}, 0.0)
    watch.observe({("t", 0): 1, ("t", 1): 0}, 1.5)
    assert not watch.quiet(3.0)
    assert watch.moving(3.0) == [("t", 1)]
    assert watch.quiet(3.5)


def _row(group: str, partition: int, offset: int, translation: Translation) -> GroupOffset:
    return GroupOffset(group, "orders", "A.orders", partition, offset, translation)


def test_exact_moves_read_nothing_again_and_skip_nothing_conservative_ones_say_the_re_read_is_unknown() -> None:
    moves = group_moves(
        [
            SourceRow("A", _row("billing", 0, 40, Translation(40, 38, "exact"))),
            SourceRow(
                "A", _row("billing", 1, 9, Translation(9, 5, "conservative", "between offset syncs written by MM2"))
            ),
        ]
    )
    assert [(m.target_offset, m.method, m.read_again, m.skipped) for m in moves] == [
        (38, "exact", 0, 0),
        (5, "conservative", None, 0),
    ]
    report = CutoverReport("A->B", "A", "B", dry_run=False, moves=moves)
    assert report.totals() == {"read_again": None, "skipped": 0}
    assert report.to_json()["groups"][1]["reason"] == "between offset syncs written by MM2"


def test_a_partition_without_a_translation_is_refused_naming_group_partition_and_why() -> None:
    moves = group_moves(
        [SourceRow("A", _row("audit", 3, 7, Translation(7, None, "unavailable", "no offset syncs for this partition")))]
    )
    (refusal,) = untranslatable(moves)
    assert "group audit" in refusal and "orders-3" in refusal and "offset 7" in refusal and "no offset syncs" in refusal
    assert moves[0].skipped is None


def _lag(partition: int, end: int, lag: int) -> PartitionLag:
    return PartitionLag("A->B", "A", "B", "orders", "A.orders", partition, end, end - lag, lag, 0.0)


def test_topic_checks_say_whether_the_target_holds_all_of_the_source() -> None:
    (complete,) = topic_checks([_lag(0, 10, 0), _lag(1, 12, 0)])
    assert complete.holds_all and complete.source_records == 22 and behind_refusal("B", [complete]) is None
    (behind,) = topic_checks([_lag(0, 10, 0), _lag(1, 12, 3)])
    assert not behind.holds_all and behind.lagging == (1,)
    assert behind_refusal("B", [behind]) == "B does not hold all of the source: A orders: 3 record(s) on partitions [1]"


def test_members_refusal_names_group_members_clients_and_cluster() -> None:
    info = GroupInfo("STABLE", (GroupMember("rdkafka-1f2e", "billing-app-7", "/10.0.0.5"),))
    refusal = members_refusal("billing", "B", info)
    assert refusal is not None
    assert "group billing" in refusal and "rdkafka-1f2e" in refusal and "billing-app-7" in refusal and "on B" in refusal
    assert members_refusal("billing", "B", GroupInfo("EMPTY", ())) is None


def test_lease_refusal_names_the_holder() -> None:
    info = GroupInfo("STABLE", (GroupMember("m1", "mm2py-lease|A->B|host:42", "/h"),))
    refusal = lease_refusal("A->B", "B", info, "host:42 (since 2026-11-28 10:00:00)")
    assert refusal is not None and "host:42 (since" in refusal and "mm2py-lease|A->B|host:42" in refusal
    assert lease_refusal("A->B", "B", GroupInfo("EMPTY", ()), None) is None


def _mark(at: int) -> CutoverMark:
    return CutoverMark("A->B", at, "cutover", "host:1", (CutPosition("orders", 0, 10, "A.orders", 10),))


def test_marks_newest_wins_a_tombstone_clears_and_holder_records_are_passed_over() -> None:
    records = [
        (mark_key("A->B"), json.dumps(_mark(1).to_json()).encode()),
        (b"A->B", json.dumps({"holder": "h:1", "since": 0}).encode()),  # the lease holder, same topic
        (mark_key("C->B"), json.dumps(_mark(2).to_json() | {"flow": "C->B"}).encode()),
        (mark_key("A->B"), json.dumps(_mark(3).to_json()).encode()),
        (mark_key("C->B"), None),
        (mark_key("D->B"), b"not json"),
    ]
    marks = marks_in(records)
    assert list(marks) == ["A->B"]
    assert marks["A->B"] == _mark(3)
    assert "by `mm2py cutover` (host:1)" in marks["A->B"].describe()


def test_a_quiet_timeout_shorter_than_the_quiet_time_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--quiet-timeout 5: must be at least --quiet-seconds"):
        CutoverOptions(quiet_s=10.0, quiet_timeout_s=5.0)

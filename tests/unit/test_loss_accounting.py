"""Records lost before they were replicated, counted by the driver (fake Spark, fake source; no broker).

The rule itself (mirror/resume.py) is checked on numbers; the driver's use of it on the situations a run meets:
a gap found when a flow starts, a copy task that finds its records gone, a partition re-created after a run
saw its end, and ``mm2py.source.loss = fail`` stopping before anything after a gap is copied or recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

import mm2py.engine.copy_rounds as copy_rounds
from mm2py.errors import RECORDS_GONE, Failure, ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.mirror.loss import Gap, LossState, loss_key, loss_value, parse_loss_value
from mm2py.mirror.record_formats import RecordFormatError, parse_source_offset_key
from mm2py.mirror.resume import resume_position
from tests.unit.test_engine_driver import FakeSource, FakeSpark, InstantStop, runner

P0, P1 = ("orders", 0), ("orders", 1)
Written = list[tuple[dict[tuple[str, int], int], dict[tuple[str, int], LossState]]]


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    """What the driver writes to the target: (progress, loss states) per write."""
    calls: Written = []

    def write(
        _t: str,
        _s: object,
        _src: str,
        offsets: Mapping[tuple[str, int], int],
        losses: Mapping[tuple[str, int], LossState] | None = None,
    ) -> None:
        calls.append((dict(offsets), dict(losses or {})))

    monkeypatch.setattr(copy_rounds, "write_progress", write)
    return calls


# -- the rule ---------------------------------------------------------------------------------------------------


def test_a_log_start_past_the_position_is_a_gap_from_the_position_to_the_log_start() -> None:
    resume = resume_position(4999, 7500, 10_000, "earliest")
    assert (resume.start, resume.reason, resume.record) == (7500, "deleted", True)
    assert resume.gap == (5000, 7499) and resume.lost == 2500
    assert resume.loss == LossState(lost=2500, counted_to=7500, end=-1)
    assert resume.warning is not None and "offsets 5000-7499 (2500 records) were deleted" in resume.warning


def test_a_gap_is_counted_once_even_when_the_position_was_not_recorded() -> None:
    counted = LossState(lost=2500, counted_to=7500)
    again = resume_position(4999, 7500, 10_000, "earliest", loss=counted)  # progress write failed last time
    assert again.gap is None and again.loss == counted
    further = resume_position(4999, 8000, 10_000, "earliest", loss=counted)  # and retention went on since
    assert further.gap == (7500, 7999) and further.loss == LossState(3000, 8000)


def test_a_re_created_partition_loses_the_tail_a_run_saw_but_did_not_copy() -> None:
    seen = LossState(lost=10, counted_to=100, end=1500)
    resume = resume_position(999, 0, 300, "earliest", loss=seen)  # the old partition ended at 1500
    assert (resume.start, resume.reason) == (0, "truncated")
    assert resume.gap == (1000, 1499) and resume.loss == LossState(lost=510, counted_to=0, end=-1)
    unseen = resume_position(999, 0, 300, "earliest")  # no run saw beyond 1000: nothing known to count
    assert unseen.gap is None and unseen.reason == "truncated" and unseen.loss.lost == 0


def test_nothing_is_lost_within_the_log_or_without_progress() -> None:
    assert resume_position(99, 0, 300, "earliest").gap is None
    assert resume_position(None, 7500, 10_000, "earliest").start == 7500
    assert resume_position(None, 7500, 10_000, "latest").start == 10_000


def test_a_start_time_places_partitions_without_progress_at_its_first_offset() -> None:
    assert resume_position(None, 0, 100, "latest", start_at=40).start == 40
    assert resume_position(None, 0, 100, "earliest", start_at=-1).start == 100  # no record that late: the end
    assert resume_position(None, 50, 100, "earliest", start_at=10).start == 50  # deleted meanwhile: log start
    assert resume_position(69, 0, 100, "earliest", start_at=10).start == 70  # progress wins


def test_the_loss_record_is_a_connect_key_of_its_own_and_compact_json() -> None:
    key = loss_key("dc1", "orders", 3)
    assert key == b'["mm2py.loss",{"cluster":"dc1","partition":3,"topic":"orders"}]'
    assert parse_source_offset_key(key) == ("mm2py.loss", "dc1", "orders", 3)
    value = loss_value(LossState(2500, 7500, 10_000))
    assert value == b'{"lost":2500,"counted_to":7500,"end":10000}'
    assert parse_loss_value(value) == LossState(2500, 7500, 10_000) and parse_loss_value(None) is None
    assert Gap("orders", 0, 5000, 7499).describe() == "orders partition 0 offsets 5000-7499 (2500 records)"


@pytest.mark.parametrize("value", [b"", b"garbage", b"\xff{}"])
def test_a_loss_record_that_is_not_json_is_named_not_misread(value: bytes) -> None:
    with pytest.raises(RecordFormatError, match=r"^loss record .* is not JSON"):
        parse_loss_value(value)


# -- the driver -------------------------------------------------------------------------------------------------


def test_a_gap_found_when_the_flow_starts_is_counted_recorded_and_skipped(written: Written) -> None:
    source = FakeSource({P0: 7500, P1: 7500}, {P0: 10_000, P1: 10_000})
    spark = FakeSpark()
    r = runner(source, spark, extra="mm2py.range.max.records = 100000\n")
    r.rounds.losses.load({})
    r.rounds.place({P0: 4999, P1: 4999})
    assert r.stats.lost == 5000
    assert written == [({P0: 7499, P1: 7499}, {P0: LossState(2500, 7500), P1: LossState(2500, 7500)})]
    r.run_once(InstantStop())
    assert [[(x.partition, x.start, x.end) for x in job] for job in spark.jobs] == [
        [(0, 7500, 10_000), (1, 7500, 10_000)]
    ]
    assert r.stats.records == 5000 and r.stats.lost == 5000


def test_fail_stops_before_anything_is_copied_or_recorded_naming_every_gap(written: Written) -> None:
    source = FakeSource({P0: 7500, P1: 7500}, {P0: 10_000, P1: 10_000})
    r = runner(source, FakeSpark(), extra="mm2py.source.loss = fail\n")
    with pytest.raises(ReplicationError) as raised:
        r.rounds.place({P0: 4999, P1: 4999})
    assert not raised.value.retriable and raised.value.code == "RECORDS_LOST"
    message = str(raised.value)
    assert "orders partition 0 offsets 5000-7499 (2500 records)" in message
    assert "orders partition 1 offsets 5000-7499 (2500 records)" in message
    assert "mm2py.source.loss = fail" in message
    assert written == [] and r.rounds.positions == {} and r.stats.lost == 0


class GoneOnce(FakeSpark):
    """Copies the first ``upto`` records of partition 0's range, then finds the rest gone (once)."""

    def __init__(self, source: FakeSource, upto: int, new_start: int) -> None:
        super().__init__()
        self.source, self.upto, self.new_start = source, upto, new_start

    def copy(self, spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        results = super().copy(spec, ranges, tasks)
        if len(self.jobs) > 1:
            return results
        self.source.earliest[P0] = self.new_start  # retention ran while the task copied
        gone = Failure("offset out of range", RECORDS_GONE, retriable=False)
        return [
            CopyResult("orders", 0, r.start, self.upto, self.upto - 1, self.upto - r.start, 0, 0, 0.0, gone)
            if r.partition == 0
            else r
            for r in results
        ]


def test_records_gone_during_a_copy_are_counted_from_where_the_task_stopped(written: Written) -> None:
    source = FakeSource({P0: 0}, {P0: 1000})
    spark = GoneOnce(source, upto=300, new_start=700)
    r = runner(source, spark, partitions=1, extra="mm2py.range.max.records = 5000\n")
    r.rounds.place({})
    r.run_once(InstantStop())
    assert [(j[0].start, j[0].end) for j in spark.jobs] == [(0, 1000), (700, 1000)]
    assert r.stats.lost == 400 and r.stats.records == 600 and r.stats.retries == 0
    assert written[-1] == ({P0: 699}, {P0: LossState(400, 700, end=1000)})  # with the end the run saw


def test_records_gone_under_fail_stop_the_run_after_what_was_copied_before_the_gap(written: Written) -> None:
    source = FakeSource({P0: 0}, {P0: 1000})
    spark = GoneOnce(source, upto=300, new_start=700)
    r = runner(source, spark, partitions=1, extra="mm2py.source.loss = fail\nmm2py.range.max.records = 5000\n")
    r.rounds.place({})
    with pytest.raises(ReplicationError, match="offsets 300-699"):
        r.run_once(InstantStop())
    assert len(spark.jobs) == 1 and r.rounds.positions[P0] == 300 and r.stats.records == 300


def test_a_partition_re_created_mid_run_loses_the_tail_the_run_saw(written: Written) -> None:
    source = FakeSource({P0: 0}, {P0: 1500})
    spark = FakeSpark()
    r = runner(source, spark, partitions=1)  # 100 records per job
    r.rounds.place({})
    r.rounds.copy_round(r.rounds.end_offsets())  # copies 0..99 of the 1500 it saw
    source.latest[P0] = 30  # deleted and re-created with 30 records
    r.rounds.copy_round(r.rounds.end_offsets())
    assert r.stats.lost == 1400 and r.rounds.positions[P0] == 30
    assert written[-1] == ({P0: -1}, {P0: LossState(1400, 0, -1)})


def test_a_run_that_ends_early_keeps_the_end_it_saw_for_a_later_re_creation(written: Written) -> None:
    source = FakeSource({P0: 0}, {P0: 1500})
    r = runner(source, FakeSpark(), partitions=1)
    r.rounds.place({})
    r.rounds.copy_round(r.rounds.end_offsets())
    r.save_tails()
    assert written[-1] == ({}, {P0: LossState(0, -1, 1500)})
    r.save_tails()
    assert len(written) == 2  # kept once, not at every end


def test_the_ends_a_running_run_saw_beyond_its_copy_are_kept_beside_its_checkpoints(written: Written) -> None:
    # What `mm2py failover` counts from when the run dies with the source, or cannot stop without it.
    source = FakeSource({P0: 0}, {P0: 1500})
    r = runner(source, FakeSpark(), partitions=1)  # 100 records per job
    r.rounds.place({})
    r.rounds.copy_round(r.rounds.end_offsets())
    jobs = {job.name: job for job in r.sync.schedule().jobs}
    assert jobs["keep listed ends"].interval_s == jobs["checkpoints"].interval_s
    jobs["keep listed ends"].action()
    assert written[-1] == ({}, {P0: LossState(0, -1, 1500)})
    source.latest[P0] = 1700
    r.rounds.copy_round(r.rounds.end_offsets())
    jobs["keep listed ends"].action()
    assert written[-1] == ({}, {P0: LossState(0, -1, 1700)})


def test_a_report_is_not_held_while_the_listed_ends_are_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A following task's copy loop waits for its report and the report for the flow's lock: the ends are written
    holding the placing lock only (a gap counted meanwhile waits, so no older state overwrites it)."""
    monkeypatch.setattr(copy_rounds, "write_progress", lambda *_args, **_kwargs: None)
    r = runner(FakeSource({P0: 0}, {P0: 1500}), FakeSpark(), partitions=1)
    r.rounds.place({})
    r.rounds.copy_round(r.rounds.end_offsets())
    seen: list[tuple[bool, bool]] = []

    def probe() -> None:  # another thread, as the task-control endpoint's and the flow's are
        reported = r.rounds.lock.acquire(timeout=5)
        if reported:
            r.rounds.lock.release()
        placed = r.rounds.placing.acquire(blocking=False)
        if placed:
            r.rounds.placing.release()
        seen.append((reported, placed))

    def write(*_args: object, **_kwargs: object) -> None:
        prober = threading.Thread(target=probe)
        prober.start()
        prober.join()

    monkeypatch.setattr(copy_rounds, "write_progress", write)
    r.save_tails()
    assert seen == [(True, False)]


def test_a_start_time_places_partitions_without_progress_and_records_it(written: Written) -> None:
    source = FakeSource({P0: 0, P1: 0}, {P0: 100, P1: 100})
    source.times = {P0: {o: 1000 + o for o in range(100)}, P1: {o: 10 * o for o in range(100)}}
    r = runner(source, FakeSpark(), extra="mm2py.start.timestamp = 1050\n")
    r.rounds.place({P1: 9})
    assert r.rounds.positions == {P0: 50, P1: 10}  # P1 has progress: the time does not move it
    assert written == [({P0: 49}, {})]

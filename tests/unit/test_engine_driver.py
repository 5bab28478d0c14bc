"""The driver's own logic with a fake Spark runner and a fake source: no JVM, no broker, seconds to run.

Ranges per job, positions moving only after a job, retries with backoff for transient failures and none for
permanent ones, truncated partitions placed again by the resume rule, and a stop request honoured between jobs.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping

import pytest

import mm2py.engine.copy_rounds as copy_rounds
from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.admin_pool import AdminPool
from mm2py.control.copy_path import choose_copy_path
from mm2py.control.plan import FlowPlan, TopicPlan
from mm2py.engine.driver import FlowRunner
from mm2py.engine.flow_thread import work
from mm2py.engine.retry import Retrier
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.librdkafka.admin import ClusterAdmin


def flow(extra: str = "") -> FlowConfig:
    text = (
        "clusters = dc1, target\ndc1.bootstrap.servers = a:1\ntarget.bootstrap.servers = b:1\n"
        "dc1->target.enabled = true\nmm2py.range.max.records = 100\nmm2py.retry.timeout.seconds = 60\n" + extra
    )
    return build_flow_config(MirrorMakerConfig(parse_properties(text, "t.properties"), {}), Flow("dc1", "target"))


class FakeSource:
    """ListOffsets of the source: a log start and end per partition, changed by the test."""

    def __init__(self, earliest: dict[tuple[str, int], int], latest: dict[tuple[str, int], int]) -> None:
        self.earliest = earliest
        self.latest = latest
        self.away: dict[tuple[str, int], int] = {}  # partition -> how many more end-offset lists it misses
        self.times: dict[tuple[str, int], dict[int, int]] = {}  # partition -> offset -> record timestamp

    def list_offsets(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool = False
    ) -> dict[tuple[str, int], int]:
        table = self.earliest if which == "earliest" else self.latest
        return {tp: table[tp] for tp in partitions}

    def offsets_for_times(self, partitions: list[tuple[str, int]], timestamp_ms: int) -> dict[tuple[str, int], int]:
        """The first offset at or after ``timestamp_ms`` per ``self.times`` (offset -> timestamp), -1 if none."""
        found = {}
        for tp in partitions:
            later = [o for o, t in sorted(self.times.get(tp, {}).items()) if t >= timestamp_ms]
            found[tp] = later[0] if later else -1
        return found

    def list_offsets_of_available(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool = False
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
        away = {tp: "Broker: Leader not available" for tp in partitions if self.away.get(tp, 0) > 0}
        for tp in away:
            self.away[tp] -= 1
        offsets = self.list_offsets([tp for tp in partitions if tp not in away], which, read_committed)
        return offsets, away


class FakeSpark:
    """Copies every range completely, or fails the jobs the test queues up."""

    parallelism = follow_tasks = 2

    def __init__(self) -> None:
        self.jobs: list[list[PartitionRange]] = []
        self.tasks: list[int] = []  # each job's task count
        self.failures: list[ReplicationError] = []
        self.on_job: threading.Event | None = None

    def copy(self, spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        self.jobs.append(ranges)
        self.tasks.append(tasks)
        if self.failures:
            raise self.failures.pop(0)
        if self.on_job is not None:
            self.on_job.set()
        return [CopyResult(r.topic, r.partition, r.start, r.end, r.end - 1, r.end - r.start, 0, 0, 0.0) for r in ranges]


class InstantStop(threading.Event):
    """A stop event whose waits (the retry backoff) return at once but are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()

    @property
    def nominal_waits(self) -> list[float]:
        """The waits without their jitter: each must lie within ±20 % of a power of two seconds (the driver's
        step backoff, 1 s doubling)."""
        nominal = [float(2 ** round(math.log2(w))) for w in self.waits]
        assert all(0.8 * n <= w <= 1.2 * n for w, n in zip(self.waits, nominal, strict=True)), self.waits
        return nominal


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[tuple[str, int], int]]:
    """Starting positions the driver records as progress (instead of producing them to a target)."""
    written: list[Mapping[tuple[str, int], int]] = []

    def write(
        _target: str, _settings: object, _source: str, offsets: Mapping[tuple[str, int], int], **_: object
    ) -> None:
        written.append(dict(offsets))

    monkeypatch.setattr(copy_rounds, "write_progress", write)
    return written


def runner(source: FakeSource, spark: FakeSpark, partitions: int = 2, extra: str = "") -> FlowRunner:
    f = flow(extra)
    plan = FlowPlan(
        "dc1", "target", (TopicPlan("orders", "dc1.orders", partitions, "up to date", partitions),), choose_copy_path(f)
    )

    def factory(_alias: str, _flow: FlowConfig, _side: str) -> ClusterAdmin:
        return source  # type: ignore[return-value]

    return FlowRunner(f, plan, spark, AdminPool(factory))  # type: ignore[arg-type]


def test_once_copies_in_ranges_of_at_most_range_max_records_one_per_partition_per_job(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 250, ("orders", 1): 40})
    spark = FakeSpark()
    r = runner(source, spark)
    r.rounds.place({})
    assert recorded == [{("orders", 0): -1, ("orders", 1): -1}]  # earliest start recorded at once
    r.run_once(InstantStop())
    assert [[(x.partition, x.start, x.end) for x in job] for job in spark.jobs] == [
        [(0, 0, 100), (1, 0, 40)],
        [(0, 100, 200)],
        [(0, 200, 250)],
    ]
    assert r.rounds.positions == {("orders", 0): 250, ("orders", 1): 40}
    assert r.stats.records == 290 and r.stats.lag == 0


def test_transient_failures_are_retried_with_growing_backoff_and_positions_stay_put_meanwhile(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    source = FakeSource({("orders", 0): 0}, {("orders", 0): 50})
    spark = FakeSpark()
    spark.failures = [ReplicationError("broker stalled"), ReplicationError("broker stalled")]
    r = runner(source, spark, partitions=1)
    r.rounds.place({("orders", 0): 9})  # progress says 0..9 were copied
    stop = InstantStop()
    r.run_once(stop)
    assert stop.nominal_waits == [1.0, 2.0]
    assert [(j[0].start, j[0].end) for j in spark.jobs] == [(10, 50)] * 3
    assert r.rounds.positions[("orders", 0)] == 50 and r.stats.retries == 2
    assert recorded == [{}]  # stored progress needs no recording


def test_a_permanent_failure_stops_at_once_without_retrying(recorded: list[Mapping[tuple[str, int], int]]) -> None:
    source = FakeSource({("orders", 0): 0}, {("orders", 0): 50})
    spark = FakeSpark()
    spark.failures = [ReplicationError("record too large", code="MESSAGE_TOO_LARGE", retriable=False)]
    r = runner(source, spark, partitions=1)
    r.rounds.place({})
    stop = InstantStop()
    with pytest.raises(ReplicationError, match="too large"):
        r.run_once(stop)
    assert stop.waits == [] and r.rounds.positions[("orders", 0)] == 0


def test_a_truncated_source_partition_is_replicated_again_from_its_start_and_recorded(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    source = FakeSource({("orders", 0): 0}, {("orders", 0): 80})
    spark = FakeSpark()
    r = runner(source, spark, partitions=1)
    r.rounds.place({("orders", 0): 79})
    assert r.rounds.positions[("orders", 0)] == 80
    source.latest[("orders", 0)] = 30  # the topic was deleted and re-created with 30 records
    r.run_once(InstantStop())
    assert [(j[0].start, j[0].end) for j in spark.jobs] == [(0, 30)]
    assert recorded[-1] == {("orders", 0): -1}


def test_a_stop_request_ends_once_after_the_job_in_flight(recorded: list[Mapping[tuple[str, int], int]]) -> None:
    source = FakeSource({("orders", 0): 0}, {("orders", 0): 1_000})
    spark = FakeSpark()
    stop = InstantStop()
    spark.on_job = stop  # the signal arrives while the first job runs
    r = runner(source, spark, partitions=1)
    r.rounds.place({})
    r.run_once(stop)
    assert len(spark.jobs) == 1 and r.rounds.positions[("orders", 0)] == 100


# -- a partition whose leader is away (its only replica's node is down) --------------------------------------


def test_once_copies_the_other_partitions_then_the_one_whose_leader_came_back(
    recorded: list[Mapping[tuple[str, int], int]], caplog: pytest.LogCaptureFixture
) -> None:
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 150, ("orders", 1): 30})
    # Away when placed, at the first listing, then at the late phase's first listing and its first retry.
    source.away[("orders", 1)] = 4
    spark = FakeSpark()
    r = runner(source, spark)
    r.rounds.place({})
    stop = InstantStop()
    r.run_once(stop)
    copied = [[(x.partition, x.start, x.end) for x in job] for job in spark.jobs]
    assert copied == [[(0, 0, 100)], [(0, 100, 150)], [(1, 0, 30)]]  # partition 0 did not wait for partition 1
    assert stop.nominal_waits == [1.0, 2.0]
    assert r.rounds.positions == {("orders", 0): 150, ("orders", 1): 30} and r.stats.lag == 0
    messages = [rec.getMessage() for rec in caplog.records]
    assert any(
        "partition=1 is not copied while its leader is away (Broker: Leader not available)" in m for m in messages
    )
    assert any("partition=1 has a leader again" in m for m in messages)


def test_a_partition_away_when_the_flow_is_placed_resumes_later_from_its_stored_progress(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    """Placing needs each partition's log start and end; one without a leader must not hold the others back
    (they are placed and copied), and once it is back it resumes where the stored progress says, not at the
    start of its log."""
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 50, ("orders", 1): 30})
    source.away[("orders", 1)] = 2  # when placed, and at the first listing
    spark = FakeSpark()
    r = runner(source, spark)
    r.rounds.stored_progress = {("orders", 1): 19}
    r.rounds.place(r.rounds.stored_progress)
    assert r.rounds.pending() == [("orders", 1)] and r.rounds.positions == {("orders", 0): 0}
    r.run_once(InstantStop())
    copied = [[(x.partition, x.start, x.end) for x in job] for job in spark.jobs]
    assert copied == [[(0, 0, 50)], [(1, 20, 30)]]
    assert r.rounds.positions == {("orders", 0): 50, ("orders", 1): 30}


def test_once_fails_naming_a_partition_whose_leader_stays_away_after_copying_the_rest(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 50, ("orders", 1): 30})
    source.away[("orders", 1)] = 1_000
    spark = FakeSpark()
    r = runner(source, spark, extra="mm2py.retry.timeout.seconds = 20\n")
    r.rounds.place({})
    stop = InstantStop()
    with pytest.raises(KafkaOperationError, match=r"latest offsets of orders-1 on dc1 failed: Broker: Leader not av"):
        r.run_once(stop)
    assert stop.nominal_waits == [1.0, 2.0, 4.0, 8.0, 16.0]  # retried up to mm2py.retry.timeout.seconds
    # The rest was copied; partition 1 was never placed (so no range, and nothing recorded, skips any of it).
    assert r.rounds.positions == {("orders", 0): 50}
    assert all(("orders", 1) not in progress for progress in recorded)
    assert list(r.rounds.unavailable) == [("orders", 1)]


def test_continuous_rounds_copy_around_a_partition_whose_leader_is_away(
    recorded: list[Mapping[tuple[str, int], int]],
) -> None:
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 40, ("orders", 1): 30})
    spark = FakeSpark()
    r = runner(source, spark)
    r.rounds.place({})
    r.rounds.copy_round(r.rounds.end_offsets())
    source.latest = {("orders", 0): 90, ("orders", 1): 70}
    source.away[("orders", 1)] = 1
    assert r.rounds.copy_round(r.rounds.end_offsets()) == 1
    assert spark.jobs[-1][0].partition == 0 and r.rounds.positions == {("orders", 0): 90, ("orders", 1): 30}
    assert r.rounds.unavailable == {("orders", 1): "Broker: Leader not available"}
    assert r.stats.lag == 0  # partition 1's last known end (30) is copied; its new records are not seen yet
    assert (
        r.rounds.copy_round(r.rounds.end_offsets()) == 1
        and r.rounds.positions[("orders", 1)] == 70
        and not r.rounds.unavailable
    )


def test_a_step_that_ran_for_hours_before_failing_still_gets_its_retries() -> None:
    """A generation of following tasks may run for hours and then fail (a broker lost for good, an executor):
    the retry timeout counts from that failure, not from when the step started."""
    now = [0.0]
    f = flow("mm2py.retry.timeout.seconds = 20\n")
    retrier = Retrier(f, FlowStats(f.name), clock=lambda: now[0])
    attempts: list[float] = []

    def generation() -> str:
        attempts.append(now[0])
        if len(attempts) == 1:
            now[0] += 3 * 3600  # it followed its partitions for three hours, then failed
        if len(attempts) < 4:
            raise ReplicationError("the leader of orders-0 stayed away", retriable=True)
        return "following again"

    stop = InstantStop()
    assert retrier(generation, stop) == "following again"
    assert stop.nominal_waits == [1.0, 2.0, 4.0] and retrier.stats.retries == 3  # three failures, three retries


def test_retries_end_when_the_retry_timeout_has_passed_since_the_first_failure() -> None:
    now = [0.0]
    f = flow("mm2py.retry.timeout.seconds = 20\n")
    retrier = Retrier(f, FlowStats(f.name), clock=lambda: now[0])

    class AdvancingStop(InstantStop):
        def wait(self, timeout: float | None = None) -> bool:
            now[0] += timeout or 0.0
            return super().wait(timeout)

    def always_failing() -> None:
        raise ReplicationError("the target is away", retriable=True)

    stop = AdvancingStop()
    with pytest.raises(ReplicationError, match="the target is away"):
        retrier(always_failing, stop)
    # About 15 s waited; the next, about 16 s, would end past the 20 s.
    assert stop.nominal_waits == [1.0, 2.0, 4.0, 8.0]


def test_a_stop_while_a_continuous_flow_retries_ends_it_as_a_stop_and_a_permanent_failure_still_raises() -> None:
    """SIGTERM to a continuous run whose source is gone, while the flow starts or copies: the stop ends the retries
    of the failing step, and the flow ends as stopped (the run exits 0 and leaves its lease), not with the failure
    it was retrying. A ``--once`` run stopped so has not copied up to its ends, and still fails."""
    r = runner(FakeSource({}, {}), FakeSpark())
    r.prepare = lambda: None  # type: ignore[method-assign]
    stop = threading.Event()

    def failing(failure: ReplicationError, stopped: bool) -> Callable[..., None]:
        def run(*_events: threading.Event) -> None:  # run_continuous(stop, lost) or run_once(stop)
            if stopped:
                stop.set()  # the signal came while the step was being retried
            raise failure

        return run

    r.run_continuous = failing(ReplicationError("the source is gone", retriable=True), True)  # type: ignore[method-assign]
    work(r, None, once=False, stop=stop, active=threading.Event())  # returns: stopped
    # The same while the flow starts (syncing configs, fencing, reading progress) rather than copies.
    stop.clear()
    r.prepare = failing(ReplicationError("the target is away", retriable=True), True)  # type: ignore[method-assign]
    work(r, None, once=False, stop=stop, active=threading.Event())
    stop.clear()
    with pytest.raises(ReplicationError, match="the target is away"):
        work(r, None, once=True, stop=stop, active=threading.Event())
    r.prepare = lambda: None  # type: ignore[method-assign]
    for message, retriable, stopped in (("refused", False, True), ("gone", True, False)):
        stop.clear()
        r.run_continuous = failing(ReplicationError(message, retriable=retriable), stopped)  # type: ignore[method-assign]
        with pytest.raises(ReplicationError, match=message):
            work(r, None, once=False, stop=stop, active=threading.Event())
    # --once stopped while retrying did not copy up to the ends it listed: it still fails (exit 3)
    stop.clear()
    r.run_once = failing(ReplicationError("unfinished", retriable=True), True)  # type: ignore[method-assign]
    with pytest.raises(ReplicationError, match="unfinished"):
        work(r, None, once=True, stop=stop, active=threading.Event())

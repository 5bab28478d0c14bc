"""Continuous mode on the batch path, driver side: generations of following tasks, their reports keeping
positions, lag, stats and metrics current, MM2's periodic jobs beside them, and the end of a generation at a
stop, a lost lease, new partitions or a failed partition. Fake Spark and source as in test_engine_driver; the
task-control endpoint is real (HTTP on loopback); no JVM, no broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import pytest
from test_engine_driver import FakeSource, FakeSpark, InstantStop, recorded, runner  # noqa: F401 (recorded: a fixture)

from mm2py.engine import driver as engine_driver
from mm2py.engine.driver import FlowRunner
from mm2py.engine.ranges import FOLLOW_END, follow_ranges, round_ranges
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.engine.spark import effective_master
from mm2py.engine.task_control import TaskControl
from mm2py.errors import ReplicationError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.driver_link import DriverLink, report_row
from mm2py.metrics.measurement import PartitionMeasurement
from mm2py.metrics.registry import RunMetrics

Positions = Mapping[tuple[str, int], int]


class FollowingSpark:
    """A Spark runner whose job is one generation: its 'tasks' report through the real endpoint, as following
    tasks do, until the generation ends; then the job returns their results."""

    def __init__(self, source: FakeSource, slots: int = 2, flows: int = 1) -> None:
        self.source = source
        self.parallelism = slots
        self.flows = flows
        self.specs: list[CopySpec] = []
        self.jobs: list[list[PartitionRange]] = []
        self.tasks: list[int] = []  # each job's task count
        self.during: list[object] = []  # run while the job runs (the test's hooks), each once
        self.reports = 0

    @property
    def follow_tasks(self) -> int:
        return self.parallelism // self.flows

    def copy(self, spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        self.specs.append(spec)
        self.jobs.append(ranges)
        self.tasks.append(tasks)
        assert spec.control is not None
        link = DriverLink(spec.control, spec.flow, "task-0")
        copied = {(r.topic, r.partition): r.start for r in ranges}
        hooks = list(self.during)
        self.during.clear()
        while True:
            rows = []
            for r in ranges:
                tp = (r.topic, r.partition)
                end = self.source.latest[tp]
                new = max(0, end - copied[tp])
                copied[tp] = max(copied[tp], end)
                m = PartitionMeasurement("dc1", "target", r.topic, r.remote_topic, r.partition, new, new * 10)
                rows.append(report_row(r.topic, r.partition, copied[tp], new, new * 10, end, m))
            self.reports += 1
            go_on = link.report(rows)
            if hooks:
                hook = hooks.pop(0)
                hook()  # type: ignore[operator]
            if not go_on:
                break
        return [
            CopyResult(r.topic, r.partition, r.start, copied[(r.topic, r.partition)], -1, 0, 0, 0, 0.0) for r in ranges
        ]


def two_partitions(latest: dict[int, int]) -> FakeSource:
    return FakeSource({("orders", p): 0 for p in latest}, {("orders", p): n for p, n in latest.items()})


def following(source: FakeSource, extra: str = "") -> tuple[FlowRunner, FollowingSpark, TaskControl]:
    spark = FollowingSpark(source)
    r = runner(source, spark, extra=extra)  # type: ignore[arg-type]
    r.rounds.place({})
    control = TaskControl("127.0.0.1")
    r.control = control
    return r, spark, control


def test_a_generation_follows_every_partition_without_an_end_and_its_reports_move_lag_and_metrics(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 30, 1: 0})
    r, spark, control = following(source)
    metrics = RunMetrics()
    r.rounds.metrics = metrics
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def write_then_look() -> None:
        source.latest[("orders", 1)] = 5  # five records arrive while the job runs
        seen.append((r.stats.records, r.stats.lag))

    def stop_it() -> None:
        seen.append((r.stats.records, r.stats.lag))
        stop.set()

    spark.during = [write_then_look, lambda: None, stop_it]
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        control.close()
    assert len(spark.jobs) == 1
    assert [(x.partition, x.start, x.end) for x in spark.jobs[0]] == [(0, 0, FOLLOW_END), (1, 0, FOLLOW_END)]
    assert seen[0] == (30, 0) and seen[-1] == (35, 0)  # counted while the job runs, not when it ends
    assert r.rounds.positions == {("orders", 0): 30, ("orders", 1): 5}
    assert r.stats.records == 35  # the job's results add nothing the reports counted
    samples = {s.labels["partition"]: s.value for f in metrics.collect() for s in f.samples
               if s.name == "kafka_connect_mirror_mirrorsourceconnector_record_count"}  # fmt: skip
    assert samples == {"0": 30, "1": 5}


def test_periodic_jobs_run_beside_the_following_tasks(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 10, 1: 10})
    r, spark, control = following(source, "emit.checkpoints.interval.seconds = 1\n")
    ran = threading.Event()
    r.sync.checkpoint_and_sync = ran.set  # type: ignore[method-assign]
    stop = threading.Event()
    spark.during = [lambda: ran.wait(10), stop.set]
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        control.close()
    assert ran.is_set() and len(spark.jobs) == 1  # the checkpoint ran while the one job still ran


def test_new_partitions_end_the_generation_and_the_next_one_takes_them(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 10, 1: 10})
    r, spark, control = following(source)
    stop = threading.Event()
    plan = r.rounds.plan
    bigger = type(plan)(
        plan.source, plan.target, (type(plan.topics[0])("orders", "dc1.orders", 3, "grow", 3),), plan.copy_path
    )
    source.earliest[("orders", 2)] = 0
    source.latest[("orders", 2)] = 4
    spark.during = [lambda: r.rounds.replan(bigger)]

    def second_generation() -> None:
        if len(spark.jobs) == 2:
            stop.set()

    original = spark.copy

    def copy(spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        if len(spark.jobs) == 1:
            spark.during = [second_generation]
        return original(spec, ranges, tasks)

    spark.copy = copy  # type: ignore[method-assign]
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        control.close()
    assert [len(job) for job in spark.jobs] == [2, 3]
    assert spark.specs[1].control is not None and spark.specs[0].control is not None
    assert spark.specs[1].control.generation > spark.specs[0].control.generation
    assert r.rounds.positions[("orders", 2)] == 4


def test_a_generation_that_fails_for_good_ends_the_flow_at_once_not_when_the_periodic_jobs_would(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    """A following job that fails for good (here: fenced) ends the flow with its failure right away, although the
    run's stop is not set and the periodic jobs beside it (checkpoints every 60 s) are not due."""
    r, spark, control = following(two_partitions({0: 10, 1: 10}))

    def fenced(spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        raise ReplicationError(
            "flow=dc1->target: fenced: another producer took transactional.id x over", retriable=False
        )

    spark.copy = fenced  # type: ignore[method-assign]
    started = time.monotonic()
    try:
        with pytest.raises(ReplicationError, match="fenced"):
            r.run_continuous(threading.Event(), threading.Event())
    finally:
        control.close()
    assert time.monotonic() - started < 5, "the failure waited for the periodic jobs' thread"


def test_a_failed_partition_ends_the_generation_and_a_lost_lease_ends_the_run(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 10, 1: 10})
    r, _spark, control = following(source)
    channel = control.channel("dc1->target", r.rounds.on_report)
    r.rounds.channel = channel
    endpoint = channel.next_generation()
    ranges = follow_ranges(r.rounds.partitions(), r.rounds.positions, r.rounds.remote)
    r.rounds.bounds.start(endpoint.generation, ranges, source.latest)  # as follow() does for its job
    link = DriverLink(endpoint, "dc1->target", "t")
    failed = report_row("orders", 0, 3, 3, 30, 10, None, {"message": "too large", "retriable": False})
    assert link.report([failed]) is False  # the generation ends at once
    assert r.rounds.positions[("orders", 0)] == 3  # what it copied before still counts
    control.close()


def test_the_endpoint_refuses_a_report_without_the_run_s_token() -> None:
    control = TaskControl("127.0.0.1")
    try:
        heard: list[object] = []
        channel = control.channel("a->b", lambda generation, rows, final: heard.append(rows))
        endpoint = channel.next_generation()
        forged = DriverLink(type(endpoint)(endpoint.url, "not-the-token", endpoint.generation), "a->b", "t")
        forged.last_heard = -1e9  # an answer that never comes counts as a driver gone
        assert forged.report([]) is False and heard == []
        assert DriverLink(endpoint, "a->b", "t").report([{"x": 1}]) is True and heard == [[{"x": 1}]]
        channel.stop()
        assert DriverLink(endpoint, "a->b", "t").report([]) is False
    finally:
        control.close()


def test_a_task_whose_driver_is_gone_stops_after_a_while() -> None:
    control = TaskControl("127.0.0.1")
    endpoint = control.channel("a->b", lambda *_: None).next_generation()
    control.close()
    now = [0.0]
    link = DriverLink(endpoint, "a->b", "t", clock=lambda: now[0])
    assert link.report([]) is True  # a blip: it goes on
    now[0] = 16.0
    assert link.report([]) is False  # 15 s without its driver: no lease, no copying


@pytest.mark.parametrize(
    ("extra", "slots", "flows"),
    [
        ("mm2py.continuous.tasks = rounds\n", 2, 1),
        ("mm2py.copy.mode = record\n", 2, 1),
        ("", 2, 3),  # three flows' jobs cannot all run at once on two task slots
    ],
)
def test_jobs_copy_in_rounds_when_they_cannot_follow(
    recorded: list[Positions],  # noqa: F811 (the fixture)
    extra: str,
    slots: int,
    flows: int,
) -> None:
    source = two_partitions({0: 10, 1: 10})
    r = runner(source, FollowingSpark(source, slots, flows), extra=extra)  # type: ignore[arg-type]
    assert not r.rounds.follows()
    assert runner(source, FollowingSpark(source, 2, 1)).rounds.follows()  # type: ignore[arg-type]


def test_a_flow_copying_in_rounds_follows_once_the_cluster_s_executors_give_it_a_task_slot(
    recorded: list[Positions],  # noqa: F811 (the fixture)
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a cluster, Spark's parallelism at the start counts only the executors registered by then (none yet on
    a standalone master: 2): three flows must not copy in rounds for the whole run because of that."""
    source = two_partitions({0: 10, 1: 10})
    spark = FollowingSpark(source, slots=2, flows=3)
    r, _spark, control = following(source)
    r.rounds.spark = spark  # type: ignore[assignment]
    rounds: list[list[PartitionRange]] = []
    following_copy = spark.copy

    def copy(spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        if spec.control is not None:
            return following_copy(spec, ranges, tasks)
        rounds.append(ranges)
        spark.parallelism = 6  # the executors registered meanwhile: two task slots per flow
        return [CopyResult(x.topic, x.partition, x.start, x.end, x.end - 1, x.end - x.start, 0, 0, 0.0) for x in ranges]

    spark.copy = copy  # type: ignore[method-assign]
    stop = threading.Event()
    spark.during = [stop.set]
    deadline = threading.Timer(20, stop.set)  # a flow that never follows would copy in rounds until stopped
    deadline.start()
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        deadline.cancel()
        control.close()
    assert [[(x.partition, x.start, x.end) for x in job] for job in rounds] == [[(0, 0, 10), (1, 0, 10)]]
    assert len(spark.jobs) == 1 and spark.specs[0].control is not None  # then one generation that follows
    assert [(x.partition, x.start, x.end) for x in spark.jobs[0]] == [(0, 10, FOLLOW_END), (1, 10, FOLLOW_END)]
    said = [m for m in caplog.messages if "copies in rounds" in m or "follow their partitions" in m]
    assert len(said) == 2 and "copies in rounds" in said[0] and "6 Spark task slots now" in said[1], said


@pytest.mark.parametrize(
    ("extra", "slots", "flows", "tasks"),
    [
        ("", 2, 1, 1),  # MM2's default tasks.max
        ("tasks.max = 2\n", 2, 1, 2),
        ("dc1->target.tasks.max = 8\n", 2, 1, 2),  # no more than the task slots the flow gets
        ("tasks.max = 8\n", 6, 3, 2),
    ],
)
def test_following_tasks_are_at_most_tasks_max_within_the_flow_s_task_slots(
    recorded: list[Positions],  # noqa: F811 (the fixture)
    extra: str,
    slots: int,
    flows: int,
    tasks: int,
) -> None:
    """MM2 runs at most ``tasks.max`` tasks of a connector (default 1); so do a flow's following tasks, which
    would otherwise take every task slot the flow gets, each task's round trips paid for a share of its records."""
    source = two_partitions({0: 10, 1: 10})
    spark = FollowingSpark(source, slots, flows)
    r, _spark, control = following(source, extra)
    r.rounds.spark = spark  # type: ignore[assignment]
    stop = threading.Event()
    spark.during = [stop.set]
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        control.close()
    assert spark.tasks == [tasks]


def test_a_job_with_an_end_takes_every_task_slot_whatever_tasks_max_says(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    """A ``--once`` job (or a round) ends, and frees its slots: it ends soonest on all of them."""
    source = FakeSource({("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 20, ("orders", 1): 20})
    spark = FakeSpark()
    r = runner(source, spark, extra="tasks.max = 1\n")
    r.rounds.place({})
    r.run_once(InstantStop())
    assert spark.tasks == [spark.parallelism]


def test_follow_ranges_start_every_placed_partition_and_rounds_take_only_what_is_listed() -> None:
    positions = {("a", 0): 20, ("a", 1): 7}
    remote = {"a": "dc1.a"}
    assert [
        (r.partition, r.start, r.end) for r in follow_ranges([("a", 0), ("a", 1), ("a", 2)], positions, remote)
    ] == [
        (0, 20, FOLLOW_END),
        (1, 7, FOLLOW_END),
    ]
    ends = {("a", 0): 50, ("a", 1): 7, ("a", 2): -1}
    assert [(r.partition, r.start, r.end) for r in round_ranges(ends, positions, remote, 10)] == [(0, 20, 30)]


def test_the_next_periodic_job_is_known() -> None:
    now = [100.0]
    jobs = [Periodic("a", 60, lambda: None, first_after_s=0), Periodic("b", 5, lambda: None, first_after_s=0)]
    jobs[0].due, jobs[1].due = 160.0, 104.5
    schedule = Schedule(jobs, clock=lambda: now[0])
    assert schedule.seconds_until_due() == 4.5
    now[0] = 200.0
    assert schedule.seconds_until_due() == 0.0
    assert Schedule([]).seconds_until_due() == float("inf")


@pytest.mark.parametrize(
    ("master", "flows", "cpus", "expected"),
    [
        ("local[*]", 3, 2, "local[3,4]"),  # a task slot per flow: following tasks of every flow run at once
        ("local[*]", 1, 2, "local[*,4]"),
        ("local[2]", 3, 2, "local[2,4]"),  # the user's own count stays; those flows copy in rounds
        ("local", 1, 2, "local[1,4]"),
        ("spark://h:7077", 3, 2, "spark://h:7077"),
    ],
)
def test_local_star_gets_a_task_slot_per_flow(
    monkeypatch: pytest.MonkeyPatch, master: str, flows: int, cpus: int, expected: str
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cpus)
    assert effective_master(master, flows) == expected


def test_a_following_task_that_fails_as_a_whole_marks_every_row_of_its_last_report() -> None:
    """A fenced transaction fails the task, not one partition: every row says so, so the driver ends the
    generation instead of waiting for the other tasks, which would follow on for ever."""
    from mm2py.errors import Failure
    from mm2py.executor.batch_copy import with_task_failure

    own = {"message": "partition 1 failed", "retriable": True}
    rows = [report_row("orders", 0, 10, 0, 0, 10, None), report_row("orders", 1, 5, 0, 0, 9, None, own)]
    fenced = Failure("fenced: another producer took transactional.id x over", "PRODUCER_FENCED", retriable=False)
    marked = with_task_failure(rows, fenced)
    assert marked[0]["failure"] == {"message": fenced.message, "retriable": False}
    assert marked[1]["failure"] == own
    assert with_task_failure(rows, None) == rows


def test_a_round_makes_no_range_for_a_partition_not_placed_yet() -> None:
    """Without a position it is not known where a partition resumes: taking its end would skip its records."""
    from mm2py.engine.ranges import round_ranges

    ranges = round_ranges({("orders", 0): 50, ("orders", 1): 30}, {("orders", 0): 10}, {"orders": "dc1.orders"}, 100)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 10, 50)]


@pytest.mark.parametrize(
    ("extra", "follows", "slots"),
    [
        ("", True, 1),  # MM2's default tasks.max: one following task, one transactional id
        ("tasks.max = 8\n", True, 2),  # no more than the task slots the flow gets
        ("tasks.max = 1\n", False, 2),  # a job with an end takes every slot, so as many ids
    ],
)
def test_exactly_once_fences_one_transactional_id_per_task_the_flow_may_run(
    recorded: list[Positions],  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
    extra: str,
    follows: bool,
    slots: int,
) -> None:
    """Exactly-once continuous flows have as many slots (transactional ids) as following tasks, so MM2 taking the
    flow back with the same file fences every id a continuous run used; ``--once`` and rounds use every slot."""
    source = two_partitions({0: 10, 1: 10})
    r, spark, control = following(source, "target.exactly.once.source.support = enabled\n" + extra)
    control.close()
    if not follows:
        r.control = None
    spark.exactly_once_slots = spark.parallelism  # type: ignore[attr-defined]
    r.rounds.spark = spark  # type: ignore[assignment]
    fenced: list[tuple[int, int]] = []

    def fence(*args: object, tasks_max: int) -> None:
        fenced.append((int(args[-1]), tasks_max))  # type: ignore[call-overload]

    monkeypatch.setattr(engine_driver, "fence", fence)
    monkeypatch.setattr(engine_driver, "target_connection", lambda *args: None)
    monkeypatch.setattr(engine_driver, "SlotEpochs", lambda *args: "epochs")
    monkeypatch.setattr(engine_driver, "InitializedIds", lambda *args: "ids")
    r._fence_earlier_transactions()
    assert fenced == [(slots, r.flow.tasks_max)]
    assert r.spec.exactly_once_slots == slots

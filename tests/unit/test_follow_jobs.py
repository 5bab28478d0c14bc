"""Continuous mode on the batch path, driver side: which jobs follow their partitions, for how long, over which
ranges, and how the lag uses what the tasks saw. Fake Spark and source as in test_engine_driver; no JVM."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from test_engine_driver import FakeSource, InstantStop, recorded, runner  # noqa: F401 (recorded: a fixture)

from mm2py.engine.ranges import follow_ranges, round_ranges
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.engine.spark import effective_master
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange

Positions = Mapping[tuple[str, int], int]


class FollowingSpark:
    """A Spark runner whose tasks follow: each copies its partition up to the source's end *during* the job
    (``grow``: records written meanwhile), and reports an end that moved on again after its last fetch."""

    def __init__(self, source: FakeSource, slots: int = 2, flows: int = 1) -> None:
        self.source = source
        self.parallelism = slots
        self.flows = flows
        self.specs: list[CopySpec] = []
        self.jobs: list[list[PartitionRange]] = []
        self.grow: dict[tuple[str, int], int] = {}
        self.after_last_fetch = 0
        self.stop: InstantStop | None = None

    @property
    def follow_tasks(self) -> int:
        return self.parallelism // self.flows

    def copy(self, spec: CopySpec, ranges: list[PartitionRange]) -> list[CopyResult]:
        self.specs.append(spec)
        self.jobs.append(ranges)
        for tp, n in self.grow.items():
            self.source.latest[tp] += n
        results = []
        for r in ranges:
            end = min(self.source.latest[(r.topic, r.partition)], r.end)
            results.append(
                CopyResult(
                    r.topic, r.partition, r.start, end, end - 1, end - r.start, 0, 0, 0.0,
                    source_end=self.source.latest[(r.topic, r.partition)] + self.after_last_fetch,
                )
            )  # fmt: skip
        if self.stop is not None:
            self.stop.set()
        return results


def two_partitions(latest: dict[int, int]) -> FakeSource:
    return FakeSource({("orders", p): 0 for p in latest}, {("orders", p): n for p, n in latest.items()})


def test_a_following_job_takes_every_partition_caught_up_or_not_and_the_lag_from_the_tasks_ends(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 30, 1: 0})
    spark = FollowingSpark(source)
    r = runner(source, spark)  # type: ignore[arg-type]
    r.rounds.place({})
    assert r.rounds.follow_seconds() == 10.0  # mm2py.continuous.follow.ms's default
    spark.grow = {("orders", 1): 5}  # five records written to the empty partition while the job follows it
    spark.after_last_fetch = 3
    assert r.rounds.copy_round(r.rounds.end_offsets(), follow_s=10.0) == 2
    assert spark.specs[0].follow_s == 10.0
    # batch.max.records (100 here) caps each range; the empty partition is followed too
    assert [(x.partition, x.start, x.end) for x in spark.jobs[0]] == [(0, 0, 100), (1, 0, 100)]
    assert r.rounds.positions == {("orders", 0): 30, ("orders", 1): 5}
    assert r.rounds.ends == {("orders", 0): 33, ("orders", 1): 8} and r.stats.lag == 6


def test_continuous_jobs_follow_until_the_next_periodic_job_is_due(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    source = two_partitions({0: 10, 1: 10})
    spark = FollowingSpark(source)
    r = runner(source, spark, extra="emit.checkpoints.interval.seconds = 3\n")  # type: ignore[arg-type]
    r.rounds.place({})
    spark.stop = InstantStop()
    r.run_continuous(spark.stop, InstantStop())
    assert len(spark.specs) == 1 and 1.0 <= spark.specs[0].follow_s <= 3.0


@pytest.mark.parametrize(
    ("extra", "slots", "flows"),
    [
        ("mm2py.continuous.follow.ms = 0\n", 2, 1),
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
    assert r.rounds.follow_seconds() == 0.0


def test_follow_ranges_cap_every_known_partition_and_rounds_take_only_what_is_listed() -> None:
    ends = {("a", 0): 50, ("a", 1): 7, ("a", 2): -1}
    positions = {("a", 0): 20, ("a", 1): 7, ("a", 2): 3}
    remote = {"a": "dc1.a"}
    assert [(r.partition, r.start, r.end) for r in follow_ranges(ends, positions, remote, 10)] == [
        (0, 20, 30),
        (1, 7, 17),
    ]
    assert [(r.partition, r.start, r.end) for r in round_ranges(ends, positions, remote, 10)] == [(0, 20, 30)]
    assert {r.remote_topic for r in follow_ranges(ends, positions, remote, 10)} == {"dc1.a"}


def test_the_next_periodic_job_bounds_how_long_a_job_follows() -> None:
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

"""``mm2py.throughput.max.bytes.per.second``: read per flow or for every flow, split between a job's tasks in
proportion to their partitions, and held by each task's token bucket (executor/throttle.py); the run's metrics
count what the tasks waited. The copy paths under a limit: tests/integration/test_throughput_limit.py."""

from __future__ import annotations

import dataclasses

import pytest

from mm2py.config import MirrorMakerConfig, validate
from mm2py.config.flow import build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.engine.spec import copy_spec
from mm2py.executor.contract import CopyPath
from mm2py.executor.throttle import Throttle
from mm2py.metrics.measurement import PartitionMeasurement
from mm2py.metrics.registry import RunMetrics

BASE = """\
clusters = dc1, dc2, target
dc1.bootstrap.servers = localhost:1
dc2.bootstrap.servers = localhost:2
target.bootstrap.servers = localhost:3
dc1->target.enabled = true
dc2->target.enabled = true
topics = orders
"""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def config(extra: str) -> MirrorMakerConfig:
    return MirrorMakerConfig(parse_properties(BASE + extra, "mm2.properties"), {})


def test_the_limit_is_read_for_every_flow_and_per_flow_the_flow_s_value_winning() -> None:
    mm = config(
        "mm2py.throughput.max.bytes.per.second = 4000000\ndc2->target.mm2py.throughput.max.bytes.per.second = 1000\n"
    )
    dc1, dc2 = (build_flow_config(mm, Flow(source, "target")) for source in ("dc1", "dc2"))
    assert (dc1.throughput_max_bytes_per_second, dc2.throughput_max_bytes_per_second) == (4_000_000, 1000)
    assert copy_spec(dc2, CopyPath("batch")).throughput_bytes_per_s == 1000
    assert build_flow_config(config(""), Flow("dc1", "target")).throughput_max_bytes_per_second == 0
    assert validate(mm) == []


@pytest.mark.parametrize("value", ["-1", "10MB", "1.5"])
def test_a_limit_that_is_not_a_whole_number_of_bytes_is_one_error_naming_the_line(value: str) -> None:
    problems = validate(config(f"dc1->target.mm2py.throughput.max.bytes.per.second = {value}\n"))
    assert [(p.severity, p.key, p.line) for p in problems] == [
        ("error", "dc1->target.mm2py.throughput.max.bytes.per.second", 8)
    ]


def test_a_job_s_tasks_share_the_limit_in_proportion_to_their_partitions() -> None:
    flow = build_flow_config(config("mm2py.throughput.max.bytes.per.second = 1200\n"), Flow("dc1", "target"))
    spec = dataclasses.replace(copy_spec(flow, CopyPath("batch")), job_ranges=12)
    assert [spec.task_throughput(n) for n in (1, 3, 8, 12)] == [100, 300, 800, 1200]
    assert sum(spec.task_throughput(n) for n in (5, 4, 3)) == 1200
    unlimited = dataclasses.replace(spec, throughput_bytes_per_s=0)
    assert unlimited.task_throughput(3) == 0 and not Throttle(unlimited.task_throughput(3)).limited


def test_a_new_task_copies_at_the_rate_from_its_first_bytes() -> None:
    clock = Clock()
    throttle = Throttle(1000, clock=clock)
    assert throttle.hold(600, sleep=clock.sleep) == pytest.approx(0.6)  # the bucket starts empty: no burst
    assert throttle.hold(900, sleep=clock.sleep) == pytest.approx(0.9)
    for _ in range(20):
        throttle.hold(250, sleep=clock.sleep)
    assert clock.now - 100 == pytest.approx(6.5)  # 6,500 bytes at 1,000/s
    assert throttle.waited_s == pytest.approx(6.5)


def test_an_idle_task_saves_no_more_than_one_second_of_the_rate() -> None:
    clock = Clock()
    throttle = Throttle(1000, clock=clock)
    clock.sleep(60)  # idle for a minute
    assert throttle.hold(600, sleep=clock.sleep) == 0
    assert throttle.hold(400, sleep=clock.sleep) == 0  # one second's worth at once, no more
    assert throttle.hold(1000, sleep=clock.sleep) == pytest.approx(1.0)
    assert Throttle(0, clock=clock).hold(10**12, sleep=clock.sleep) == 0


def test_the_metrics_show_a_flow_s_limit_and_what_its_tasks_waited() -> None:
    metrics = RunMetrics(clock=lambda: 1000.0)
    metrics.set_throughput_limit("dc1", "target", 5_000_000)
    metrics.set_throughput_limit("dc2", "target", 0)
    metrics.record_copy(
        [
            PartitionMeasurement("dc1", "target", "orders", "dc1.orders", p, 10, 100, throttled_ms=750.0)
            for p in range(2)
        ]
    )
    text = metrics.text()
    assert 'mm2py_throughput_limit_bytes_per_second{source="dc1",target="target"} 5e+06' in text
    assert 'mm2py_throttled_seconds_total{source="dc1",target="target"} 1.5' in text
    assert 'source="dc2"' not in text.split("mm2py_throughput_limit_bytes_per_second", 1)[1]


def test_a_limited_task_fetches_a_tenth_of_a_second_of_its_rate_per_partition() -> None:
    usual = 4 * 1024 * 1024
    assert Throttle(0).fetch_bytes(usual) == usual
    assert Throttle(5_000_000).fetch_bytes(usual) == 500_000
    assert Throttle(1000).fetch_bytes(usual) == 64 * 1024  # never so small that a fetch brings next to nothing
    assert Throttle(10**9).fetch_bytes(usual) == usual

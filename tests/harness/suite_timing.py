"""Where the suite's time goes: per test, set-up, waiting and checks, written when ``MM2PY_SUITE_TIMING`` names a
directory (``make durations`` sets it), and summed per tier by ``python -m tests.harness.suite_timing DIR``.

Why: a suite that takes too long is cut where its time goes, and that is only known when it is measured. Each test's
wall time (pytest's set-up, call and teardown phases) is split into buckets by wrapping the harness calls that
start things or wait, on the test's own thread only:

- set-up: pytest's set-up and teardown phases (fixtures: clusters, Spark, MM2), and inside the test body, brokers,
  clusters, MM2 and Spark clusters started or stopped, the start-up of each ``mm2py`` process (interpreter,
  imports and SparkContext, reported by ``tests/harness/timed_mm2py.py``) and each SparkContext an in-process
  run starts (tests/harness/in_process.py); ``data`` is test records produced;
- waiting: ``poll_until``, bare ``time.sleep`` and the rest of each ``mm2py`` command (the copy itself);
- checks: the rest of the test body (reading back and comparing, assertions, admin calls).

A wrapped call inside another counts for its own bucket, the outer one for the rest. With the variable unset
nothing is wrapped.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "MM2PY_SUITE_TIMING"
MM2PY_TIMING_ENV = "MM2PY_TEST_PROCESS_TIMING"  # where a timed mm2py process writes its start-up split

# (module, attribute path, bucket): what is wrapped. Buckets under "setup." and "waiting." sum to those.
_WRAPPED = (
    ("tests.harness.real_kafka", "KafkaCluster.start", "setup.kafka"),
    ("tests.harness.real_kafka", "KafkaCluster.stop", "setup.kafka"),
    ("tests.harness.real_kafka", "KafkaCluster.restart_node", "setup.kafka"),
    ("tests.harness.real_kafka", "KafkaCluster.stop_node", "setup.kafka"),
    ("tests.harness.kafka_harness", "TansuBroker.start", "setup.tansu"),
    ("tests.harness.kafka_harness", "TansuBroker.stop", "setup.tansu"),
    ("tests.harness.kafka_harness", "TansuBroker.kill", "setup.tansu"),
    ("tests.harness.mirror_maker", "MirrorMaker.start", "setup.mm2"),
    ("tests.harness.mirror_maker", "MirrorMaker.stop", "setup.mm2"),
    ("tests.harness.spark_cluster", "StandaloneCluster.start", "setup.spark-cluster"),
    ("tests.harness.spark_cluster", "StandaloneCluster.stop", "setup.spark-cluster"),
    ("tests.harness.kafka_harness", "produce", "setup.data"),
    ("tests.harness.polling", "poll_until", "waiting.poll"),
    ("tests.harness.mm2py_cli", "mm2py", "waiting.mm2py"),
    ("tests.harness.in_process", "_start_own_context", "setup.spark"),
)


class _Clock:
    """Time per bucket of the test thread's call phase. A wrapped call inside another counts for its own bucket,
    and only the rest of the outer call for the outer one (poll_until around a produce: data, then waiting)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.active = False
        self.inner: list[float] = []  # per open wrapped call: seconds its wrapped callees took
        self.buckets: dict[str, float] = defaultdict(float)

    def timed(self, bucket: str, fn: Callable[..., Any], *, outermost_only: bool = False) -> Callable[..., Any]:
        """``fn`` timed into ``bucket``; with ``outermost_only`` only where no other wrapped call is open (a
        bare sleep, not poll_until's)."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.active or threading.get_ident() != self.thread or (outermost_only and self.inner):
                return fn(*args, **kwargs)
            self.inner.append(0.0)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                self.buckets[bucket] += took - self.inner.pop()
                if self.inner:
                    self.inner[-1] += took

        return wrapper


def _install(clock: _Clock) -> None:
    import importlib

    for module_name, path, bucket in _WRAPPED:
        module = importlib.import_module(module_name)
        owner_name, _, attribute = path.rpartition(".")
        owner: Any = getattr(module, owner_name) if owner_name else module
        setattr(owner, attribute, clock.timed(bucket, getattr(owner, attribute)))
        if not owner_name:  # a function: also where other modules imported it by name
            for other in list(sys.modules.values()):
                if (
                    getattr(other, "__name__", "").startswith("tests.")
                    and getattr(other, attribute, None) is getattr(module, attribute).__wrapped__
                ):
                    setattr(other, attribute, getattr(module, attribute))
    time.sleep = clock.timed("waiting.sleep", time.sleep, outermost_only=True)  # type: ignore[assignment]


class SuiteTiming:
    """The plugin: one JSON line per test into ``DIR/<worker>.jsonl``."""

    def __init__(self, directory: Path) -> None:
        self.clock = _Clock()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        directory.mkdir(parents=True, exist_ok=True)
        self.out = (directory / f"{worker}.jsonl").open("a")
        self.process_dir = directory / "processes" / worker
        self.process_dir.mkdir(parents=True, exist_ok=True)
        os.environ[MM2PY_TIMING_ENV] = str(self.process_dir)
        self.phases: dict[str, float] = {}
        self.buckets: dict[str, float] = {}
        _install(self.clock)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        for stale in self.process_dir.glob("*.json"):
            stale.unlink()
        self.clock.buckets.clear()
        self.clock.active = True
        try:
            return (yield)
        finally:
            self.clock.active = False
            self.buckets = dict(self.clock.buckets)
            startup = sum(json.loads(p.read_text()).get("startup", 0.0) for p in self.process_dir.glob("*.json"))
            # An mm2py process's start-up is set-up, the rest of it waiting: its start-up comes out of the wait
            # that covered it (mm2py() for --once, poll_until for a continuous run started with Popen).
            left = startup
            for bucket in ("waiting.mm2py", "waiting.poll"):
                take = min(left, self.buckets.get(bucket, 0.0))
                self.buckets[bucket] = self.buckets.get(bucket, 0.0) - take
                left -= take
            if startup:
                self.buckets["setup.mm2py-startup"] = startup

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self.phases = {}
        self.buckets = {}
        result = yield
        call = self.phases.get("call", 0.0)
        row = {
            "nodeid": item.nodeid,
            "tier": tier_of(item.nodeid),
            "setup_phase": self.phases.get("setup", 0.0),
            "call": call,
            "teardown_phase": self.phases.get("teardown", 0.0),
            "buckets": self.buckets,
            "checks": max(0.0, call - sum(self.buckets.values())),
        }
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        return result

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.phases[report.when] = report.duration


def tier_of(nodeid: str) -> str:
    if nodeid.startswith("tests/unit/"):
        return "unit"
    if nodeid.startswith("tests/realkafka/test_broker_failures"):
        return "realkafka-faults"
    if nodeid.startswith("tests/realkafka/"):
        return "realkafka"
    return "integration"


def register(config: pytest.Config) -> None:
    """Time this session if asked to, and if it is the suite's own (not an inner session a test starts)."""
    directory = os.environ.get(ENV)
    if directory and config.rootpath == Path(__file__).resolve().parents[2]:
        config.pluginmanager.register(SuiteTiming(Path(directory)), "suite-timing")


def _rows(directory: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            yield json.loads(line)


def summarize(directory: Path) -> dict[str, dict[str, float]]:
    """Per tier: tests, wall seconds (the three phases), and the set-up, waiting and checks split."""
    tiers: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in _rows(directory):
        tier = tiers[row["tier"]]
        tier["tests"] += 1
        tier["wall"] += row["setup_phase"] + row["call"] + row["teardown_phase"]
        tier["setup.fixtures"] += row["setup_phase"] + row["teardown_phase"]
        for bucket, seconds in row["buckets"].items():
            tier[bucket] += seconds
        tier["checks"] += row["checks"]
    return {name: dict(values) for name, values in sorted(tiers.items())}


def durations(directory: Path) -> dict[str, float]:
    """Each test's wall seconds, for tests/durations.json (how tests/conftest.py orders the workers' units)."""
    rows = {row["nodeid"]: row["setup_phase"] + row["call"] + row["teardown_phase"] for row in _rows(directory)}
    return {nodeid: round(seconds, 2) for nodeid, seconds in sorted(rows.items())}


def main(argv: list[str]) -> int:
    """``DIR``: the split per tier; ``DIR --durations FILE``: also each test's duration into FILE."""
    directory = Path(argv[0])
    if argv[1:2] == ["--durations"]:
        Path(argv[2]).write_text(json.dumps(durations(directory), indent=0) + "\n")
    summary = summarize(directory)
    for tier, values in summary.items():
        setup = sum(v for k, v in values.items() if k.startswith("setup."))
        waiting = sum(v for k, v in values.items() if k.startswith("waiting."))
        print(
            f"{tier:18} tests={int(values['tests']):5} wall={values['wall']:8.1f}s setup={setup:7.1f}s "
            f"waiting={waiting:7.1f}s checks={values['checks']:7.1f}s"
        )
        for bucket in sorted(k for k in values if "." in k):
            print(f"    {bucket:24} {values[bucket]:8.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""``make test``'s workers take whole test modules: a module's fixtures (its SparkContext, the broker-fault
clusters) start in one worker, and no more than two of the modules that load the whole machine run at once.

Why a test: pytest-xdist's ``--dist loadgroup`` stopped grouping anything under pytest 9.2 (it renames
``item._nodeid``, which pytest no longer reads), silently, and every module was split over the workers. This runs
the Makefile's own pytest flags on three small modules and reads which worker ran each test.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.harness.scheduling import HEAVY_AT_ONCE, HEAVY_MODULES, HeavyModulesApart, holds_heavy, next_module

ROOT = Path(__file__).resolve().parents[2]

_MODULE = """
import json, os

def _record(name):
    with open(os.environ["SCHEDULING_LOG"], "a") as log:
        log.write(json.dumps([__name__, name, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")

{tests}
"""


def _makefile_flags() -> list[str]:
    """The flags of ``PYTEST_N``, what ``make test`` runs the suite with."""
    line = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if ln.startswith("PYTEST_N :="))
    flags = line.split(":=", 1)[1].split()
    assert re.fullmatch(r"\$\(BIN\)/pytest", flags[0]), line
    return flags[1:]


def test_each_module_runs_whole_in_one_worker(tmp_path: Path) -> None:
    for module in ("alpha", "beta", "gamma"):
        tests = "\n".join(f"def test_{i}():\n    _record({i})\n" for i in range(4))
        (tmp_path / f"test_{module}.py").write_text(_MODULE.format(tests=tests))
    log = tmp_path / "scheduling.jsonl"
    env = {**os.environ, "SCHEDULING_LOG": str(log)}
    argv = [sys.executable, "-m", "pytest", *_makefile_flags(), "-q", "-p", "no:cacheprovider", str(tmp_path)]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr

    workers: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        module, _, worker = json.loads(line)
        workers[module].add(worker)
    assert sorted(workers) == ["test_alpha", "test_beta", "test_gamma"]
    assert all(len(ran_in) == 1 for ran_in in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) > 1, f"one worker ran everything: {dict(workers)}"


# --- The scheduler itself (tests/harness/scheduling.py), driven as pytest-xdist's controller drives it ----------

HEAVY = sorted(HEAVY_MODULES)


class _Worker:
    """What the scheduler asks of a worker: run these tests, shut down when done."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.shutting_down = False
        self.queue: list[int] = []
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


class _Config:
    option = SimpleNamespace(loadscopereorder=False)

    def getvalue(self, name: str) -> list[str]:
        assert name == "tx"
        return ["3*popen"]


def _heavy_running(scheduler: HeavyModulesApart) -> int:
    """Workers holding a heavy module (each runs one module at a time)."""
    return sum(holds_heavy(work) for work in scheduler.assigned_work.values())


@pytest.mark.parametrize("seed", range(20))
def test_three_workers_never_run_more_than_two_heavy_modules_at_once_and_run_every_test_once(seed: int) -> None:
    # The heavy modules first, as the durations order them, then light ones, each of a few tests.
    modules = [*HEAVY, *(f"tests/integration/test_light_{i}.py" for i in range(8))]
    collection = [f"{module}::test_{i}" for module in modules for i in range(3)]
    scheduler = HeavyModulesApart(_Config())  # type: ignore[arg-type]
    workers = [_Worker(f"gw{i}") for i in range(3)]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]
        scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    assert sum(1 for w in workers for i in w.queue if collection[i].split("::")[0] in HEAVY_MODULES) == 2 * 3

    rng = random.Random(seed)
    ran: list[str] = []
    most_heavy = 0
    while any(w.queue for w in workers):
        worker = rng.choice([w for w in workers if w.queue])  # the next test to end, on any busy worker
        index = worker.queue.pop(0)
        ran.append(collection[index])
        scheduler.mark_test_complete(worker, index)  # type: ignore[arg-type]
        most_heavy = max(most_heavy, _heavy_running(scheduler))
        assert _heavy_running(scheduler) <= HEAVY_AT_ONCE
    assert sorted(ran) == sorted(collection)
    assert most_heavy == HEAVY_AT_ONCE  # two did run side by side: the limit is not one
    assert all(w.shutting_down for w in workers)
    assert scheduler.tests_finished


def test_a_free_worker_takes_the_first_light_module_while_two_heavy_ones_run() -> None:
    waiting = [HEAVY[0], "tests/unit/test_a.py", HEAVY[1], "tests/unit/test_b.py"]
    assert next_module(waiting, heavy_elsewhere=0) == HEAVY[0]
    assert next_module(waiting, heavy_elsewhere=1) == HEAVY[0]
    assert next_module(waiting, heavy_elsewhere=2) == "tests/unit/test_a.py"
    assert next_module([HEAVY[0], HEAVY[1]], heavy_elsewhere=2) is None

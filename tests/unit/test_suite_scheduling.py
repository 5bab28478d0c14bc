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

from tests.harness.scheduling import (
    HEAVY_AT_ONCE,
    HEAVY_MODULES,
    HeavyModulesApart,
    cluster_needs,
    holds_heavy,
    next_module,
    read_needs,
    write_needs,
)

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

    def __init__(self) -> None:
        self.stash = pytest.Stash()

    def getvalue(self, name: str) -> list[str]:
        assert name == "tx"
        return ["3*popen"]


def _scheduled(
    collection: list[str], needs: dict[str, list[str]] | None = None
) -> tuple[HeavyModulesApart, list[_Worker]]:
    """Three workers that collected ``collection``, after the scheduler's first hand-out (``needs`` known, as
    the controller reads them from the first worker's file)."""
    scheduler = HeavyModulesApart(_Config())  # type: ignore[arg-type]
    if needs is not None:
        scheduler.needs = needs
    workers = [_Worker(f"gw{i}") for i in range(3)]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]
        scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    return scheduler, workers


def _heavy_running(scheduler: HeavyModulesApart) -> int:
    """Workers holding a heavy module (each runs one module at a time)."""
    return sum(holds_heavy(work) for work in scheduler.assigned_work.values())


@pytest.mark.parametrize("seed", range(20))
def test_three_workers_never_run_more_than_two_heavy_modules_at_once_and_run_every_test_once(seed: int) -> None:
    # The heavy modules first, as the durations order them, then light ones, each of a few tests.
    modules = [*HEAVY, *(f"tests/integration/test_light_{i}.py" for i in range(8))]
    collection = [f"{module}::test_{i}" for module in modules for i in range(3)]
    scheduler, workers = _scheduled(collection)
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


def test_a_worker_takes_first_what_needs_no_session_cluster_it_has_not_started() -> None:
    needs = {"a.py": ["real_kafka"], "b.py": [], "c.py": ["real_kafka", "real_kafka_acl"], "d.py": ["real_kafka"]}
    waiting = ["a.py", "b.py", "c.py", "d.py"]
    assert next_module(waiting, 0, frozenset(), needs) == "b.py"  # a.py would start real_kafka in this worker
    assert next_module(waiting, 0, frozenset({"real_kafka"}), needs) == "a.py"
    assert next_module(["c.py", "d.py"], 0, frozenset({"real_kafka"}), needs) == "d.py"
    # nothing fits: the first, and the worker starts what it needs
    assert next_module(["c.py", "a.py"], 0, frozenset(), needs) == "c.py"
    # a module not in the needs (a file that did not come through) needs nothing
    assert next_module(["e.py", "a.py"], 0, frozenset(), needs) == "e.py"


def test_the_session_clusters_each_module_uses_go_from_a_worker_to_the_controller_whole(tmp_path: Path) -> None:
    needs = cluster_needs(
        [
            ("tests/realkafka/test_x.py::test_a", ["real_kafka", "tmp_path", "request"]),
            ("tests/realkafka/test_x.py::test_b[1]", ["real_kafka_versions", "real_kafka"]),
            ("tests/integration/test_y.py::test_c", ["tansu_bin", "unique_topic"]),
        ]
    )
    assert needs == {
        "tests/realkafka/test_x.py": ["real_kafka", "real_kafka_versions"],
        "tests/integration/test_y.py": [],
    }
    path = tmp_path / "needs.json"
    assert read_needs(path) == {} and read_needs(None) == {}
    write_needs(path, needs)
    assert read_needs(path) == needs
    assert [p.name for p in tmp_path.iterdir()] == ["needs.json"]


def test_with_the_needs_known_session_clusters_live_through_fewer_modules_and_each_module_runs_in_one_worker() -> None:
    light = [f"tests/integration/test_light_{i}.py" for i in range(6)]
    kafka = [f"tests/realkafka/test_kafka_{i}.py" for i in range(6)]
    modules = [*HEAVY, *kafka, *light]  # the Kafka modules listed before the light ones, as by duration
    collection = [f"{module}::test_{i}" for module in modules for i in range(2)]

    needs = {module: ["real_kafka"] for module in kafka}

    def real_kafka_lifetimes(known: dict[str, list[str]]) -> int:
        """Summed over the workers: how many modules each ran with its real_kafka started (it lives from the
        first module that asks for it to the worker's end)."""
        scheduler, workers = _scheduled(collection, known)
        ran: dict[str, list[str]] = defaultdict(list)
        while any(w.queue for w in workers):
            # the workers take turns ending a test
            worker = min((w for w in workers if w.queue), key=lambda w: len(ran[w.name]))
            index = worker.queue.pop(0)
            module = collection[index].split("::")[0]
            if module not in ran[worker.name]:
                ran[worker.name].append(module)
            scheduler.mark_test_complete(worker, index)  # type: ignore[arg-type]
        assert sorted(m for ms in ran.values() for m in ms) == sorted(modules)  # each in one worker, all of them
        first = {w: next((i for i, m in enumerate(ms) if needs.get(m)), len(ms)) for w, ms in ran.items()}
        return sum(len(ran[w]) - first[w] for w in ran)

    # Without the file, duration order alone (as pytest-xdist's loadfile): each worker starts real_kafka at once.
    assert real_kafka_lifetimes({}) >= len(kafka) + len(light) - 2
    assert real_kafka_lifetimes(needs) <= len(kafka) + 1


def test_every_heavy_module_named_exists() -> None:
    """A heavy module renamed or moved would silently run beside the others again."""
    assert [m for m in sorted(HEAVY_MODULES) if not (ROOT / m).is_file()] == []

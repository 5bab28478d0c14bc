"""``make test``'s workers take whole test modules: a module's fixtures (its SparkContext, the broker-fault
clusters) start in one worker, and two scenarios that need the machine to themselves never run at once.

Why a test: pytest-xdist's ``--dist loadgroup`` stopped grouping anything under pytest 9.2 (it renames
``item._nodeid``, which pytest no longer reads), silently, and every module was split over the workers. This runs
the Makefile's own pytest flags on three small modules and reads which worker ran each test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

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

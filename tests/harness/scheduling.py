"""How ``make test`` hands test modules to its pytest-xdist workers: whole modules, in the order the collection
lists them (longest first, ``tests/conftest.py``), never more than ``HEAVY_AT_ONCE`` of the modules that load the
whole machine at the same time, and each worker's session clusters started as late as the order allows.

Why: half of a test's time is waiting, so three workers on two cores finish sooner than two; but with three, the
heavy fault modules listed first ran side by side and starved each other (the executor-loss test's standalone Spark
cluster had no executor registered in time). Two heavy modules at once is what two workers always allowed; the
third worker takes light modules meanwhile. And a session cluster (``SESSION_CLUSTERS``) runs in each worker that
asked for it, idle most of the time, until that worker ends: taken in duration order, every worker started nearly
every one early. So a free worker takes, of the modules it may take, the first whose session clusters it has
already started, and the first of all only when none is left. docs/testing.md has the measurements.

The scheduler runs in pytest-xdist's controller, which collects nothing: it sees node ids, not markers or
fixtures. So the heavy modules are named here by path, and the first worker writes which session clusters each
module uses to a file the controller names (``NEEDS``, passed in the worker's ``workerinput``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

# Modules whose tests take most of both cores or must meet deadlines on them: six RF-3 nodes replicating under
# faults, brokers frozen past client timeouts, exactly-once runs killed under load, a standalone Spark cluster whose
# executors must register in time.
HEAVY_MODULES = frozenset(
    {
        "tests/realkafka/test_broker_failures.py",
        "tests/integration/test_stalls_and_crashes.py",
        "tests/realkafka/test_real_kafka_exactly_once_faults.py",
        "tests/realkafka/test_executor_loss.py",
    }
)
HEAVY_AT_ONCE = 2
# The session-scoped fixtures that start real Kafka nodes (tests/conftest.py) or a KDC, each kept by a worker until
# it ends.
SESSION_CLUSTERS = frozenset(
    {
        "real_kafka",
        "real_kafka_target",
        "real_kafka_acl",
        "real_kafka_cluster",
        "real_kafka_versions",
        "real_kafka_kerberos",
        "kerberos_realm",
    }
)
NEEDS = "mm2py_session_cluster_needs"  # the workerinput key naming the file
NEEDS_FILE = pytest.StashKey[Path]()  # the controller's name for it


def next_module(
    waiting: Iterable[str],
    heavy_elsewhere: int,
    started: frozenset[str] = frozenset(),
    needs: Mapping[str, Sequence[str]] | None = None,
    heavy: frozenset[str] = HEAVY_MODULES,
) -> str | None:
    """The module a worker that has ``started`` these session clusters takes next, while ``heavy_elsewhere``
    other workers hold a heavy module (running or queued there): of the modules it may take, the first whose
    session clusters (``needs``) it has all started, else the first. None if only heavy ones wait and no more may
    start. A worker runs one module at a time, so one holding two heavy modules runs them one after the other."""
    allowed = [m for m in waiting if m not in heavy or heavy_elsewhere < HEAVY_AT_ONCE]
    needs = needs or {}
    fitting = (m for m in allowed if started.issuperset(needs.get(m, ())))
    return next(fitting, allowed[0] if allowed else None)


def cluster_needs(nodeids_and_fixtures: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Module -> the session clusters its tests use, from each test's node id and fixture names."""
    needs: dict[str, set[str]] = {}
    for nodeid, fixtures in nodeids_and_fixtures:
        needs.setdefault(nodeid.split("::", 1)[0], set()).update(SESSION_CLUSTERS.intersection(fixtures))
    return {module: sorted(used) for module, used in needs.items()}


def write_needs(path: Path, needs: Mapping[str, Sequence[str]]) -> None:
    """Written whole or not at all: the controller reads it once every worker has collected."""
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text(json.dumps(needs))
    partial.replace(path)


def read_needs(path: Path | None) -> dict[str, list[str]]:
    """What ``write_needs`` wrote; nothing (every module needing nothing: duration order alone) without it."""
    if path is None or not path.is_file():
        return {}
    needs: dict[str, list[str]] = json.loads(path.read_text())
    return needs


def holds_heavy(work: Mapping[str, Mapping[str, bool]], heavy: frozenset[str] = HEAVY_MODULES) -> bool:
    """Whether a worker's assigned ``work`` (module -> test -> done) has a heavy module with a test still to run."""
    return any(module in heavy and not all(tests.values()) for module, tests in work.items())


class HeavyModulesApart(LoadFileScheduling):
    """pytest-xdist's ``loadfile`` (a module is one unit), with a unit chosen by :func:`next_module`. A worker that
    may take nothing now waits, and is served again whenever any worker finishes a test."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.needs: dict[str, list[str]] | None = None  # read at the first assignment, once all have collected
        self.started: dict[Any, frozenset[str]] = {}

    def _assign_work_unit(self, node: Any) -> None:
        if self.needs is None:
            self.needs = read_needs(self.config.stash.get(NEEDS_FILE, None))
        elsewhere = sum(holds_heavy(work) for other, work in self.assigned_work.items() if other is not node)
        started = self.started.get(node, frozenset())
        module = next_module(self.workqueue, elsewhere, started, self.needs)
        if module is None:
            return
        self.started[node] = started.union(self.needs.get(module, ()))
        work_unit = self.workqueue.pop(module)
        self.assigned_work.setdefault(node, {})[module] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(test) for test, done in work_unit.items() if not done])

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        for other in self.nodes:  # a waiting worker: work it may take now, or its shutdown once nothing is left
            if other is not node and not self._pending_of(self.assigned_work[other]):
                self._reschedule(other)

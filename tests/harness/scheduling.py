"""How ``make test`` hands test modules to its pytest-xdist workers: whole modules, in the order the collection
lists them (longest first, ``tests/conftest.py``), and never more than ``HEAVY_AT_ONCE`` of the modules that load
the whole machine at the same time.

Why: half of a test's time is waiting, so three workers on this 2-core machine finish sooner than two (1,193 s
against 1,570 s, docs/testing.md); but with three, the heavy fault modules listed first ran side by side, and the
executor-loss test's standalone Spark cluster had no executor registered within 120 s. Two heavy modules at once is
what two workers always allowed; the third worker takes the light modules meanwhile.

The scheduler runs in pytest-xdist's controller, which collects nothing: it sees node ids, not markers, so the
heavy modules are named here by path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


def next_module(waiting: Iterable[str], heavy_elsewhere: int, heavy: frozenset[str] = HEAVY_MODULES) -> str | None:
    """The first of ``waiting`` a worker may take while ``heavy_elsewhere`` other workers hold a heavy module
    (running or queued there); None if only heavy ones wait and no more may start. A worker runs one module at a
    time, so one holding two heavy modules runs them one after the other."""
    for module in waiting:
        if module not in heavy or heavy_elsewhere < HEAVY_AT_ONCE:
            return module
    return None


def holds_heavy(work: Mapping[str, Mapping[str, bool]], heavy: frozenset[str] = HEAVY_MODULES) -> bool:
    """Whether a worker's assigned ``work`` (module -> test -> done) has a heavy module with a test still to run."""
    return any(module in heavy and not all(tests.values()) for module, tests in work.items())


class HeavyModulesApart(LoadFileScheduling):
    """pytest-xdist's ``loadfile`` (a module is one unit), with a unit chosen by :func:`next_module`. A worker that
    may take nothing now waits, and is served again whenever any worker finishes a test."""

    def _assign_work_unit(self, node: Any) -> None:
        elsewhere = sum(holds_heavy(work) for other, work in self.assigned_work.items() if other is not node)
        module = next_module(self.workqueue, elsewhere)
        if module is None:
            return
        work_unit = self.workqueue.pop(module)
        self.assigned_work.setdefault(node, {})[module] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(test) for test, done in work_unit.items() if not done])

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        for other in self.nodes:  # a waiting worker: work it may take now, or its shutdown once nothing is left
            if other is not node and not self._pending_of(self.assigned_work[other]):
                self._reschedule(other)

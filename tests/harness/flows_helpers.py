"""One flow, ``dc1->target`` over the topic ``orders``, as the run tests (continuous, exactly-once, crashes
and stalls, bad input) drive it: its properties file, how much landed, and polling for a condition.

The brokers themselves come from the ``pair`` fixture in this directory's conftest.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mm2py.control.progress_store import read_progress
from tests.harness.kafka_harness import TansuBroker, end_offsets, read_all, records_in
from tests.harness.mm2py_cli import mm2py_argv, write_config

IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"


def config_for(tmp_path: Path, brokers: dict[str, TansuBroker], settings: str = "") -> Path:
    """``tmp_path/mm2.properties`` enabling ``dc1->target`` for ``orders``, plus the test's ``settings`` lines."""
    return write_config(
        tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = orders\n" + settings
    )


def start_run(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """A continuous ``mm2py run`` in its own process group (driver, JVM and Python workers), like a service,
    so a test can signal or kill the whole group; stdout and stderr go to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [*mm2py_argv(), "run", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def copied(target: TansuBroker, topic: str = "orders") -> int:
    """Records (and transaction markers) in ``topic`` on ``target``, duplicates included; 0 before it exists."""
    return records_in(target.bootstrap, topic)


def copied_past_progress(brokers: dict[str, TansuBroker], topic: str = "orders") -> int:
    """Records on the target that ``dc1->target``'s recorded progress does not cover yet: what a crash now may
    copy again (at-least-once), and so the bound on its duplicates. A target partition holds a prefix of its
    source partition, with repeats (the tests check that order separately), so its distinct values count the
    source offsets copied; the values must be unique, as the harness's ``make_records`` makes them. The remote
    topic has the source topic's name (IdentityReplicationPolicy).

    The progress is read first and the target's ends right after, both within milliseconds, and only records below
    those ends count: reading the whole target takes seconds under load, in which a killed task's retry may
    already have recorded progress past what its predecessor left unrecorded (which made the bound 0 once)."""
    target = brokers["target"].bootstrap
    progress = read_progress("target", {"bootstrap.servers": target}, "dc1")
    ends = end_offsets(target, topic)
    distinct: dict[int, set[bytes | None]] = {}
    for r in read_all(target, topic):
        if r.offset < ends.get(r.partition, 0):
            distinct.setdefault(r.partition, set()).add(r.value)
    return sum(max(0, len(values) - 1 - progress.get((topic, p), -1)) for p, values in distinct.items())


def recorded_progress(brokers: dict[str, TansuBroker], topic: str = "orders") -> int:
    """Source records ``dc1->target``'s recorded progress covers, summed over the partitions of ``topic``."""
    progress = read_progress("target", {"bootstrap.servers": brokers["target"].bootstrap}, "dc1")
    return sum(last + 1 for (t, _p), last in progress.items() if t == topic)

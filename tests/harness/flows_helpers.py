"""One flow, ``dc1->target`` over the topic ``orders``, as the run tests (continuous, exactly-once, crashes
and stalls, bad input) drive it: its properties file, how much landed, and polling for a condition.

The brokers themselves come from the ``pair`` fixture in this directory's conftest.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.harness.kafka_harness import TansuBroker, end_offsets
from tests.harness.mm2py_cli import write_config

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
            [sys.executable, "-m", "mm2py", "run", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def copied(target: TansuBroker, topic: str = "orders") -> int:
    """Records (and transaction markers) in ``topic`` on ``target``, duplicates included; 0 before it exists."""
    try:
        return sum(end_offsets(target.bootstrap, topic).values())
    except Exception:  # the remote topic may not exist yet
        return 0

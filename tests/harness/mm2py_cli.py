"""Running the real ``mm2py`` command from integration tests, and writing the properties files it reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.harness.kafka_harness import TansuBroker

# Settings every test file needs for one-node clusters (MM2 defaults to RF 2/3), tansu or real Kafka.
ONE_NODE_CLUSTER = """\
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
offset.storage.partitions = 5
mm2py.spark.master = local[2]
"""
SMALL_CLUSTER = (
    ONE_NODE_CLUSTER
    + """\
# tansu holds every JoinGroup for session.timeout.ms / 2 (test-broker bug), which each run's lease join pays.
mm2py.lease.session.timeout.ms = 3000
"""
)


def write_config(path: Path, brokers: dict[str, TansuBroker], body: str, clusters: list[str] | None = None) -> Path:
    aliases = clusters or list(brokers)
    lines = [f"clusters = {', '.join(aliases)}"]
    lines += [f"{alias}.bootstrap.servers = {brokers[alias].bootstrap}" for alias in aliases if alias in brokers]
    path.write_text("\n".join(lines) + "\n" + SMALL_CLUSTER + body)
    return path


def mm2py_argv(*args: str) -> list[str]:
    """The command line of a new ``mm2py`` process: ``python -m mm2py ARGS``; in a timed suite
    (tests/harness/suite_timing.py) through tests/harness/timed_mm2py.py, which reports its start-up."""
    entry = "tests.harness.timed_mm2py" if os.environ.get("MM2PY_TEST_PROCESS_TIMING") else "mm2py"
    return [sys.executable, "-m", entry, *args]


def mm2py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mm2py ARGS`` to completion; output captured as text."""
    return subprocess.run(mm2py_argv(*args), capture_output=True, text=True, timeout=timeout, check=False)

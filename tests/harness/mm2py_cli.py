"""Running the real ``mm2py`` command from integration tests, and writing the properties files it reads."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
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
mm2py.lease.session.timeout.ms = 2000
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


# Options that give a run Spark settings or an endpoint of its own, or keep it running: such a run gets a process.
_OWN_PROCESS_OPTIONS = {"--master", "--conf", "--deploy-mode", "--metrics-port"}


def runs_in_process(args: tuple[str, ...]) -> bool:
    """Whether ``mm2py ARGS`` proves the same in this process (tests/harness/in_process.py) as in a new one: any
    command but a continuous ``run`` or one with Spark settings or a metrics port given on the command line.
    ``MM2PY_TESTS_IN_PROCESS=0`` starts a process for every command (to compare, or to rule the harness out)."""
    if os.environ.get("MM2PY_TESTS_IN_PROCESS", "1") == "0" or _OWN_PROCESS_OPTIONS & set(args):
        return False
    return "run" not in args or "--once" in args


def mm2py(*args: str, timeout: float = 300, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``mm2py ARGS`` to completion, output captured as text, with ``env`` added to the environment: in this
    process where that proves the same (``runs_in_process``; pytest-timeout then bounds it), else as
    ``python -m mm2py ARGS`` within ``timeout`` s."""
    if runs_in_process(args):
        from tests.harness import in_process

        return in_process.run(list(args), env or {})
    environ = {**os.environ, **(env or {})}
    return subprocess.run(mm2py_argv(*args), capture_output=True, text=True, timeout=timeout, env=environ, check=False)

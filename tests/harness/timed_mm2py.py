"""``python -m tests.harness.timed_mm2py ARGS`` is ``python -m mm2py ARGS`` that also writes its start-up time.

Only a timed suite (``MM2PY_SUITE_TIMING``, tests/harness/suite_timing.py) starts mm2py this way. The start-up
is what the process spends before it can work: the interpreter and imports, and for ``run`` the SparkContext
too. It is written to ``$MM2PY_TEST_PROCESS_TIMING/<pid>.json`` as soon as it is known, so a process that is
killed later still reports it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _process_age() -> float:
    """Seconds since this process was created (Linux: its start time in clock ticks after boot)."""
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    return float(Path("/proc/uptime").read_text().split()[0]) - started


def _report() -> None:
    directory = os.environ.get("MM2PY_TEST_PROCESS_TIMING")
    if directory:
        (Path(directory) / f"{os.getpid()}.json").write_text(json.dumps({"startup": _process_age()}))


def main() -> None:
    if "run" in sys.argv[1:]:
        from mm2py.engine import spark

        start = spark.SparkRunner.start

        def start_and_report(*args: object, **kwargs: object) -> spark.SparkRunner:
            runner = start(*args, **kwargs)  # type: ignore[arg-type]
            _report()
            return runner

        spark.SparkRunner.start = start_and_report  # type: ignore[method-assign]
    from mm2py.cli.app import main as mm2py_main

    if "run" not in sys.argv[1:]:
        _report()
    mm2py_main(sys.argv[1:])


if __name__ == "__main__":
    main()

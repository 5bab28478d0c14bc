"""The one way tests wait: poll a condition until it holds, with a deadline, never a bare sleep.

A wait that also watches a process (a running ``mm2py``, a Spark master) fails at once when that process
exits, and every failure carries what the caller wants shown (a log tail), so a timed-out test says why.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
INTERVAL_S = 0.1


class ConditionNotMet(AssertionError):
    """The condition did not hold in time, or the watched process exited first."""


def poll_until(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    *,
    interval: float = INTERVAL_S,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> T:
    """The first truthy value of ``condition()``; ConditionNotMet naming ``what`` after ``timeout`` s, or as soon
    as ``process`` exits (``log``'s tail is added to either message)."""

    def tail() -> str:
        return "\n" + log.read_text(errors="replace")[-20_000:] if log is not None and log.exists() else ""

    deadline = time.monotonic() + timeout
    while True:
        if result := condition():
            return result
        if process is not None and process.poll() is not None:
            raise ConditionNotMet(f"{process.args!r} exited with {process.returncode} while waiting for {what}{tail()}")
        if time.monotonic() > deadline:
            raise ConditionNotMet(f"{what}: not true after {timeout} s{tail()}")
        time.sleep(interval)  # the poll interval of a condition with a deadline

"""The one way tests wait: poll a condition until it holds, with a deadline, never a bare sleep.

A wait that also watches a process (a running ``mm2py``, a Spark master) fails at once when that process
exits, and every failure carries what the caller wants shown (a log tail), so a timed-out test says why.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
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


class _Served(Protocol[T_co]):
    @property
    def done(self) -> bool: ...

    def result(self) -> T_co: ...


def answer_of(client: Any, pending: _Served[T], timeout: float, what: str = "an answer") -> T:
    """Serve the wire ``client`` (its ``poll``) until ``pending`` is answered, and return the answer (or the
    error it failed with); ConditionNotMet naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not pending.done:
        if time.monotonic() > deadline:
            raise ConditionNotMet(f"{what}: none after {timeout} s")
        client.poll(0.05)  # waits on the client's sockets: an answer ends it at once
    return pending.result()

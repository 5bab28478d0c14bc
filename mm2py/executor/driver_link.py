"""A following copy task's line to the driver (executor side): it reports what it copied every second and learns
whether to go on.

Why: in continuous mode a batch-path task follows its partitions for as long as the flow's assignment holds, so
the driver cannot wait for its result to show lag, rates and MM2's metrics, nor end a Spark job to stop it
gracefully (a cancelled task would not record its progress). The driver serves a small endpoint
(:mod:`mm2py.engine.task_control`); each task POSTs its rows there and the answer says whether this generation of
the flow still runs. A task that cannot reach its driver for ``DRIVER_GONE_S`` stops: a task without a driver
holds no lease, and must not keep copying beside the run that took the flow over.

A report travels in a thread of its own (:meth:`DriverLink.send`) while the task's copy loop goes on, as Connect
commits a source task's offsets from a thread of its own (``SourceTaskOffsetCommitter``), not from the task's poll
loop: the driver may take a while to answer (it lists the source's ends before it applies a position beyond the
last it saw, ``engine/report_bounds.py``), and a copy loop waiting for it would hold every record fetched meanwhile.

Standard library only (an HTTP client; executors never load an HTTP server).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from mm2py.executor.contract import FLOW_HEADER, TOKEN_HEADER, ControlEndpoint
from mm2py.metrics.measurement import PartitionMeasurement

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 1.0
# A report carries only the partitions with something new since their last row, and every tenth report all of
# them: the driver keeps what it last heard, and a row it did not apply (a position beyond the end it could
# confirm in time) or a report that never reached it is made good within ten seconds.
FULL_REPORT_EVERY = 10
DRIVER_GONE_S = 15.0  # above the lease's session timeout: by then another run may hold the flow
_TIMEOUT_S = 2.0
FAILURE_MESSAGE_CHARS = 1000  # the first line of an error and then some; the task's result carries it whole
# A measurement's fields are plain numbers and names, so a row copies them one by one: dataclasses.asdict walks and
# deep-copies every value, and a following task makes a row per partition every second.
_MEASUREMENT_FIELDS = tuple(f.name for f in fields(PartitionMeasurement))


def report_row(
    topic: str,
    partition: int,
    position: int,
    records: int,
    bytes_: int,
    source_end: int,
    measurement: PartitionMeasurement | None,
    failure: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One range's report: where it is (what counts as copied), what it copied since the last report."""
    return {
        "topic": topic,
        "partition": partition,
        "position": position,
        "records": records,
        "bytes": bytes_,
        "source_end": source_end,
        "measurement": (
            {name: getattr(measurement, name) for name in _MEASUREMENT_FIELDS} if measurement is not None else None
        ),
        "failure": _capped(failure),
    }


def _capped(failure: dict[str, Any] | None) -> dict[str, Any] | None:
    """A failure with its message cut to ``FAILURE_MESSAGE_CHARS``: the driver bounds a report by its rows."""
    if failure is None or len(str(failure.get("message", ""))) <= FAILURE_MESSAGE_CHARS:
        return failure
    return {**failure, "message": str(failure["message"])[:FAILURE_MESSAGE_CHARS] + "..."}


class DriverLink:
    """Reports of one task of one generation; ``report`` answers whether the task goes on."""

    def __init__(
        self, endpoint: ControlEndpoint, flow: str, task: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.endpoint = endpoint
        self.flow = flow
        self.task = task
        self.clock = clock
        self.last_heard = clock()
        self.reports = 0
        self.missed = False  # the last report did not reach the driver
        self._sending: _Report | None = None  # the report sent by send(), until its answer is taken

    @property
    def full_due(self) -> bool:
        """Whether the next report must carry every partition (the first, every ``FULL_REPORT_EVERY``-th, and the
        one after a report the driver did not answer)."""
        return self.missed or self.reports % FULL_REPORT_EVERY == 0

    @property
    def in_flight(self) -> bool:
        """Whether a report sent by :meth:`send` has not had its answer taken by :meth:`answer` yet."""
        return self._sending is not None

    def send(self, rows: list[dict[str, Any]]) -> None:
        """Report ``rows`` from a thread of its own; :meth:`answer` gives the answer once it came. One report at a
        time: the caller builds the next one only once this one is answered (so ``full_due`` knows if it missed)."""
        if self._sending is not None:
            raise RuntimeError("a report is still on its way; take its answer first")
        self._sending = _Report(self, rows)
        self._sending.start()

    def answer(self) -> bool | None:
        """The answer to the report :meth:`send` sent (True: go on; False: the generation ends), taken once; None
        while it is on its way or when none was sent."""
        sending = self._sending
        if sending is None or sending.is_alive():
            return None
        self._sending = None
        if sending.error is not None:
            raise sending.error
        return sending.go_on

    def settle(self) -> None:
        """Wait for the report on its way, if any (at most twice a report's time-out), and drop its answer: the
        task's final report goes after it. Should the one on its way still arrive later, the driver refuses a row
        that would move a position back (``engine/report_bounds.py``), and its counts are its own records."""
        if self._sending is not None:
            self._sending.join(_TIMEOUT_S * 2)
            self._sending = None

    def report(self, rows: list[dict[str, Any]], final: bool = False) -> bool:
        body = json.dumps(
            {
                "flow": self.flow,
                "generation": self.endpoint.generation,
                "task": self.task,
                "final": final,
                "rows": rows,
            },
            ensure_ascii=False,  # a character weighs at most 4 bytes (the driver caps a report's size by its rows)
        ).encode()
        headers = {
            "Content-Type": "application/json",
            TOKEN_HEADER: self.endpoint.token,
            FLOW_HEADER: urllib.parse.quote(self.flow, safe=""),
        }
        request = urllib.request.Request(self.endpoint.url, data=body, headers=headers, method="POST")
        self.reports += 1
        self.missed = True
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
                go_on = bool(json.load(answer).get("run", False))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            silent = self.clock() - self.last_heard
            if silent > DRIVER_GONE_S:
                log.warning("flow=%s: the driver has not answered for %.0f s (%s); stopping", self.flow, silent, exc)
                return False
            return True
        self.last_heard = self.clock()
        self.missed = False
        return go_on


class _Report(threading.Thread):
    """A report on its way, in a thread of its own, and what it came back with."""

    def __init__(self, link: DriverLink, rows: list[dict[str, Any]]) -> None:
        super().__init__(name="mm2py-report", daemon=True)
        self.link = link
        self.rows = rows
        self.go_on = True
        self.error: BaseException | None = None  # raised in the copy loop's thread by DriverLink.answer

    def run(self) -> None:
        try:
            self.go_on = self.link.report(self.rows)
        except BaseException as exc:
            self.error = exc

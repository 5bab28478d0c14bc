"""Logging inside a copy task (executor side): mm2py's lines and those of the batch path's library
(kafka-python, logger ``kafka``) go to the worker's stderr, redacted, whoever collects that stream (Spark's
executor logs, a terminal in local mode).

Why per task and not once per process: Spark reuses a Python worker for the next task, and that task may be
another flow's, with other credentials. The worker's one handler keeps one redactor, and every task teaches it
its flow's secrets before it logs anything.
"""

from __future__ import annotations

import logging
import sys
import threading

from mm2py.executor.contract import CopySpec
from mm2py.secrets import RedactingFilter, Redactor

# The loggers a copy task's lines come from: mm2py's own (mm2py.librdkafka carries librdkafka's lines) and
# kafka-python's, whose errors may quote a SASL exchange or a connection's settings.
TASK_LOGGERS = ("mm2py", "kafka")

_lock = threading.Lock()
_redactor = Redactor()  # every secret of every flow this worker ran a task of
_handler: logging.Handler | None = None


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each line to the stream that is ``sys.stderr`` when the line is logged, not the one it was at the
    first task: librdkafka's lines reach the handler when a client is next polled, even by a thread that closes
    idle clients long after, and a host that swaps ``sys.stderr`` (a test running task code in its own process)
    may have closed the first one by then."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> object:
        return sys.stderr


def executor_logging(spec: CopySpec) -> None:
    """Mask the secrets of ``spec``'s flow in this worker's log lines from now on (with those of the flows
    before it); the handler itself is set up by the worker's first task."""
    global _handler
    with _lock:
        _redactor.add_properties(
            {**spec.consumer_settings, **spec.producer_settings, **(spec.syncs_producer_settings or {})}
        )
        if _handler is not None:
            return
        _handler = _CurrentStderr()
        _handler.addFilter(RedactingFilter(_redactor))
        _handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        for name in TASK_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(_handler)
            logger.setLevel(logging.WARNING)
            logger.propagate = False  # nothing reaches a handler of the root logger, which has no redactor

"""Logging inside a copy task (executor side): mm2py's and librdkafka's lines go to the worker's stderr,
redacted, whoever collects that stream (Spark's executor logs, a terminal in local mode)."""

from __future__ import annotations

import logging

from mm2py.executor.contract import CopySpec
from mm2py.secrets import RedactingFilter, Redactor

_logging_ready = False


def executor_logging(spec: CopySpec) -> None:
    """Set up the worker's logging once per process; every secret in the flow's client settings is masked."""
    global _logging_ready
    if _logging_ready:
        return
    redactor = Redactor.from_properties(
        {**spec.consumer_settings, **spec.producer_settings, **(spec.syncs_producer_settings or {})}
    )
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter(redactor))
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("mm2py")
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    root.propagate = False
    _logging_ready = True

"""``mm2py`` run inside the test's own process: the command's one entry point (``mm2py.cli.app.main``), its exit
code, stdout and stderr captured as a subprocess's would be, and for ``run --once`` a SparkContext shared by
the runs of one pytest worker instead of a Spark JVM started and stopped by every run.

Why: a new interpreter and a new SparkContext cost about 7 s per ``run`` on this machine, which was the largest
single cost of the suite (docs/testing.md). What a new process would prove beyond this — the console script,
a fresh interpreter, signals, a JVM with the run's own settings — is proven by the tests that still start one:
continuous runs, runs with Spark settings or a metrics port of their own, and the tests that signal or kill
mm2py (``tests/harness/mm2py_cli.py`` decides).

The shared context is the one the run itself would start (``SparkRunner.start`` with the run's master and
Spark settings); a run that asks for other settings gets a context of its own, which the runs after it then share.
Its Python workers live as long as the context, as in a long continuous run: the clients they cached for the
brokers of tests that ended are closed by the next task once idle (``mm2py.librdkafka.clients.close_idle``).
``stop_shared_spark`` (a session-scoped fixture in tests/conftest.py) stops it when the worker ends.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

from mm2py.cli import app, render
from mm2py.engine.spark import SparkRunner, effective_master

_start_own_context = SparkRunner.start


class _SharedSpark:
    """The SparkContext of this worker's in-process runs, keyed by the master and settings it was started with."""

    def __init__(self) -> None:
        self.runner: SparkRunner | None = None
        self.key: tuple[str, tuple[tuple[str, str], ...]] | None = None

    def start(self, app_name: str, master: str, deploy_mode: str, conf: Mapping[str, str], flows: int = 1) -> Any:
        """What ``SparkRunner.start`` returns to a run: a runner over the shared context, which it does not stop."""
        if deploy_mode != "client":
            return _start_own_context(app_name, master, deploy_mode, conf, flows)  # refuses, as a run would
        key = (effective_master(master, flows), tuple(sorted(conf.items())))
        if key != self.key:
            self.stop()
            self.runner = _start_own_context(app_name, master, deploy_mode, conf, flows)
            self.key = key
        assert self.runner is not None
        return SparkRunner(self.runner.sc, flows=flows, task_attempts=self.runner.task_attempts, owns_context=False)

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
        self.runner = None
        self.key = None


SHARED_SPARK = _SharedSpark()


def stop_shared_spark() -> None:
    SHARED_SPARK.stop()


@contextlib.contextmanager
def _command_state() -> Iterator[None]:
    """What ``main`` changes in the process (root logger, levels, SparkRunner.start, the secrets it learned),
    put back afterwards, so the next command and pytest's own log capture find them as before."""
    root, mm2py, librdkafka = (logging.getLogger(name) for name in ("", "mm2py", "mm2py.librdkafka"))
    saved = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in (root, mm2py, librdkafka)]
    # As in a new process: a test that ran copy-task code here has given "mm2py" a handler of its own.
    mm2py.handlers[:], mm2py.propagate = [], True
    mm2py.setLevel(logging.NOTSET)
    learned = list(render.redactor._learned)
    start = SparkRunner.__dict__["start"]
    SparkRunner.start = SHARED_SPARK.start  # type: ignore[method-assign]
    try:
        yield
    finally:
        SparkRunner.start = start  # type: ignore[method-assign]
        for logger, handlers, level, propagate in saved:
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)
        render.redactor._learned[:] = learned


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``mm2py ARGS`` through its console entry point in this process, with ``env`` added to the environment; the
    result as ``subprocess.run`` gives it."""
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with _command_state(), _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            app.main(args)
        except SystemExit as exc:
            code = exc.code
    if isinstance(code, str):  # sys.exit("message"): printed to stderr, exit status 1
        err.write(code + "\n")
        code = 1
    return subprocess.CompletedProcess(["mm2py", *args], code or 0, out.getvalue(), err.getvalue())

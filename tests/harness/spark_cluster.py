"""A Spark standalone cluster (one master, one or more workers) on loopback, from the installed pyspark package.

Why: ``local[N]`` runs tasks in Python workers of the driver's own JVM, which share the driver's files and
environment, so it cannot show that mm2py really reaches executors on a cluster. The pip-installed pyspark
ships ``bin/spark-class`` and the standalone Master and Worker classes, which is all a real (if small)
cluster needs; nothing is downloaded.

Everything binds to 127.0.0.1 (``--host`` for the RPC endpoints, ``SPARK_LOCAL_IP`` for the web UIs, which
otherwise listen on 0.0.0.0), every log and the workers' work directories (executor stdout/stderr, fetched
application files) live under one temporary directory, and readiness is a log line, never a fixed delay.

Several workers (``workers=2``) give an application one executor JVM per worker, so an executor can be lost
(``kill_executor``: SIGKILL, as a crashed machine) while another one keeps running and the master has a worker
to start a replacement on; the executors are found as the workers' child processes (``executors()``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.kafka_harness import HOST, free_port
from tests.harness.polling import poll_until

START_TIMEOUT = 60.0  # a cold JVM on a busy 2-core machine takes several seconds
STOP_TIMEOUT = 15.0


class SparkUnavailable(RuntimeError):
    """No pyspark package or no Java: cluster tests must fail loudly, never skip."""


def find_spark_home() -> Path:
    """The installed pyspark package directory, which is a complete SPARK_HOME (bin/, jars/)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SparkUnavailable(f"{home} has no bin/spark-class or jars/: reinstall pyspark (`make install`)")
    return home


def java_env() -> dict[str, str]:
    """The environment of every Spark process: this one's, with Java found and all addresses on loopback."""
    env = dict(os.environ)
    java_home = env.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").is_file()) and shutil.which("java") is None:
        raise SparkUnavailable("Spark needs Java 17 or newer: set JAVA_HOME or put `java` on PATH")
    env["SPARK_LOCAL_IP"] = HOST
    env["SPARK_PUBLIC_DNS"] = HOST  # the addresses the daemons advertise (they would say "localhost")
    env.pop("SPARK_CONF_DIR", None)  # a developer's spark-defaults.conf must not change the test cluster
    return env


@dataclass
class SparkDaemon:
    """One JVM started with ``spark-class CLASS ARGS``; its stdout and stderr go to ``log_path``."""

    name: str
    command: list[str]
    log_path: Path
    env: dict[str, str]
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            log.write(f"### {' '.join(self.command)}\n".encode())
            log.flush()
            # Own session, so a Ctrl-C reaches pytest only (the fixture stops us) and the executors the worker
            # launches share our process group, which the final SIGKILL covers.
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.log_path.parent,
                start_new_session=True,
            )

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match[str]:
        """Poll the log until ``pattern`` matches; fail early if the JVM exits, with the log in the error."""
        regex = re.compile(pattern)
        return poll_until(
            lambda: regex.search(self.log_text()),
            timeout,
            f"spark {self.name} logging {pattern!r} (log {self.log_path})",
            process=self._process,
            log=self.log_path,
        )

    def request_stop(self) -> None:
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGTERM)

    def await_exit(self, deadline: float) -> None:
        """Wait for the JVM until ``deadline``, then SIGKILL its whole process group (executors included)."""
        if self._process is None:
            return
        try:
            self._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # The leader is alive and not yet reaped, so this group id is still the session we started.
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()


@dataclass(frozen=True)
class ExecutorProcess:
    """An executor JVM (``CoarseGrainedExecutorBackend``) one of the cluster's workers started."""

    pid: int
    app_id: str
    executor_id: str
    worker: int  # which worker started it, 1-based


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores each, ``memory`` for executors); ``master_url`` once
    started. One worker keeps its work directory at ``work_dir``; with several, worker ``i`` uses
    ``work_dir / f"worker-{i}"``."""

    base_dir: Path
    cores: int = 1
    memory: str = "1g"
    workers: int = 1
    start_timeout: float = START_TIMEOUT  # per daemon: more when the machine is busy with other work
    spark_home: Path = field(default_factory=find_spark_home)
    master_url: str = ""
    master_web_url: str = ""
    daemons: list[SparkDaemon] = field(default_factory=list)

    @property
    def work_dir(self) -> Path:
        """The workers' work directory: ``[worker-<i>/]app-*/<executor id>/stderr`` holds each executor's log."""
        return self.base_dir / "work"

    def worker_dir(self, index: int) -> Path:
        return self.work_dir if self.workers == 1 else self.work_dir / f"worker-{index}"

    @property
    def worker_daemons(self) -> list[SparkDaemon]:
        return [d for d in self.daemons if d.name.startswith("worker")]

    def start(self) -> None:
        """Start the master, then the workers, and return once every worker is registered with the master."""
        if self.workers < 1:
            raise ValueError(f"a cluster needs at least one worker, not {self.workers}")
        env = java_env()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        properties = self.base_dir / "spark-daemons.conf"
        # The master's REST submission server would listen on the fixed port 6066: off, tests never use it.
        properties.write_text("spark.master.rest.enabled false\n")
        spark_class = str(self.spark_home / "bin" / "spark-class")
        master = SparkDaemon(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--properties-file",
                str(properties),
            ],
            self.base_dir / "master.log",
            env,
        )
        self.daemons.append(master)
        master.start()
        # Spark moves to the next port when one is taken, so the addresses come from the log, not from us.
        timeout = self.start_timeout
        self.master_url = master.wait_for(r"Starting Spark master at (spark://\S+)", timeout).group(1)
        self.master_web_url = "http://" + master.wait_for(r"Start Jetty (\S+) for MasterUI", timeout).group(1)
        master.wait_for(r"I have been elected leader!", timeout)
        started = [self._start_worker(i, spark_class, properties, env) for i in range(1, self.workers + 1)]
        for worker in started:
            worker.wait_for(r"Successfully registered with master", timeout)

    def _start_worker(self, index: int, spark_class: str, properties: Path, env: dict[str, str]) -> SparkDaemon:
        work = self.worker_dir(index)
        work.mkdir(parents=True, exist_ok=True)
        name, log = ("worker", "worker.log") if self.workers == 1 else (f"worker-{index}", f"worker-{index}.log")
        worker = SparkDaemon(
            name,
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                HOST,
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(work),
                "--properties-file",
                str(properties),
            ],
            self.base_dir / log,
            env,
        )
        self.daemons.append(worker)
        worker.start()
        return worker

    def stop(self) -> None:
        """SIGTERM the workers (they kill their executors) and the master, SIGKILL what is left. Idempotent."""
        for daemon in reversed(self.daemons):
            daemon.request_stop()
        deadline = time.monotonic() + STOP_TIMEOUT
        for daemon in reversed(self.daemons):
            daemon.await_exit(deadline)

    def executors(self) -> list[ExecutorProcess]:
        """The executor JVMs running now under this cluster's workers (from /proc: the workers' descendants)."""
        workers = {d.pid: i for i, d in enumerate(self.worker_daemons, 1) if d.running and d.pid is not None}
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                if entry.isdigit():
                    parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        found = []
        for pid in sorted(parents):
            worker, ancestor = None, parents.get(pid)
            while ancestor is not None and ancestor > 1 and worker is None:
                worker, ancestor = workers.get(ancestor), parents.get(ancestor)
            args = _cmdline(pid)
            if worker is not None and "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
                found.append(ExecutorProcess(pid, _option(args, "--app-id"), _option(args, "--executor-id"), worker))
        return found

    def kill_executor(self, executor: ExecutorProcess) -> None:
        """SIGKILL one executor JVM, as a crashed machine (its Python workers see their JVM gone and exit)."""
        if executor not in self.executors():  # never signal a pid that has been reused since it was listed
            raise ProcessLookupError(f"{executor} is not running any more")
        os.kill(executor.pid, signal.SIGKILL)

    def master_state(self) -> dict[str, Any]:
        """The master's own view (workers, running and completed applications) from its loopback JSON page."""
        with urllib.request.urlopen(f"{self.master_web_url}/json/", timeout=10) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def executor_logs(self) -> dict[str, str]:
        """``[worker-<i>/]app-id/executor-id/stderr`` -> text, for every executor the workers ran."""
        pattern = "app-*/*/stderr" if self.workers == 1 else "worker-*/app-*/*/stderr"
        return {
            str(p.relative_to(self.work_dir)): p.read_text(errors="replace")
            for p in sorted(self.work_dir.glob(pattern))
        }

    def diagnostics(self, chars: int = 3000) -> str:
        """Tails of every daemon and executor log, for assertion messages."""
        parts = [f"--- {d.name} ({d.log_path}) ---\n{d.log_text()[-chars:]}" for d in self.daemons]
        parts += [f"--- executor {name} ---\n{text[-chars:]}" for name, text in self.executor_logs().items()]
        return "\n".join(parts)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _option(args: str, name: str) -> str:
    """The value after ``name`` in a command line (``""`` without it)."""
    words = args.split()
    return words[words.index(name) + 1] if name in words[:-1] else ""


# Imported by site.py after every .pth file ran, i.e. after the editable install's finder was installed.
_SITECUSTOMIZE = '''\
"""Executor Python for the cluster test: the venv's packages, minus the editable mm2py install."""
import importlib.machinery
import importlib.util
import os
import sys

REPORT = {report!r}


def _is_editable(obj):
    return type(obj).__module__.startswith("__editable__") or getattr(obj, "__module__", "").startswith(
        "__editable__")


sys.meta_path[:] = [f for f in sys.meta_path if not _is_editable(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _is_editable(h)]
sys.path[:] = [p for p in sys.path if not p.startswith("__editable__")
               and not os.path.isfile(os.path.join(p or ".", "mm2py", "__init__.py"))]
sys.path_importer_cache.clear()


def _note(line):
    with open(REPORT, "a") as report:
        report.write(f"{{os.getpid()}} {{line}}\\n")


_note(f"start hidden={{importlib.util.find_spec('mm2py') is None}}")


class _NoteWhereMm2pyComesFrom:
    """Finds ``mm2py`` as the path finder would, and notes where from (the task adds the shipped zip)."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "mm2py":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        _note(f"import mm2py from {{spec.origin if spec else None}}")
        return spec


sys.meta_path.insert(0, _NoteWhereMm2pyComesFrom)
'''


@dataclass(frozen=True)
class ExecutorPython:
    """An interpreter for ``PYSPARK_PYTHON`` that cannot import the installed mm2py, and notes its imports.

    Each Python worker process appends ``PID start hidden=True|False`` when it starts and
    ``PID import mm2py from ORIGIN`` when a task imports mm2py; ``report()`` returns those lines.
    """

    executable: Path
    report_path: Path

    @classmethod
    def create(cls, directory: Path) -> ExecutorPython:
        site_dir = directory / "hide-mm2py"
        site_dir.mkdir(parents=True)
        report_path = directory / "executor-python.report"
        report_path.touch()
        (site_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(report=str(report_path)))
        executable = directory / "executor-python"
        # PYTHONNOUSERSITE: no ~/.local packages either. Our directory goes first on PYTHONPATH so its
        # sitecustomize wins over any other; Spark's own PYTHONPATH (pyspark.zip, py4j) is kept after it.
        executable.write_text(
            "#!/bin/sh\n"
            "export PYTHONNOUSERSITE=1\n"
            f'export PYTHONPATH="{site_dir}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f'exec "{sys.executable}" "$@"\n'
        )
        executable.chmod(0o755)
        return cls(executable, report_path)

    def report(self) -> list[str]:
        return self.report_path.read_text().splitlines()

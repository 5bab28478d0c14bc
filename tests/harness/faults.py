"""Fault injection around a real ``mm2py run``: the run as a session of processes that can be SIGKILLed at
once, its Spark Python workers, a producer that keeps writing while the run copies, and a watch that sees
records land in the target.

What Spark did about a fault (which task attempts failed, and why) is read from Spark's event log, which the
run is told to write: it is structured, and independent of how mm2py chooses to log.

Why a session and not a process group: the run is started with ``start_new_session`` (like a service), but
``pyspark.daemon`` puts itself and the Python workers it forks into a process group of their own
(``os.setpgid(0, 0)``). Only the session id still ties them to the run, so "every process of the run" means
"every process of the session", and a crash test kills them all at the same instant.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from mm2py.engine import python_daemon
from tests.harness.kafka_harness import Record, consumer_config, make_records, produce
from tests.harness.mm2py_cli import mm2py_argv
from tests.harness.polling import poll_until

# Seeds of the background producer's bursts start here, far from the seeds tests use for fixed datasets.
_BURST_SEED_BASE = 10_000
# How Spark describes a task attempt whose Python worker died.
WORKER_CRASHED = "Python worker exited unexpectedly"


# -- processes (Linux /proc) ------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may contain spaces and ')')."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def session_processes(session: int) -> dict[int, int]:
    """pid -> ppid of every live process in ``session``."""
    result: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None and int(fields[3]) == session:
            result[int(entry)] = int(fields[1])
    return result


# The module a Python worker daemon runs, which its forked workers' command lines show too: pyspark's own, or the
# one a local run starts (mm2py/engine/python_daemon.py).
WORKER_DAEMONS = ("pyspark.daemon", python_daemon.__name__)


def is_worker_daemon(cmdline: str) -> bool:
    return any(name in cmdline for name in WORKER_DAEMONS) or "pyspark/worker" in cmdline


def python_workers(session: int) -> list[int]:
    """The forked Spark Python workers of a run: daemon processes whose parent is the daemon itself (the daemon's
    own parent is the JVM). With worker reuse each of them runs task after task."""
    processes = session_processes(session)
    daemons = {pid for pid in processes if is_worker_daemon(_cmdline(pid))}
    return sorted(pid for pid in daemons if processes[pid] in daemons)


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of a process, in clock ticks (0 if it is gone)."""
    fields = _stat_fields(pid)
    return int(fields[11]) + int(fields[12]) if fields is not None else 0


def busy_python_worker(session: int, window_s: float = 0.1, windows: int = 2, min_share: float = 0.2) -> int | None:
    """A Python worker of the run that is inside a task now, or None: it used at least ``min_share`` of a core
    in each of ``windows`` consecutive windows. An idle reused worker blocks on its socket and uses none, but
    right after a task it runs a garbage collection, which a single short window would take for work."""
    workers = python_workers(session)
    busy = set(workers)
    ticks = {pid: cpu_ticks(pid) for pid in workers}
    for _ in range(windows):
        time.sleep(window_s)  # the measuring window
        now = {pid: cpu_ticks(pid) for pid in workers}
        busy = {pid for pid in busy if now[pid] - ticks[pid] >= min_share * window_s * os.sysconf("SC_CLK_TCK")}
        ticks = now
    return min(busy) if busy else None


# -- the run ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskEnd:
    """One finished Spark task attempt, from the event log."""

    stage: int
    index: int
    attempt: int
    reason: str  # "Success", "ExceptionFailure", "TaskKilled", ...
    description: str

    @property
    def failed(self) -> bool:
        return self.reason != "Success"


class MirrorRun:
    """``python -m mm2py [-v] run CONFIG [OPTIONS]`` (continuous) in its own session, output in ``log``, Spark's
    event log next to it (``<log>.events``)."""

    def __init__(self, config: Path, log: Path, *options: str, verbose: bool = False) -> None:
        self.log = log
        self.events = log.with_suffix(".events")
        self.events.mkdir(parents=True, exist_ok=True)
        spark_events = (
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            f"spark.eventLog.dir={self.events.as_uri()}",
            "--conf",
            "spark.eventLog.compress=false",
        )
        args = [
            *mm2py_argv(),
            *(["-v"] if verbose else []),
            "run",
            str(config),
            *spark_events,
            *options,
        ]
        with log.open("ab") as out:
            out.write(f"### {' '.join(args)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def spark_events(self) -> list[dict[str, Any]]:
        """Spark's events so far. Spark flushes its event log at each stage's end (and at exit), so a
        finished job's task attempts are all there; a partly written last line is skipped."""
        events: list[dict[str, Any]] = []
        for path in sorted(self.events.rglob("events_*")):
            for line in path.read_text(errors="replace").splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    events.append(json.loads(line))
        return events

    def task_ends(self) -> list[TaskEnd]:
        return [
            TaskEnd(
                e["Stage ID"],
                e["Task Info"]["Index"],
                e["Task Info"]["Attempt"],
                e["Task End Reason"]["Reason"],
                str(e["Task End Reason"].get("Description", "")),
            )
            for e in self.spark_events()
            if e.get("Event") == "SparkListenerTaskEnd"
        ]

    def stages_completed(self) -> int:
        return sum(1 for e in self.spark_events() if e.get("Event") == "SparkListenerStageCompleted")

    @property
    def session(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition`` until it holds; fail with the run's log if it does not, or if the run died."""
        poll_until(condition, timeout, what, process=self.proc, log=self.log)

    def assert_alive_for(self, seconds: float, what: str) -> None:
        """Watch the run for ``seconds`` (the length of an injected stall): it must not exit meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"mm2py exited with {self.proc.returncode} during {what}:\n{self.log_text()}")
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))  # poll interval

    def kill(self, timeout: float = 30.0) -> None:
        """SIGKILL every process of the run at once (driver, JVM, daemon, workers), as a machine crash would.

        Returns once none is left, so nothing of this run can still write to the target afterwards."""
        deadline = time.monotonic() + timeout
        while processes := session_processes(self.session):
            for pid in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.poll()  # reap the driver; the others are reaped by their parents or init
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes {sorted(processes)} of the run survived SIGKILL for {timeout} s")
            time.sleep(0.05)  # poll interval
        self.proc.wait(timeout)

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM (the run finishes the job in flight, records progress, exits); SIGKILL if it hangs."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"mm2py did not exit within {timeout} s of SIGTERM:\n{self.log_text()}")

    def __enter__(self) -> MirrorRun:
        return self

    def __exit__(self, *_exc: object) -> None:
        if session_processes(self.session):
            self.kill()


def kill_busy_python_worker(
    run: MirrorRun, timeout: float, *, window_s: float = 0.1, windows: int = 2, min_share: float = 0.2
) -> int:
    """SIGKILL the first Spark Python worker of the run seen busy (as :func:`busy_python_worker` judges it with
    these arguments); returns its pid."""
    killed: list[int] = []

    def kill_one() -> bool:
        victim = busy_python_worker(run.session, window_s, windows, min_share)
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
        return bool(killed)

    run.wait_for(kill_one, timeout, "a Python worker inside a task")
    return killed[0]


def worker_crashes(run: MirrorRun) -> int:
    """Task attempts that failed because their Python worker died."""
    return sum(1 for t in run.task_ends() if t.failed and WORKER_CRASHED in t.description)


# -- the brokers' side ------------------------------------------------------------------------------------


class BurstProducer:
    """Produces bursts of ``burst`` unique records to the source, every ``interval_s``, until stopped.

    Each burst goes through the harness ``produce`` (which leaves tansu's ListOffsets LATEST exact,
    docs/test-broker.md, *ListOffsets*) and uses its own ``make_records`` seed, so every value in the topic is unique.
    """

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, *, burst: int, interval_s: float, value_size: int = 64
    ) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.burst, self.interval_s, self.value_size = burst, interval_s, value_size
        self.produced: list[Record] = []
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="burst-producer", daemon=True)

    def start(self) -> BurstProducer:
        self._thread.start()
        return self

    def stop(self) -> list[Record]:
        """Stop after the burst in flight; every record returned was acknowledged by the source."""
        self._stop.set()
        self._thread.join(120)
        if self._thread.is_alive():
            raise TimeoutError("the burst producer did not stop within 120 s")
        if self._error is not None:
            raise RuntimeError("the burst producer failed") from self._error
        return list(self.produced)

    def _run(self) -> None:
        seed = _BURST_SEED_BASE
        try:
            while not self._stop.is_set():
                records = make_records(
                    self.burst, partitions=self.partitions, seed=seed, value_size=self.value_size, with_headers=False
                )
                produce(self.bootstrap, self.topic, records)
                self.produced.extend(records)
                seed += 1
                self._stop.wait(self.interval_s)  # pacing of the load, not synchronisation
        except BaseException as exc:  # reported by stop()
            self._error = exc


class LandingWatch:
    """Watches records land in a topic, sampling its end offsets every few milliseconds through one consumer.

    A copy task writes a range in a few produce requests and records its progress right after the last
    acknowledgement, so the window in which a crash leaves a partly copied range is short. Acting the moment
    the end offsets move puts the crash inside that window. The samples come from ListOffsets LATEST, which
    tansu understates (docs/test-broker.md, *ListOffsets*) but never moves backwards: enough to see growth,
    not to count.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._consumer = Consumer(consumer_config(bootstrap))
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def sample(self) -> int:
        try:
            return sum(self._consumer.get_watermark_offsets(tp, timeout=5.0)[1] for tp in self._partitions)
        except KafkaException:  # the topic does not exist yet
            return 0

    def wait_landing(self, run: MirrorRun, above: int, timeout: float) -> int:
        """Return (a sample) as soon as records are landing and more than ``above`` are in the topic."""
        deadline = time.monotonic() + timeout
        previous = self.sample()
        while True:
            current = self.sample()
            if current > above and current > previous:
                return current
            previous = current
            if run.proc.poll() is not None:
                pytest.fail(f"mm2py exited with {run.proc.returncode} before {above} records landed:\n{run.log_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no records landing past {above} within {timeout} s:\n{run.log_text()[-20_000:]}")
            time.sleep(0.002)  # sampling interval

    def __enter__(self) -> LandingWatch:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._consumer.close()

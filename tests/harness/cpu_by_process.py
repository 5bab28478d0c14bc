"""Where the suite's CPU goes: ``python -m tests.harness.cpu_by_process OUT.json -- COMMAND...`` runs COMMAND and,
every two seconds until it exits, reads the CPU time of every process on the machine from ``/proc``, summing
it by kind (Kafka brokers, Spark's driver JVMs and Python workers, the pytest workers, tansu, MirrorMaker 2, ...)
and recording how busy the cores were; it writes the sums to OUT.json, prints them, and exits with COMMAND's code.

Why: ``suite_timing`` splits each test's wall time, but on two cores the suite is as much short of CPU as it is
waiting, and only a view across processes says who uses the cores (docs/testing.md, *Where the CPU goes*). It
runs in a process of its own, outside the suite it measures; a process that ends between two readings loses
at most its last two seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

INTERVAL_S = 2.0
_TICKS = os.sysconf("SC_CLK_TCK")
# (kind, any of these in the command line): the first match names a process.
_KINDS = (
    ("kafka broker", ("kafka.Kafka ",)),
    ("MirrorMaker 2", ("connect.mirror.MirrorMaker",)),
    ("Spark standalone (master, worker, executors)", ("deploy.master", "deploy.worker", "CoarseGrained")),
    ("Spark driver JVM", ("org.apache.spark.deploy.SparkSubmit", "pyspark/jars")),
    ("Spark Python workers", ("pyspark.daemon", "pyspark.worker")),
    ("tansu", ("tansu",)),
    # Before pytest: an mm2py process's command line names its config file under pytest's temporary directory.
    ("mm2py processes", ("-m mm2py", "timed_mm2py", "bin/mm2py")),
    ("pytest workers (and in-process mm2py)", ("pytest", "exec(eval(sys.stdin.readline()))")),
    ("other Java", ("java",)),
)


def kind_of(command_line: str) -> str:
    for kind, marks in _KINDS:
        if any(mark in command_line for mark in marks):
            return kind
    return "other"


def _cpu_seconds(pid: str) -> tuple[str, float] | None:
    """(start time, user + system CPU seconds) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19], (int(fields[11]) + int(fields[12])) / _TICKS


def _command_line(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _machine() -> tuple[int, int]:
    """(all ticks, idle ticks) of the machine so far."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]


class Sampler:
    """CPU seconds per kind since the first reading; processes already running then count from that reading."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.busy: list[float] = []  # share of both cores busy, per interval
        self._seen: dict[tuple[str, str], tuple[str, float]] = {}
        self._machine = _machine()
        self._first = True

    def read(self) -> None:
        seen: dict[tuple[str, str], tuple[str, float]] = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            now = _cpu_seconds(pid)
            if now is None:
                continue
            key = (pid, now[0])
            kind, before = self._seen.get(key) or (kind_of(_command_line(pid)), now[1] if self._first else 0.0)
            self.seconds[kind] += now[1] - before
            seen[key] = (kind, now[1])
        self._seen, self._first = seen, False
        machine = _machine()
        total, idle = machine[0] - self._machine[0], machine[1] - self._machine[1]
        self._machine = machine
        if total > 0:
            self.busy.append(1 - idle / total)

    def report(self, wall_s: float) -> dict[str, object]:
        return {
            "wall_s": round(wall_s, 1),
            "cpu_s": {kind: round(s, 1) for kind, s in self.seconds.most_common()},
            "cpu_s_total": round(sum(self.seconds.values()), 1),
            "cores_busy": round(sum(self.busy) / max(1, len(self.busy)), 3),
        }


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tests.harness.cpu_by_process OUT.json -- COMMAND...", file=sys.stderr)
        return 2
    out, command = Path(argv[0]), argv[2:]
    sampler = Sampler()
    started = time.monotonic()
    sampler.read()
    child = subprocess.Popen(command)
    while True:
        try:
            code = child.wait(INTERVAL_S)
            break
        except subprocess.TimeoutExpired:
            sampler.read()
    sampler.read()
    report = sampler.report(time.monotonic() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"CPU by process kind, {report['wall_s']} s wall, cores {100 * float(report['cores_busy']):.0f} % busy:")
    for kind, seconds in sampler.seconds.most_common():
        print(f"  {seconds:8.1f} s  {kind}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

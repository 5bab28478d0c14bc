"""Peak memory and CPU of a whole process tree, read from /proc (Linux only; psutil is not installed).

Why a tree: ``mm2py run`` is a Python driver, a JVM it starts, and Python workers the JVM forks; a figure for
the driver alone would hide most of the cost. Every ``interval`` the monitor lists /proc, keeps the root's
descendants (by parent pid), and sums their resident memory. The sum of RSS counts pages the forked Python
workers share copy-on-write with their parent more than once, so it is an upper bound; PSS (proportional set
size, from ``smaps_rollup``) splits shared pages fairly and is what the tree really costs the machine.

It also keeps a time series of CPU seconds (the tree by role, the brokers, the whole machine), so the CPU of
any window - e.g. only the copy phase - can be read afterwards.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    comm: str
    cpu_s: float  # user + system time so far
    rss: int  # bytes


def read_stat(pid: int) -> ProcStat | None:
    """One process's /proc/PID/stat, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split at the last ')'.
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    return ProcStat(
        pid, int(fields[1]), head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / TICKS, int(fields[21]) * PAGE
    )


def read_pss(pid: int) -> int:
    """Proportional set size in bytes (0 if the process is gone or smaps_rollup is unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def role(stat: ProcStat, root: int) -> str:
    """What a process in the tree is: the root, the JVM, a PySpark worker, or something else."""
    if stat.pid == root:
        return "main"
    if stat.comm == "java":
        return "jvm"
    try:
        cmdline = Path(f"/proc/{stat.pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return "other"
    # local mode: the JVM starts `python -m pyspark.daemon`, which forks one worker per task slot
    return "python workers" if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline else "other"


def descendants(root: int) -> list[ProcStat]:
    """The root and every process below it, as seen now."""
    stats = [s for s in (read_stat(int(p)) for p in os.listdir("/proc") if p.isdigit()) if s is not None]
    children: dict[int, list[ProcStat]] = {}
    tree: list[ProcStat] = []
    for s in stats:
        children.setdefault(s.ppid, []).append(s)
        if s.pid == root:
            tree.append(s)
    i = 0
    while i < len(tree):
        tree.extend(children.get(tree[i].pid, []))
        i += 1
    return tree


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat), to spot other work on the machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / TICKS


@dataclass(frozen=True)
class Sample:
    wall: float  # time.time()
    tree: dict[str, float]  # role -> CPU seconds so far
    watched: tuple[float, ...]  # CPU seconds so far of each watched pid (the brokers)
    busy: float  # machine_busy_s()


@dataclass
class TreeMonitor:
    """Samples a process tree (and ``watch`` pids) in a thread; use as a context manager around the run."""

    root: int
    watch: tuple[int, ...] = ()
    interval_s: float = 0.2
    pss_every: int = 2  # smaps_rollup of a JVM takes 4-10 ms to read; PSS every 2nd tick, from the first
    peak_rss: int = 0
    peak_pss: int = 0
    series: list[Sample] = field(default_factory=list)
    _cpu: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (role, last CPU seconds)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> TreeMonitor:
        self.sample(with_pss=False)
        self._thread = threading.Thread(target=self._run, name=f"tree-monitor-{self.root}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample(with_pss=False)  # the tree is gone by now; this records the brokers' and machine's end

    def sample(self, with_pss: bool) -> None:
        tree = descendants(self.root)
        for s in tree:
            # Read again until known: spark-submit is a shell script that execs java under the same pid. Kept
            # once known: an exited, not yet reaped process (a zombie) has an empty cmdline.
            known, cpu = self._cpu.get(s.pid, ("other", 0.0))
            self._cpu[s.pid] = (known if known != "other" else role(s, self.root), max(cpu, s.cpu_s))
        by_role: dict[str, float] = {}
        for name, cpu in self._cpu.values():
            by_role[name] = by_role.get(name, 0.0) + cpu
        watched = tuple(w.cpu_s if (w := read_stat(pid)) is not None else 0.0 for pid in self.watch)
        self.series.append(Sample(time.time(), by_role, watched, machine_busy_s()))
        self.peak_rss = max(self.peak_rss, sum(s.rss for s in tree))
        if with_pss:
            self.peak_pss = max(self.peak_pss, sum(read_pss(s.pid) for s in tree))

    def cores(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """Average cores used in [start, end] (wall clock; default the whole run): tree by role, the watched
        pids as ``watched<i>``, and ``others`` (the rest of the machine)."""
        series = self.series
        first = next((s for s in reversed(series) if start is not None and s.wall <= start), series[0])
        last = next((s for s in series if end is not None and s.wall >= end), series[-1])
        seconds = max(last.wall - first.wall, 1e-9)
        out = {name: (cpu - first.tree.get(name, 0.0)) / seconds for name, cpu in last.tree.items()}
        for i, (a, b) in enumerate(zip(first.watched, last.watched, strict=True)):
            out[f"watched{i}"] = (b - a) / seconds
        out["others"] = max(0.0, (last.busy - first.busy) / seconds - sum(out.values()))
        return out

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(self.interval_s):
            self.sample(with_pss=tick % self.pss_every == 0)
            tick += 1

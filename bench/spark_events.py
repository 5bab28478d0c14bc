"""Timings of an ``mm2py run`` read from Spark's event log (``spark.eventLog.enabled``).

The event log records, in epoch milliseconds, when the SparkContext started, when each job was submitted
and completed, and when each task was launched and finished: exact start-up and copy times without
touching mm2py's code or parsing its log lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Timeline:
    app_start: float  # seconds since the epoch
    jobs: list[tuple[float, float]]  # (submitted, completed)
    tasks: list[tuple[float, float]]  # (launched, finished)

    def summary(self, started_wall: float, records: int) -> dict[str, Any]:
        """Start-up phases (from the process start), copy time and rates."""
        copy_s = sum(end - start for start, end in self.jobs)
        return {
            "spark_context_s": self.app_start - started_wall,  # process start -> SparkContext up (JVM)
            "first_job_s": self.jobs[0][0] - started_wall,  # ... -> topics made, progress read, job submitted
            "startup_s": min(t[0] for t in self.tasks) - started_wall,  # ... -> the first copy task starts
            "copy_s": copy_s,  # the copy jobs, submission to completion
            "records_per_s": records / copy_s,
            "warm_records_per_s": self.warm_rate(records),
            "jobs": len(self.jobs),
            "tasks": len(self.tasks),
            "copy_start_wall": self.jobs[0][0],
            "copy_end_wall": self.jobs[-1][1],
        }

    def warm_rate(self, records: int) -> float | None:
        """Records/s once every Python worker has finished its first task (its client start-up).

        The window starts when the last task of the first wave (tasks launched before any task finished)
        ends. Each task is taken to copy ``records / tasks`` records at an even pace, so a task that overlaps
        the window counts in proportion to the overlap: true for the benchmark's equal partitions.
        """
        first_finish = min(t[1] for t in self.tasks)
        window_start = max(t[1] for t in self.tasks if t[0] < first_finish)
        window_end = self.jobs[-1][1]
        if window_end - window_start < 0.05:
            return None
        per_task = records / len(self.tasks)
        done = sum(
            per_task * max(0.0, min(end, window_end) - max(start, window_start)) / max(end - start, 1e-3)
            for start, end in self.tasks
        )
        return done / (window_end - window_start)


def read_timeline(events_dir: Path) -> Timeline:
    # Spark 4 writes event log v2: a directory eventlog_v2_<app id>/ holding events_<n>_<app id> files.
    logs = sorted((p for p in events_dir.rglob("events_*") if p.is_file()), key=lambda p: int(p.name.split("_")[1]))
    if not logs:
        raise RuntimeError(f"no Spark event log in {events_dir}")
    app_start = 0.0
    jobs: dict[int, list[float]] = {}
    tasks: list[tuple[float, float]] = []
    for line in (line for log in logs for line in log.read_text().splitlines()):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerApplicationStart":
            app_start = event["Timestamp"] / 1000
        elif kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = [event["Submission Time"] / 1000, 0.0]
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]][1] = event["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd":
            info = event["Task Info"]
            tasks.append((info["Launch Time"] / 1000, info["Finish Time"] / 1000))
    if not tasks or not app_start or any(end == 0 for _start, end in jobs.values()):
        raise RuntimeError(f"incomplete Spark event log in {events_dir}")
    return Timeline(app_start, [(s, e) for s, e in (jobs[j] for j in sorted(jobs))], sorted(tasks))

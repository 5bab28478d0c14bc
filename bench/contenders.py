"""Running each contender as its own process tree, watched from outside through /proc.

Both contenders are subprocesses, so the benchmark process's own work (monitoring, verifying) never shares
their interpreter, and the same monitor measures both: wall time, peak memory and CPU of the tree, and the
CPU the source and target brokers spent meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from bench.proctree import TreeMonitor
from bench.spark_events import read_timeline
from bench.steady import EndOffsetSampler

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Job:
    """One contender run: copy ``topic`` (``ends`` per partition, from 0) from ``source`` to ``target``."""

    label: str  # value-size label, e.g. "100b"
    topic: str
    ends: list[int]
    value_bytes: int
    source: str
    target: str
    broker_pids: tuple[int, int]  # source, target
    work_dir: Path


def _watch(cmd: list[str], job: Job, name: str, remote_topic: str) -> tuple[TreeMonitor, dict[str, Any]]:
    """Run ``cmd`` to completion under a TreeMonitor, sampling the target's end offsets (bench.steady);
    stdout/stderr go to files in the work dir."""
    out, err = job.work_dir / f"{name}.out", job.work_dir / f"{name}.err"
    started_wall, started = time.time(), time.monotonic()
    sampler = EndOffsetSampler(job.target, remote_topic, len(job.ends), sum(job.ends))
    with out.open("wb") as stdout, err.open("wb") as stderr, sampler:
        # Own session: the whole tree (driver, JVM, workers) is one process group we can stop together.
        proc = subprocess.Popen(
            cmd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True
        )
        try:
            with TreeMonitor(proc.pid, watch=job.broker_pids) as monitor:
                proc.wait()
        except BaseException:  # e.g. Ctrl-C: do not leave the contender running
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited with {proc.returncode}; stderr tail:\n{err.read_text()[-3000:]}")
    steady = sampler.slope()
    if steady["t10_wall"] is not None:
        steady["cores_steady"] = _cores(monitor, steady["t10_wall"], steady["t90_wall"])
    return monitor, {
        **steady,
        "started_wall": started_wall,
        "wall_s": wall,
        "peak_rss_mb": monitor.peak_rss / 1e6,
        "peak_pss_mb": monitor.peak_pss / 1e6,
        "cpu_s": sum(monitor.series[-1].tree.values()),
        "end_offset_samples": sampler.samples,
    }


def _cores(monitor: TreeMonitor, start: float | None = None, end: float | None = None) -> dict[str, float]:
    """Average cores used: the contender's processes by role, the two brokers, everything else."""
    cores = monitor.cores(start, end)
    cores["source broker"] = cores.pop("watched0")
    cores["target broker"] = cores.pop("watched1")
    return {k: round(v, 3) for k, v in cores.items()}


def run_loop(job: Job, per_record_reports: bool = False) -> dict[str, Any]:
    name = f"loop-{job.label}" + ("-reports" if per_record_reports else "")
    cmd = [
        sys.executable,
        "-m",
        "bench.loop",
        "--source",
        job.source,
        "--target",
        job.target,
        "--topic",
        job.topic,
        "--remote-topic",
        job.topic,
        "--ends",
        json.dumps(job.ends),
    ]
    if per_record_reports:
        cmd.append("--per-record-reports")
    monitor, stats = _watch(cmd, job, name, job.topic)
    inner = json.loads((job.work_dir / f"{name}.out").read_text())
    # The loop's committed offsets would otherwise be a consumer group that mm2py finds on the source and
    # checkpoints: work the loop never did.
    admin = AdminClient({"bootstrap.servers": job.source})
    admin.delete_consumer_groups([inner["group"]], request_timeout=30)[inner["group"]].result(30)
    return {
        **stats,
        **inner,
        "contender": "loop",
        "remote_topic": job.topic,
        "cores_run": _cores(monitor),
        "cores_copy": _cores(monitor, inner["copy_start_wall"], inner["copy_end_wall"]),
    }


MM2PY_CONFIG = """\
clusters = source, target
source.bootstrap.servers = {source}
target.bootstrap.servers = {target}
source->target.enabled = true
source->target.topics = {topic}
# one tansu broker per cluster: MM2's replication factors of 2 and 3 cannot be met
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
mm2py.spark.master = {master}
{extra}
"""


def run_mm2py(job: Job, contender: str, master: str, extra_properties: str = "") -> dict[str, Any]:
    """``mm2py -v run CONFIG --once`` with Spark's event log on, which gives job and task times exactly."""
    name = f"{contender}-{job.label}"
    config = job.work_dir / f"{name}.properties"
    config.write_text(
        MM2PY_CONFIG.format(
            source=job.source, target=job.target, topic=job.topic, master=master, extra=extra_properties
        )
    )
    events = job.work_dir / f"{name}-events"
    events.mkdir()
    cmd = [
        sys.executable,
        "-m",
        "mm2py",
        "-v",
        "run",
        str(config),
        "--once",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir=file://{events}",
        "--conf",
        "spark.eventLog.compress=false",
    ]
    monitor, stats = _watch(cmd, job, name, f"source.{job.topic}")
    records = sum(job.ends)
    spark = read_timeline(events).summary(stats["started_wall"], records)
    copy_start, copy_end = spark.pop("copy_start_wall"), spark.pop("copy_end_wall")
    spark["shutdown_s"] = stats["started_wall"] + stats["wall_s"] - copy_end
    return {
        **stats,
        **spark,
        "contender": contender,
        "remote_topic": f"source.{job.topic}",
        "records": records,
        "bytes": records * job.value_bytes,
        "master": master,
        "properties": extra_properties,
        "cores_run": _cores(monitor),
        "cores_copy": _cores(monitor, copy_start, copy_end),
    }


def _package_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted((REPO / "mm2py").rglob("*.py")):
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def environment(**extra: Any) -> dict[str, Any]:
    """What the figures depend on: cores, load, versions, and which mm2py code was measured; ``extra`` adds what
    one bench also depends on (its Kafka versions, its arguments). Every bench records this one set."""
    import confluent_kafka
    import pyspark

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "python": sys.version.split()[0],
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "git_head": git("rev-parse", "--short", "HEAD"),
        "git_modified": git("status", "--porcelain", "--untracked-files=no").splitlines(),
        # The copy path's code as measured, even with uncommitted changes: every module of the package.
        "mm2py_sha256": _package_digest(),
        **extra,
    }

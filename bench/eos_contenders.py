"""The three contenders of ``bench.exactly_once``, each copying one topic between the same two real Kafka clusters.

- ``mm2py-alo``: ``mm2py run --once`` on the batch path, at-least-once (the default);
- ``mm2py-eos``: the same with ``target.exactly.once.source.support = enabled`` (transactions per task slot);
- ``mm2``: Apache Kafka's MirrorMaker 2 in dedicated mode with exactly-once source support enabled on the
  target and a ``read_committed`` source consumer (mm2-reference.md §4.6), every other setting its default.

Each contender gets a source alias of its own (so its remote topic, its progress and its transactional.ids are
its own) and is measured the same way, from outside: ``bench.steady``'s sampler reads the remote topic's end
offsets on the target every 0.1 s through a read_committed consumer (the last stable offset: what a
read_committed reader of the target can see), and the steady rate is the slope between 10% and 90% of the
records. The visible rate (``bench.steady.visible_rate``) runs from 10% written to 90% readable, which a copy
that commits only a few times needs. A ``TreeMonitor`` gives CPU by process and the brokers' CPU meanwhile.

A second sampler reads the log end (read_uncommitted) meanwhile: for a transactional copy the two slopes
differ by how records wait in open transactions, which is what commits cost in visibility, not in transfer.

Whether a contender really ran transactions is checked, not assumed: the target's log end (read_uncommitted)
minus the records is the number of commit markers it wrote, and the target's transaction coordinator lists the
contender's transactional.ids (``ListTransactions``, through kafka-python's admin client, not mm2py's code).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from bench.contenders import Job, _cores, _watch
from bench.mirror_maker import MM2_JVM_FLAGS
from bench.proctree import TreeMonitor
from bench.spark_events import read_timeline
from bench.steady import EndOffsetSampler, visible_rate
from tests.harness.kafka_harness import consumer_config
from tests.harness.mirror_maker import MirrorMaker, connect_offsets, properties_text
from tests.harness.real_kafka import KafkaRuntime

MM2_COPY_TIMEOUT_S = 1200.0
# One-node clusters: every replication factor 1; the rest is left at each tool's defaults. The reverse pair's
# heartbeats are off for both tools, so neither writes to the source.
SINGLE_NODE = {
    "replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "config.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "offset.storage.partitions": "5",
}


def base_properties(job: Job, alias: str) -> dict[str, str]:
    return {
        "clusters": f"{alias}, target",
        f"{alias}.bootstrap.servers": job.source,
        "target.bootstrap.servers": job.target,
        f"{alias}->target.enabled": "true",
        f"{alias}->target.topics": job.topic,
        f"target->{alias}.emit.heartbeats.enabled": "false",
        **SINGLE_NODE,
    }


def run_mm2py(job: Job, name: str, alias: str, *, exactly_once: bool, master: str) -> dict[str, Any]:
    """``mm2py -v run FILE --once`` on the batch path, with Spark's event log for the task timeline."""
    settings = {**base_properties(job, alias), "mm2py.spark.master": master, "mm2py.copy.mode": "batch"}
    if exactly_once:
        settings["target.exactly.once.source.support"] = "enabled"
    config = job.work_dir / f"{name}.properties"
    config.write_text(properties_text(settings))
    events = job.work_dir / f"{name}-events"
    events.mkdir()
    cmd = [sys.executable, "-m", "mm2py", "-v", "run", str(config), "--once"]
    for conf in ("spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{events}", "spark.eventLog.compress=false"):
        cmd += ["--conf", conf]
    remote = f"{alias}.{job.topic}"
    with EndOffsetSampler(job.target, remote, len(job.ends), sum(job.ends), isolation="read_uncommitted") as written:
        monitor, stats = _watch(cmd, job, name, remote)
    spark = read_timeline(events).summary(stats["started_wall"], sum(job.ends))
    tasks = _task_durations(events)
    return {
        **stats,
        **visible_rate(written.samples, stats["end_offset_samples"], sum(job.ends)),
        "written_records_per_s": written.slope()["steady_records_per_s"],
        "spark_startup_s": spark["startup_s"],
        "spark_jobs": spark["jobs"],
        "spark_tasks": spark["tasks"],
        "task_seconds": tasks,
        "cores_run": _cores(monitor),
        "remote_topic": remote,
        "properties": settings,
        "log": str(job.work_dir / f"{name}.err"),
    }


def _task_durations(events: Path) -> list[float]:
    """Each copy task's run time (launch to finish), from Spark's event log."""
    import json

    out: list[float] = []
    for path in events.rglob("events_*"):
        for line in path.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event.get("Event") == "SparkListenerTaskEnd":
                info = event["Task Info"]
                out.append(round((info["Finish Time"] - info["Launch Time"]) / 1000, 2))
    return sorted(out)


def run_mm2(job: Job, name: str, alias: str, runtime: KafkaRuntime) -> dict[str, Any]:
    """MM2 dedicated mode with exactly-once; done when its committed offsets reach every partition's end."""
    work = job.work_dir / name
    work.mkdir()
    settings = {
        **base_properties(job, alias),
        "target.exactly.once.source.support": "enabled",
        f"{alias}.consumer.isolation.level": "read_committed",
        # Start-up only: Connect scans the whole classpath for plugins otherwise (over a minute here).
        "plugin.discovery": "service_load",
        "target.plugin.discovery": "service_load",
    }
    config = work / "mm2.properties"
    config.write_text(properties_text(settings))
    remote, records = f"{alias}.{job.topic}", sum(job.ends)
    wanted = {(job.topic, p): end - 1 for p, end in enumerate(job.ends)}
    mirror_maker = MirrorMaker(runtime, config, work, jvm_flags=MM2_JVM_FLAGS)
    sampler = EndOffsetSampler(job.target, remote, len(job.ends), records)
    written = EndOffsetSampler(job.target, remote, len(job.ends), records, isolation="read_uncommitted")
    started_wall, started = time.time(), time.monotonic()
    mirror_maker.start()
    try:
        with sampler, written, TreeMonitor(mirror_maker.pid, watch=job.broker_pids) as monitor:
            while True:
                mirror_maker.check_running()
                offsets = connect_offsets(job.target, alias)
                if all(offsets.get(tp) == o for tp, o in wanted.items()):
                    break
                if time.monotonic() - started > MM2_COPY_TIMEOUT_S:
                    raise TimeoutError(
                        f"{name}: offsets {offsets} after {MM2_COPY_TIMEOUT_S} s; {mirror_maker.log_path}"
                    )
                time.sleep(0.5)  # poll interval of the completion check (MM2 is a service: it never exits)
            wall = time.monotonic() - started
    finally:
        code = mirror_maker.stop()
    steady = sampler.slope()
    if steady["t10_wall"] is not None:
        steady["cores_steady"] = _cores(monitor, steady["t10_wall"], steady["t90_wall"])
    return {
        **steady,
        **visible_rate(written.samples, sampler.samples, records),
        "written_records_per_s": written.slope()["steady_records_per_s"],
        "end_offset_samples": sampler.samples,
        "started_wall": started_wall,
        "wall_s": wall,
        "exit_code": code,
        "peak_rss_mb": monitor.peak_rss / 1e6,
        "cpu_s": sum(monitor.series[-1].tree.values()),
        "cores_run": _cores(monitor),
        "remote_topic": remote,
        "properties": settings,
        "jvm_flags": list(MM2_JVM_FLAGS),
        "log": str(mirror_maker.log_path),
        "transactional_ids_in_log": sorted(
            set(re.findall(r"transactionalId=([^,\]\s]+)", _read(mirror_maker.log_path)))
        ),
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def markers(target: str, remote: str, ends: list[int]) -> int:
    """Offsets on the target that hold no record: commit and abort markers (and aborted records)."""
    consumer = Consumer(consumer_config(target, **{"isolation.level": "read_uncommitted"}))
    try:
        log_end = sum(
            consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=30, cached=False)[1]
            for p in range(len(ends))
        )
    finally:
        consumer.close()
    return log_end - sum(ends)


def transactional_ids(target: str, prefix: str) -> dict[str, str]:
    """The target's transactional.ids starting with ``prefix`` and their state (ListTransactions on every
    broker, kafka-python's admin client)."""
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

    admin = KafkaAdminClient(bootstrap_servers=target, request_timeout_ms=30_000)
    try:
        listed = admin.list_transactions()
    finally:
        admin.close()
    return {
        t.transactional_id: t.state.name
        for listings in listed.values()
        for t in listings
        if t.transactional_id.startswith(prefix)
    }

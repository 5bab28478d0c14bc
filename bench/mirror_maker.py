"""Apache Kafka's MirrorMaker 2 (dedicated mode) as a benchmark contender, on the same brokers as the others.

MM2 is a service: it never exits once it has copied a topic. So it runs under the same TreeMonitor as the
other contenders while this process samples the target's end offsets; the copy is timed from the first
record seen on the target to the moment every partition ends where the source does (exact end offsets,
read through the Fetch high watermark), and then MM2 is stopped with SIGTERM.

Between those two points the end offsets come from ListOffsets LATEST, which tansu answers with "base offset
of the newest batch + 1" (docs/test-broker.md, *ListOffsets*): it lags by at most one produce batch per
partition, so the curve is slightly pessimistic while records flow and exact at the end. The curve gives the
steady rate the same way as the loop's: the middle 80% of the records.

Tuning (docs/performance.md lists it with the reasons): MM2 replicates records with the Connect worker's
producer, configured by ``target.producer.*``; the source consumer of its tasks by ``source.consumer.*``.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.contenders import Job, _cores
from bench.loop import middle_rate
from bench.proctree import TreeMonitor
from tests.harness.kafka_harness import consumer_config, end_offsets
from tests.harness.mirror_maker import MirrorMaker, properties_text
from tests.harness.real_kafka import KafkaRuntime

# A throughput JVM, not the tests' fast-starting one: C2 JIT and G1, with the heap connect-mirror-maker.sh
# would give it (-Xmx2G), smaller at the start.
MM2_JVM_FLAGS = ("-Xms512m", "-Xmx2g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")
COPY_TIMEOUT_S = 600.0
SAMPLE_S = 0.1


def mm2_properties(job: Job, partitions: int) -> dict[str, str]:
    """MM2's file for this run: one flow, tuned for throughput (see docs/performance.md)."""
    return tuned_properties(job.source, job.target, job.topic, tasks=partitions)


def tuned_properties(source: str, target: str, topic: str, tasks: int) -> dict[str, str]:
    """One flow ``source->target`` of ``topic`` with ``tasks`` tasks and make bench's client tuning."""
    return {
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "source->target.topics": topic,
        "target->source.emit.heartbeats.enabled": "false",  # no heartbeats-only herder writing to the source
        # Connect scans the whole classpath for plugins by default (over a minute on a busy 2-core machine);
        # every plugin on it has a ServiceLoader manifest, as MM2's start-up warning says.
        # The top-level key serves MirrorMaker's own plugin loading, the cluster-level one the herder's worker.
        "plugin.discovery": "service_load",
        "target.plugin.discovery": "service_load",
        # Each rebalance of the herder's worker group (three before the tasks run) takes a JoinGroup, which tansu
        # holds for session.timeout.ms / 2 (docs/test-broker.md, *Consumer groups*): 5 s at Connect's default of 10 s.
        "target.session.timeout.ms": "3000",
        "target.heartbeat.interval.ms": "1000",
        "tasks.max": str(tasks),  # make bench: one task per partition; MM2 spreads partitions over tasks
        # single-broker clusters
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        # Connect commits source offsets every interval (worker key, so on the target cluster); the loop
        # commits every second, so MM2 does too.
        "target.offset.flush.interval.ms": "1000",
        # the worker producer that writes replicated records: large batches, same guarantees as the loop
        "target.producer.linger.ms": "10",
        "target.producer.batch.size": "1000000",
        "target.producer.buffer.memory": "268435456",
        "target.producer.compression.type": "none",
        "target.producer.acks": "all",
        "target.producer.enable.idempotence": "true",
        "target.producer.max.in.flight.requests.per.connection": "5",
        "target.producer.max.request.size": "10485760",
        # the replication consumer: big fetches, big polls
        "source.consumer.fetch.min.bytes": "1",
        "source.consumer.fetch.max.wait.ms": "100",
        "source.consumer.max.poll.records": "10000",
        "source.consumer.max.partition.fetch.bytes": "4194304",
        "source.consumer.fetch.max.bytes": "67108864",
        "source.consumer.receive.buffer.bytes": "1048576",
    }


def _latest(consumer: Consumer, topic: str, partitions: int) -> int:
    """Sum of ListOffsets LATEST over the partitions (0 while the topic does not exist yet)."""
    total = 0
    for p in range(partitions):
        try:
            total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
        except KafkaException:  # the remote topic appears only once MM2 has created it
            return 0
    return max(total, 0)


def run_mirror_maker(job: Job, contender: str = "mm2") -> dict[str, Any]:
    """Start MM2, sample the remote topic until it is complete, stop MM2; figures like the other contenders."""
    name = f"{contender}-{job.label}"
    work = job.work_dir / name
    work.mkdir()
    settings = mm2_properties(job, len(job.ends))
    config = work / "mm2.properties"
    config.write_text(properties_text(settings))
    remote, records, partitions = f"source.{job.topic}", sum(job.ends), len(job.ends)
    wanted = dict(enumerate(job.ends))
    mirror_maker = MirrorMaker(KafkaRuntime.locate(), config, work, jvm_flags=MM2_JVM_FLAGS)
    probe = Consumer(consumer_config(job.target))
    samples: list[tuple[float, int]] = []
    started_wall, started = time.time(), time.monotonic()
    mirror_maker.start()
    try:
        with TreeMonitor(mirror_maker.pid, watch=job.broker_pids) as monitor:
            first, done = 0.0, 0.0
            deadline = started + COPY_TIMEOUT_S
            while not done:
                mirror_maker.check_running()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name}: not complete after {COPY_TIMEOUT_S} s; log {mirror_maker.log_path}")
                now, seen = time.monotonic(), _latest(probe, remote, partitions)
                if seen and not first:
                    first = now
                if first:
                    samples.append((now - first, seen))
                # The exact check costs a consumer per call: only once LATEST is within a batch of the end.
                if seen and seen >= records - partitions * 20_000 and end_offsets(job.target, remote) == wanted:
                    done = time.monotonic()
                    samples.append((done - first, records))
                else:
                    time.sleep(SAMPLE_S)  # sampling interval of the progress curve
            copied_wall = time.time()
            code = mirror_maker.stop()
            stop_s = time.monotonic() - done
    finally:
        probe.close()
        mirror_maker.stop()
    copy_s = done - first
    return {
        "contender": contender,
        "remote_topic": remote,
        "records": records,
        "bytes": records * job.value_bytes,
        "startup_s": first - started,
        "copy_s": copy_s,
        "records_per_s": records / copy_s,
        "mid80_records_per_s": middle_rate(samples, records),
        "wall_s": done - started,
        "shutdown_s": stop_s,
        "exit_code": code,
        "started_wall": started_wall,
        "curve": samples[:: max(1, len(samples) // 50)],
        "properties": settings,
        "jvm_flags": list(MM2_JVM_FLAGS),
        "peak_rss_mb": monitor.peak_rss / 1e6,
        "peak_pss_mb": monitor.peak_pss / 1e6,
        "cpu_s": sum(monitor.series[-1].tree.values()),
        "cores_run": _cores(monitor),
        "cores_copy": _cores(monitor, copied_wall - copy_s, copied_wall),
    }


def ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per size, from the same run: MM2's copy and steady rates over the loop's, and each mm2py's over MM2's."""
    out: dict[str, dict[str, float]] = {}
    for mm2 in (r for r in runs if r["contender"] == "mm2"):
        size = mm2["size"]
        for other in (r for r in runs if r["size"] == size and r["contender"] != "mm2"):
            # mm2py's results carry the 10-90% slope as steady_records_per_s; the loop's as mid80.
            steady = (
                other.get("steady_records_per_s") or other.get("mid80_records_per_s") or other.get("warm_records_per_s")
            )
            key = (
                f"mm2/{other['contender']} {size}"
                if other["contender"].startswith("loop")
                else f"{other['contender']}/mm2 {size}"
            )
            mine, theirs = mm2["records_per_s"], other["records_per_s"]
            mine_steady, theirs_steady = mm2["mid80_records_per_s"], steady
            flip = not other["contender"].startswith("loop")
            if flip:
                mine, theirs, mine_steady, theirs_steady = theirs, mine, theirs_steady, mine_steady
            out[key] = {
                "copy": mine / theirs,
                "steady": (mine_steady or 0.0) / theirs_steady if theirs_steady else 0.0,
                "wall": (other["wall_s"] / mm2["wall_s"]) if not flip else mm2["wall_s"] / other["wall_s"],
            }
    return out


def render_ratios(out: dict[str, dict[str, float]]) -> str:
    return "\n".join(
        f"{name}: copy rate {v['copy']:.2f}x, steady {v['steady']:.2f}x, end to end {v['wall']:.2f}x"
        for name, v in out.items()
    )

"""What a continuous run costs while nothing arrives, next to MirrorMaker 2 idle on the same clusters, and how soon
the first record after the quiet spell is on the target.

Why: a DR replica spends most of its life with quiet partitions, and six flows share the cores of one node; a
follow loop that polls hard would eat them. Seven one-node Apache Kafka clusters (``dc1``..``dc6`` and ``target``);
each source has ``--partitions`` partitions (134: 804 over the six flows) of a topic per contender, so both
contenders find the same brokers and the same number of partitions. One contender at a time:

1. it starts with six flows ``dcN->target`` (DefaultReplicationPolicy, heartbeats on for the six flows only);
2. one record per partition is produced and awaited on the target: every flow copies;
3. ``--idle-seconds`` (120) without traffic: the CPU seconds of its whole process tree (sampled from /proc by this
   process, which is not in the tree) and its wake-ups (voluntary and involuntary context switches summed over
   every thread of the tree);
4. one record into one partition of each source, and how long after its CreateTime a consumer of the target
   (``fetch.wait.max.ms`` 10) reads it;
5. SIGTERM.

mm2py runs as ``mm2py run`` (continuous, ``local[*]``: one task slot per flow); MirrorMaker 2 4.3.1 in dedicated
mode with ``make bench``'s client tuning and ``tasks.max = 1``, MM2's default (fewer tasks cost it less idle CPU).

    python -m bench.idle [--idle-seconds 120] [--partitions 134] [--contenders mm2py,mm2]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench.contenders import REPO
from bench.mirror_maker import MM2_JVM_FLAGS
from bench.proctree import TreeMonitor, descendants
from tests.harness.kafka_harness import consumer_config
from tests.harness.mirror_maker import MirrorMaker, properties_text
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

SOURCES = [f"dc{k}" for k in range(1, 7)]
PROBE_PARTITION = 7  # the partition of each source that gets the record after the idle spell
MM2_TUNING = {  # make bench's client tuning of MM2 (bench/mirror_maker.py), for every source and the target
    "target.producer.linger.ms": "10",
    "target.producer.batch.size": "1000000",
    "target.producer.acks": "all",
    "target.producer.enable.idempotence": "true",
    "target.offset.flush.interval.ms": "1000",
    "plugin.discovery": "service_load",
    "target.plugin.discovery": "service_load",
    # the Connect herders' own topics on one-node clusters
    "config.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "offset.storage.partitions": "5",
}


def flows_config(clusters: dict[str, KafkaCluster], topic: str) -> dict[str, str]:
    """The keys both contenders read: six flows into ``target``, heartbeats for those flows only (MM2 would
    otherwise run a heartbeats-only herder for each of the other 36 pairs of clusters)."""
    settings = {"clusters": ", ".join([*SOURCES, "target"]), "topics": topic, "emit.heartbeats.enabled": "false"}
    for name, cluster in clusters.items():
        settings[f"{name}.bootstrap.servers"] = cluster.bootstrap
    for source in SOURCES:
        settings[f"{source}->target.enabled"] = "true"
        settings[f"{source}->target.emit.heartbeats.enabled"] = "true"
    for key in ("", "checkpoints.topic.", "heartbeats.topic.", "offset-syncs.topic.", "offset.storage."):
        settings[f"{key}replication.factor"] = "1"
    return settings


def wake_ups(root: int) -> int:
    """Context switches (voluntary + involuntary) so far of every thread of the tree under ``root``."""
    total = 0
    for proc in descendants(root):
        for status in Path(f"/proc/{proc.pid}/task").glob("*/status"):
            try:
                text = status.read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            for line in text.splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def tree_cpu(monitor: TreeMonitor) -> float:
    monitor.sample(with_pss=False)
    return sum(monitor.series[-1].tree.values())


def produce_one_each(clusters: dict[str, KafkaCluster], topic: str, partitions: list[int]) -> None:
    for source in SOURCES:
        producer = Producer({"bootstrap.servers": clusters[source].bootstrap, "linger.ms": 0, "acks": "all"})
        for p in partitions:
            producer.produce(topic, f"{source}-{p}".encode(), partition=p)
        assert producer.flush(60) == 0


def remote_ends(consumer: Consumer, topic: str, partitions: int) -> int:
    """The sum of the remote topics' end offsets; 0 until the contender has created all of them."""
    remotes = [f"{source}.{topic}" for source in SOURCES]
    if not set(remotes) <= set(consumer.list_topics(timeout=10).topics):  # also refreshes the client's metadata
        return 0
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=10)[1]
            for remote in remotes
            for p in range(partitions)
        )
    except KafkaException:  # a topic just created: its leader is not known everywhere yet
        return 0


def first_after_idle(clusters: dict[str, KafkaCluster], topic: str) -> dict[str, float]:
    """One record into ``PROBE_PARTITION`` of each source; seconds from its CreateTime to its read on the
    target, per source."""
    reader = Consumer(consumer_config(clusters["target"].bootstrap, **{"fetch.wait.max.ms": 10}))
    assigned = []
    for source in SOURCES:
        tp = TopicPartition(f"{source}.{topic}", PROBE_PARTITION)
        tp.offset = reader.get_watermark_offsets(tp, timeout=10)[1]
        assigned.append(tp)
    reader.assign(assigned)
    reader.consume(1, timeout=1.0)  # the fetch sessions are open before the records are sent
    produce_one_each(clusters, topic, [PROBE_PARTITION])
    seen: dict[str, float] = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(SOURCES) and time.monotonic() < deadline:
        for msg in reader.consume(10, timeout=0.05):
            if msg.error() is None:
                seen[msg.topic().split(".", 1)[0]] = round(time.time() - msg.timestamp()[1] / 1000, 3)
    reader.close()
    return seen


def measure(
    name: str,
    pid: int,
    running: Callable[[], None],
    clusters: dict[str, KafkaCluster],
    topic: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    probe = Consumer(consumer_config(clusters["target"].bootstrap))
    produce_one_each(clusters, topic, list(range(args.partitions)))
    want = len(SOURCES) * args.partitions

    def copied() -> bool:
        running()
        return remote_ends(probe, topic, args.partitions) >= want

    started = time.monotonic()
    poll_until(copied, 600, f"{name}: one record per partition on the target")
    ready_s = time.monotonic() - started
    probe.close()
    with TreeMonitor(pid, interval_s=1.0) as monitor:
        cpu0, wake0, t0, wall0 = tree_cpu(monitor), wake_ups(pid), time.monotonic(), time.time()
        time.sleep(args.idle_seconds)  # the idle spell under measure, not a synchronisation
        cpu1, wake1, t1, wall1 = tree_cpu(monitor), wake_ups(pid), time.monotonic(), time.time()
        by_role = {role: round(cores, 4) for role, cores in monitor.cores(wall0, wall1).items() if role != "others"}
    running()
    seconds = t1 - t0
    return {
        "contender": name,
        "ready_s": round(ready_s, 1),
        "idle_s": round(seconds, 1),
        "idle_cpu_s": round(cpu1 - cpu0, 2),
        "idle_cores": round((cpu1 - cpu0) / seconds, 4),
        "wake_ups_per_s": round((wake1 - wake0) / seconds, 1),
        "idle_cores_by_role": by_role,  # main: the driver (mm2py) or MM2's JVM; jvm: Spark's; python workers
        "first_record_after_idle_s": first_after_idle(clusters, topic),
    }


def run_mm2py(work: Path, clusters: dict[str, KafkaCluster], args: argparse.Namespace) -> dict[str, Any]:
    topic = "idle_mm2py"
    config = work / "mm2py.properties"
    config.write_text(properties_text(flows_config(clusters, topic)))
    log = (work / "mm2py.log").open("w")
    run = subprocess.Popen([sys.executable, "-m", "mm2py", "run", str(config)], cwd=REPO, stdout=log, stderr=log)

    def running() -> None:
        if run.poll() is not None:
            raise RuntimeError(f"mm2py exited with {run.returncode}; log {work / 'mm2py.log'}")

    try:
        result = measure("mm2py", run.pid, running, clusters, topic, args)
    finally:
        run.send_signal(signal.SIGTERM)
        result_code = run.wait(120)
    return {**result, "exit_code": result_code}


def run_mm2(work: Path, clusters: dict[str, KafkaCluster], args: argparse.Namespace) -> dict[str, Any]:
    topic = "idle_mm2"
    config = work / "mm2.properties"
    config.write_text(properties_text({**flows_config(clusters, topic), **MM2_TUNING}))
    mm2 = MirrorMaker(KafkaRuntime.locate(), config, work, jvm_flags=MM2_JVM_FLAGS)
    mm2.start()
    try:
        result = measure("mm2", mm2.pid, mm2.check_running, clusters, topic, args)
    finally:
        code = mm2.stop()
    return {**result, "exit_code": code}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-seconds", type=float, default=120.0)
    parser.add_argument("--partitions", type=int, default=134, help="partitions of each source's topic")
    parser.add_argument("--contenders", default="mm2py,mm2")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mm2py-idle-"))
    runtime = KafkaRuntime.locate()
    results = []
    with ExitStack() as stack:
        clusters = {
            name: stack.enter_context(KafkaCluster(work / name, 1, runtime=runtime)) for name in [*SOURCES, "target"]
        }
        contenders = args.contenders.split(",")
        for source in SOURCES:
            for contender in contenders:
                clusters[source].create_topic(f"idle_{contender}", args.partitions)
        for contender in contenders:
            run = run_mm2py if contender == "mm2py" else run_mm2
            (work / contender).mkdir()
            results.append(run(work / contender, clusters, args))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)  # kept if a later contender fails
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

"""What the suite's real Kafka brokers cost in CPU: idle, and under the broker-fault module's copies, per setting.

Why: the brokers are the largest share of the suite's CPU (docs/testing.md), and their settings are chosen by the
harness (``tests/harness/real_kafka.py``) for tests, not for production. Two questions, one mode each; every
figure is the nodes' own CPU seconds (``/proc/PID/stat``) read from this process, which is outside the nodes' and
the runs' trees. Variants alternate from round to round, so the machine's drift falls on all of them alike.

``idle``: a cluster of ``--nodes`` nodes per variant (``NAME=KEY=VALUE,...``: broker settings over the harness's
own), idle for ``--seconds`` fresh, then again after ``--flows`` flows' worth of topics were created, as the
session clusters collect them over a suite (per flow: MM2's offsets topic of 5 partitions, its offset-syncs and
checkpoints topics, compacted, and an 8-partition data topic). Reported as % of one core per node.

``jit``: the fault module's own clusters (``tests/harness/broker_faults.fault_cluster``, two of three nodes) per
variant (``NAME=JVM_OPTION,...``, added after the harness's JVM flags: the last one wins): start them, load one
200,000-record dataset (``Bed.dataset``), then copy it ``--copies`` times with ``python -m mm2py run FILE --once``
into new flows; each run must exit 0. Reported as CPU seconds of the six nodes per step.

    python -m bench.broker_costs idle [--rounds 1] [--nodes 1] [--flows 150] [--seconds 20] [--variant ...]...
    python -m bench.broker_costs jit [--rounds 2] [--copies 3] [--variant ...]...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.proctree import read_stat
from tests.harness.broker_faults import fault_cluster
from tests.harness.fault_bed import Bed
from tests.harness.kafka_harness import client_config
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

RECORDS = 200_000  # tests/realkafka/test_broker_failures.RECORDS
IDLE_VARIANTS = [
    "harness=",
    "cleaner every 200 ms=log.cleaner.backoff.ms=200",
    "Kafka's default, 15 s=log.cleaner.backoff.ms=15000",
]
JIT_VARIANTS = ["C1 (harness)=", "C2 (tiered to level 4)=-XX:TieredStopAtLevel=4"]
COMPACTED = {"cleanup.policy": "compact"}


def named(text: str) -> tuple[str, list[str]]:
    name, _, items = text.partition("=")
    return name, list(filter(None, items.split(",")))


def nodes_cpu_s(clusters: list[KafkaCluster]) -> float:
    stats = [read_stat(node.pid) for cluster in clusters for node in cluster.nodes]
    return sum(stat.cpu_s for stat in stats if stat is not None)


def idle_share(cluster: KafkaCluster, seconds: float) -> float:
    """% of one core per node over ``seconds`` of idling."""
    before = nodes_cpu_s([cluster])
    time.sleep(seconds)
    return round((nodes_cpu_s([cluster]) - before) / seconds * 100 / cluster.size, 2)


def flows_topics(cluster: KafkaCluster, flows: int) -> int:
    """Create ``flows`` flows' worth of topics; returns how many partitions that made."""
    replicas = min(3, cluster.size)
    topics = [
        topic
        for n in range(flows)
        for topic in (
            NewTopic(f"mm2-offsets.bench{n}.internal", 5, replicas, config=COMPACTED),
            NewTopic(f"mm2-offset-syncs.bench{n}.internal", 1, replicas, config=COMPACTED),
            NewTopic(f"bench{n}.checkpoints.internal", 1, replicas, config=COMPACTED),
            NewTopic(f"orders{n}", 8, replicas),
        )
    ]
    admin = AdminClient(client_config(cluster.bootstrap))
    for start in range(0, len(topics), 100):
        for future in admin.create_topics(topics[start : start + 100]).values():
            future.result(timeout=120)
    return sum(topic.num_partitions for topic in topics)


def idle_round(name: str, settings: list[str], work: Path, args: argparse.Namespace) -> dict[str, Any]:
    config = dict(setting.split("=", 1) for setting in settings)
    with KafkaCluster(work, args.nodes, broker_config=config) as cluster:
        time.sleep(args.settle)
        fresh = idle_share(cluster, args.seconds)
        partitions = flows_topics(cluster, args.flows)
        time.sleep(args.settle)
        used = idle_share(cluster, args.seconds)
    return {"variant": name, "nodes": args.nodes, "fresh_pct": fresh, "partitions": partitions, "with_topics_pct": used}


def jit_round(name: str, options: list[str], work: Path, args: argparse.Namespace) -> dict[str, Any]:
    runtime = KafkaRuntime.locate()
    source = fault_cluster(work / "source", runtime, jvm_options=options)
    target = fault_cluster(work / "target", runtime, jvm_options=options)
    row: dict[str, Any] = {"variant": name, "copies_cpu_s": [], "copies_wall_s": []}
    with source, target:
        clusters = [source, target]
        row["start_cpu_s"] = round(nodes_cpu_s(clusters), 1)
        bed = Bed(source, target, work)
        topic, _digest = bed.dataset(RECORDS)
        row["load_cpu_s"] = round(nodes_cpu_s(clusters) - row["start_cpu_s"], 1)
        for n in range(args.copies):
            before, started = nodes_cpu_s(clusters), time.monotonic()
            flow = bed.flow(topic, f"copy-{n}")
            command = [sys.executable, "-m", "mm2py", "run", str(flow.config), "--once"]
            run = subprocess.run(command, capture_output=True, text=True, check=False)
            if run.returncode != 0:
                raise SystemExit(f"{name}: copy {n} exited {run.returncode}:\n{run.stderr[-3000:]}")
            row["copies_wall_s"].append(round(time.monotonic() - started, 1))
            row["copies_cpu_s"].append(round(nodes_cpu_s(clusters) - before, 1))
        row["total_cpu_s"] = round(nodes_cpu_s(clusters), 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["idle", "jit"])
    parser.add_argument("--rounds", type=int, default=None, help="default: 1 (idle), 2 (jit)")
    parser.add_argument("--variant", action="append", help=f"idle: {IDLE_VARIANTS}; jit: {JIT_VARIANTS}")
    parser.add_argument("--nodes", type=int, default=1, help="idle: nodes per cluster")
    parser.add_argument("--flows", type=int, default=150, help="idle: flows' worth of topics created")
    parser.add_argument("--seconds", type=float, default=20.0, help="idle: seconds measured, each time")
    parser.add_argument("--settle", type=float, default=15.0, help="idle: seconds before each measurement")
    parser.add_argument("--copies", type=int, default=3, help="jit: --once copies of the dataset per round")
    args = parser.parse_args(argv)
    one_round: Callable[[str, list[str], Path, argparse.Namespace], dict[str, Any]]
    one_round, defaults = (idle_round, IDLE_VARIANTS) if args.mode == "idle" else (jit_round, JIT_VARIANTS)
    variants = [named(v) for v in (args.variant or defaults)]
    rounds = args.rounds if args.rounds is not None else (1 if args.mode == "idle" else 2)
    with tempfile.TemporaryDirectory(prefix="bench-broker-costs-") as tmp:
        for round_ in range(rounds):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for n, (name, items) in enumerate(order):
                row = one_round(name, items, Path(tmp) / f"round-{round_}-{n}", args)
                print(json.dumps({"mode": args.mode, "round": round_, **row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

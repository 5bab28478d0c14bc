"""A migration's initial sync in continuous mode: how fast one flow catches up a backlog, and what its copy costs,
at each ``tasks.max``.

Why: a continuous flow is followed by at most ``tasks.max`` copy tasks (MM2's key, default 1). One task costs
less CPU per record at a steady load; more catch a backlog up sooner. This measures the second half of that trade.

One one-node Apache Kafka cluster ``dc1`` holds ``--backlog-mb`` of ``VALUE_SIZE``-byte records over
``--partitions`` partitions, filled once. For each ``tasks.max`` of ``--tasks-max``, ``--rounds`` times in turn (so
that the machine's drift falls on every variant alike), a continuous ``mm2py run`` on ``--master`` copies the whole
backlog to a fresh one-node target. The target's end offsets are sampled every second in this process; the
report gives the rate from the first record on the target to the last, the mm2py process tree's CPU seconds per
GB over the same span (bench/proctree.py), and every record read back: lost, duplicated and reordered.

    python -m bench.backlog [--backlog-mb 6000] [--partitions 8] [--tasks-max 1,2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.continuous import SINGLE_NODE
from bench.proctree import TreeMonitor
from bench.throttle import TOPIC, VALUE_SIZE, Ends, check, fill, sample, start, stop
from tests.harness.mirror_maker import properties_text
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime


def config_text(dc1: KafkaCluster, target: KafkaCluster, tasks_max: int, master: str) -> str:
    return properties_text(
        {
            "clusters": "dc1, target",
            "dc1.bootstrap.servers": dc1.bootstrap,
            "target.bootstrap.servers": target.bootstrap,
            "dc1->target.enabled": "true",
            "topics": TOPIC,
            **SINGLE_NODE,
            "tasks.max": str(tasks_max),
            "mm2py.spark.master": master,
        }
    )


def catch_up(work: Path, dc1: KafkaCluster, records: int, tasks_max: int, args: argparse.Namespace) -> dict[str, Any]:
    """One continuous run copying the whole backlog to a fresh target: its rate, CPU and check."""
    target = KafkaCluster(work / "target", 1, runtime=dc1.runtime)
    target.start()
    try:
        ends = Ends(target, args.partitions)
        run = start(work, config_text(dc1, target, tasks_max, args.master), f"tasks-max-{tasks_max}")
        with TreeMonitor(run.pid) as tree:
            began = sample(ends, 600, stop_when=lambda s: s[1] > 0)[-1]
            first_wall = time.time()
            samples = sample(ends, 1800, stop_when=lambda s: s[1] >= records)
            last_wall = time.time()
            seconds, copied = samples[-1][0], samples[-1][1] - began[1]
            code = stop(run)
        ends.close()
        cores = tree.cores(first_wall, last_wall)
        tree_cores = sum(v for k, v in cores.items() if not k.startswith("watched") and k != "others")
        return {
            "tasks_max": tasks_max,
            "seconds": round(seconds, 1),
            "mb_per_s": round(copied * VALUE_SIZE / max(seconds, 1e-9) / 1e6, 1),
            "tree_cores": round(tree_cores, 2),
            "cpu_s_per_gb": round(tree_cores * seconds / (copied * VALUE_SIZE / 1e9), 1) if copied else None,
            "exit_code": code,
            "checked": check(target, f"dc1.{TOPIC}", args.partitions, records // args.partitions),
        }
    finally:
        target.stop()
        shutil.rmtree(work / "target", ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="mm2py-backlog-"))
    variants = [int(v) for v in args.tasks_max.split(",")]
    with ExitStack() as stack:
        dc1 = stack.enter_context(KafkaCluster(work / "dc1", 1, runtime=KafkaRuntime.locate()))
        dc1.create_topic(TOPIC, args.partitions)
        records = fill(dc1, args.partitions, args.backlog_mb)
        runs = []
        for round_no in range(args.rounds):
            for tasks_max in variants if round_no % 2 == 0 else reversed(variants):
                result = catch_up(work, dc1, records, tasks_max, args)
                print(json.dumps(result), flush=True)
                runs.append(result)
    shutil.rmtree(work, ignore_errors=True)
    return {"backlog_mb": args.backlog_mb, "partitions": args.partitions, "master": args.master, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog-mb", type=int, default=6000, help="dc1's backlog (2,000 MB took 5-9 s here)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks-max", default="1,2", help="the flow's tasks.max, one variant each")
    parser.add_argument("--rounds", type=int, default=2, help="each variant this often, the order reversed each round")
    parser.add_argument("--master", default="local[2]", help="mm2py's Spark master")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    text = json.dumps(run(args), indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

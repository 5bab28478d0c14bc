"""What one short ``mm2py run --once`` costs, start to exit: the run a cron job starts every few minutes.

Why: a one-shot run that copies a few records spends nearly all of its time and CPU starting and stopping (the
interpreter, the Spark driver JVM, the Python worker daemon, the clients), and a cron job pays that at every
run. Two one-node Apache Kafka clusters (``source`` and ``target``); ``orders`` has ``--partitions`` partitions.
Per round, each variant in turn: ``--records`` new records are produced, then ``python -m mm2py run FILE --once``
with the variant's ``--conf`` settings; measured from this process, which is not in the run's tree: the wall
time, and the CPU seconds of the whole tree (``RUSAGE_CHILDREN``: the driver, its JVM and the Python workers, each
waited for by its parent). After each run the target must hold every source record (end offsets compared), or
the bench stops.

Variants alternate within each round, so the machine's drift from minute to minute falls on all of them alike.
The default pair is mm2py as it is and mm2py with pyspark's own worker daemon (``spark.python.daemon.module =
pyspark.daemon``: pyspark imported from Spark's zips, as before ``engine/python_daemon.py``).

    python -m bench.short_runs [--rounds 8] [--records 100] [--variant NAME=KEY=VALUE[,KEY=VALUE]]...
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.contenders import REPO
from tests.harness.kafka_harness import end_offsets, make_records, produce
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

TOPIC = "orders"
DEFAULT_VARIANTS = ["mm2py=", "pyspark daemon=spark.python.daemon.module=pyspark.daemon"]


def variant(text: str) -> tuple[str, list[str]]:
    """``NAME=KEY=VALUE,KEY=VALUE`` as a name and its ``--conf`` arguments."""
    name, _, settings = text.partition("=")
    conf = [arg for pair in filter(None, settings.split(",")) for arg in ("--conf", pair)]
    return name, conf


def load(source: KafkaCluster, args: argparse.Namespace, sent: int) -> None:
    """``--records`` new records of 100 bytes over the topic's partitions (each load a dataset of its own)."""
    records = make_records(args.records, partitions=args.partitions, seed=sent, value_size=100, with_headers=False)
    produce(source.bootstrap, TOPIC, records)


def config(work: Path, source: KafkaCluster, target: KafkaCluster) -> Path:
    path = work / "mm2.properties"
    lines = [
        "clusters = source, target",
        f"source.bootstrap.servers = {source.bootstrap}",
        f"target.bootstrap.servers = {target.bootstrap}",
        "source->target.enabled = true",
        f"topics = {TOPIC}",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        *(
            f"{key}.replication.factor = 1"
            for key in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage")
        ),
        "replication.factor = 1",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def one_run(file: Path, conf: list[str], log: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with log.open("ab") as out:
        done = subprocess.run(
            [sys.executable, "-m", "mm2py", "run", str(file), "--once", *conf], stdout=out, stderr=out, cwd=REPO
        )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit": done.returncode, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--records", type=int, default=100, help="new records per run")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--variant", action="append", help=f"NAME=KEY=VALUE,... (default: {DEFAULT_VARIANTS})")
    args = parser.parse_args()
    variants = [variant(v) for v in (args.variant or DEFAULT_VARIANTS)]
    work = Path(tempfile.mkdtemp(prefix="mm2py-short-runs-"))
    runtime = KafkaRuntime.locate()
    source, target = (
        KafkaCluster(work / "source", 1, runtime=runtime),
        KafkaCluster(work / "target", 1, runtime=runtime),
    )
    runs: list[dict[str, Any]] = []
    sent = 0
    try:
        source.start()
        target.start()
        source.create_topic(TOPIC, args.partitions)
        file = config(work, source, target)
        load(source, args, sent)
        sent += args.records
        print(json.dumps({"warm-up": one_run(file, [], work / "warm-up.log")}), file=sys.stderr)
        for round_ in range(args.rounds):
            for name, conf in variants:
                load(source, args, sent)
                sent += args.records
                run = {"round": round_, "variant": name, **one_run(file, conf, work / f"{name}.log")}
                copied = end_offsets(target.bootstrap, TOPIC) == end_offsets(source.bootstrap, TOPIC)
                run["all_copied"] = copied
                runs.append(run)
                print(json.dumps(run), file=sys.stderr)
                if run["exit"] != 0 or not copied:
                    raise SystemExit(f"run failed or left records behind: {run} (log: {work / f'{name}.log'})")
    finally:
        source.stop()
        target.stop()
    summary = {
        name: {
            "runs": len(mine := [r for r in runs if r["variant"] == name]),
            "wall_s_median": statistics.median(r["wall_s"] for r in mine),
            "cpu_s_median": statistics.median(r["cpu_s"] for r in mine),
        }
        for name, _ in variants
    }
    out = REPO / "bench-results" / f"short-runs-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "runs": runs, "summary": summary}, indent=1))
    print(f"{'variant':<20} {'runs':>5} {'wall s (median)':>16} {'CPU s (median)':>15}")
    for name, row in summary.items():
        print(f"{name:<20} {row['runs']:>5} {row['wall_s_median']:>16.2f} {row['cpu_s_median']:>15.2f}")
    print(f"written: {out}")


if __name__ == "__main__":
    main()

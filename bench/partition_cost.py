"""The partition-count cost of ``mm2py run --once``: ~20,800 small records over 800 partitions vs over 8.

Why: every partition costs something the records do not (a range, a place in a Fetch and a Produce, a
progress record, offset syncs, and once a Spark task each); the goal is that 800 partitions (200 topics x
4) take at most 1.5x the first ``--once`` wall time of 8. Each case copies into a fresh target broker.

    python -m bench.partition_cost [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.contenders import MM2PY_CONFIG, REPO
from bench.load import load_partitions
from tests.harness.kafka_harness import TansuBroker, create_topic, end_offsets, find_tansu_binary, stop_brokers

RECORDS = 20_800
CASES = {"8 partitions": (1, 8), "800 partitions": (200, 4)}  # topics, partitions per topic


def run_case(binary: Path, work: Path, label: str, topics: int, partitions: int, master: str) -> dict[str, Any]:
    source = TansuBroker(f"cost-src-{topics}", binary, log_dir=work)
    target = TansuBroker(f"cost-dst-{topics}", binary, log_dir=work)
    try:
        source.start()
        target.start()
        per_partition = RECORDS // (topics * partitions)
        names = [f"cost{topics}-{i:03d}" for i in range(topics)]
        for name in names:
            create_topic(source.bootstrap, name, partitions)
            load_partitions(source.bootstrap, name, list(range(partitions)), per_partition, 100)
        config = work / f"{label.replace(' ', '-')}.properties"
        config.write_text(
            MM2PY_CONFIG.format(
                source=source.bootstrap,
                target=target.bootstrap,
                topic=f"cost{topics}-.*",
                master=master,
                extra="source->target.consumer.poll.timeout.ms = 100\n",
            )
        )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "mm2py", "run", str(config), "--once"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"{label}: mm2py exited {done.returncode}: {done.stderr[-2000:]}")
        copied = sum(sum(end_offsets(target.bootstrap, f"source.{n}").values()) for n in names)
        if copied != per_partition * topics * partitions:
            raise RuntimeError(
                f"{label}: {copied} records on the target, {per_partition * topics * partitions} expected"
            )
        summary = [line for line in done.stdout.splitlines() if " copied=" in line]
        return {"wall_s": wall, "records": copied, "summary": summary[-1] if summary else ""}
    finally:
        stop_brokers([source, target])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    binary, work = find_tansu_binary(), Path(tempfile.mkdtemp(prefix="mm2py-cost-"))
    results = {label: run_case(binary, work, label, t, p, args.master) for label, (t, p) in CASES.items()}
    ratio = results["800 partitions"]["wall_s"] / results["8 partitions"]["wall_s"]
    for label, r in results.items():
        print(f"{label}: {r['records']:,} records, first --once {r['wall_s']:.1f} s wall; {r['summary']}")
    print(f"800/8 wall-time ratio {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / time.strftime("partition-cost-%Y%m%d-%H%M%S.json")).write_text(
        json.dumps({"results": results, "ratio": ratio}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()

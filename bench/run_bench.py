"""``make bench``: mm2py run --once against a tuned single-process consume->produce loop, same brokers.

Starts a source tansu broker, loads ``bench-100b`` and ``bench-1k`` (8 partitions each), then for each value
size runs the loop and ``mm2py run --once``, each into a fresh target broker (like production: source and
target are separate clusters; a fresh one per run means nothing is left over from the previous contender).
Every copy is verified (end offset of every partition, and its last record) before anything is reported.
The table goes to stdout, everything measured to ``bench-results/bench-<time>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench.contenders import REPO, Job, environment, run_loop, run_mm2py
from bench.report import render_table, verdict

# The test harness starts brokers and reads exact end offsets (run from the repository root: make bench).
from tests.harness.kafka_harness import (
    TansuBroker,
    consumer_config,
    create_topic,
    end_offsets,
    find_tansu_binary,
    stop_brokers,
)

PARTITIONS = 8
SIZES = {"100b": 100, "1k": 1024}
# User-level tuning for this workload (docs/performance.md): a range whose last consume() returns fewer than
# 10,000 records waits consumer.poll.timeout.ms (MM2 default 1000) before it ends.
TUNED = "source->target.consumer.poll.timeout.ms = 100\n"
# The two copy paths, each tuned as above (mm2py.copy.mode; auto picks batch for this flow).
PATHS = {"mm2py-record": TUNED + "mm2py.copy.mode = record\n", "mm2py-batch": TUNED + "mm2py.copy.mode = batch\n"}
LOADERS = 2  # producer processes: one per core feeds tansu fastest (docs/test-broker.md, *Throughput*)


def load(bootstrap: str, topic: str, per_partition: int, size: int, headers: int, work_dir: Path) -> dict[str, Any]:
    """Fill ``topic`` with ``LOADERS`` processes, each owning a slice of the partitions."""
    create_topic(bootstrap, topic, PARTITIONS)
    started = time.monotonic()
    slices = [list(range(PARTITIONS))[i::LOADERS] for i in range(LOADERS)]
    with contextlib.ExitStack() as files:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.load",
                    "--bootstrap",
                    bootstrap,
                    "--topic",
                    topic,
                    "--partitions",
                    ",".join(map(str, s)),
                    "--count",
                    str(per_partition),
                    "--size",
                    str(size),
                    "--headers",
                    str(headers),
                ],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=files.enter_context((work_dir / f"load-{topic}-{i}.err").open("wb")),
            )
            for i, s in enumerate(slices)
        ]
        for proc in procs:
            if proc.wait() != 0:
                raise RuntimeError(f"loading {topic} failed; see {work_dir}/load-{topic}-*.err")
    seconds = time.monotonic() - started
    ends = end_offsets(bootstrap, topic)
    if ends != dict.fromkeys(range(PARTITIONS), per_partition):
        raise RuntimeError(f"{topic}: loaded {ends}, expected {per_partition} per partition")
    listed = list_offsets_latest(bootstrap, topic)
    # What `mm2py run --once` will see; the loaders' single-record tail batches make it exact.
    if listed != ends:
        raise RuntimeError(f"{topic}: ListOffsets LATEST says {listed}, the log ends at {ends}")
    return {
        "records": per_partition * PARTITIONS,
        "seconds": seconds,
        "records_per_s": per_partition * PARTITIONS / seconds,
    }


def list_offsets_latest(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def last_records(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, tuple[Any, ...]]:
    """(key, value, headers, timestamp) of the last record of every partition."""
    consumer = Consumer(consumer_config(bootstrap, **{"isolation.level": "read_uncommitted"}))
    found: dict[int, tuple[Any, ...]] = {}
    try:
        consumer.assign([TopicPartition(topic, p, end - 1) for p, end in ends.items()])
        deadline = time.monotonic() + 30
        while len(found) < len(ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if (err := msg.error()) is not None and err.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"reading {topic}: {err.str()}")
            partition, offset = msg.partition(), msg.offset()
            if err is None and partition is not None and offset == ends[partition] - 1:
                found[partition] = (msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])
    finally:
        consumer.close()
    return found


def verify(job: Job, result: dict[str, Any], expected_last: dict[int, tuple[Any, ...]]) -> None:
    """The copy is complete: every partition ends where the source does and with the same last record."""
    expected = dict(enumerate(job.ends))
    got = end_offsets(job.target, result["remote_topic"])
    if got != expected:
        raise RuntimeError(f"{result['contender']} {job.label}: target ends {got}, source ends {expected}")
    if last_records(job.target, result["remote_topic"], expected) != expected_last:
        raise RuntimeError(f"{result['contender']} {job.label}: last records differ from the source's")
    result["verified"] = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000, help="records per topic (default 2,000,000)")
    parser.add_argument("--headers", type=int, default=2, help="headers per record (default 2)")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"value sizes to run, of {', '.join(SIZES)}")
    parser.add_argument("--master", default="local[2]", help="Spark master for mm2py (default local[2])")
    parser.add_argument("--mm2py-properties", default="", help="extra lines for mm2py's properties file")
    parser.add_argument(
        "--contenders",
        default="loop,mm2py-record,mm2py-batch,mm2",
        help="comma-separated, of loop, loop-reports, mm2py, mm2py-tuned, mm2py-record, mm2py-batch, "
        "mm2 (Kafka's MirrorMaker 2)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    args = parser.parse_args()
    per_partition = -(-args.records // PARTITIONS)
    work_dir = Path(tempfile.mkdtemp(prefix="mm2py-bench-"))
    binary = find_tansu_binary()
    results: dict[str, Any] = {
        "environment_before": environment(),
        "partitions": PARTITIONS,
        "records_per_topic": per_partition * PARTITIONS,
        "headers_per_record": args.headers,
        "work_dir": str(work_dir),
        "load": {},
        "runs": [],
    }
    print(
        f"mm2py bench: {per_partition * PARTITIONS:,} records per topic, {PARTITIONS} partitions, "
        f"{args.headers} headers per record, work dir "
        f"{work_dir}, load average {results['environment_before']['loadavg']}",
        flush=True,
    )
    source = TansuBroker("bench-source", binary, log_dir=work_dir)
    brokers = [source]
    try:
        source.start()
        labels = [s.strip() for s in args.sizes.split(",") if s.strip()]
        for label in labels:
            loaded = load(source.bootstrap, f"bench-{label}", per_partition, SIZES[label], args.headers, work_dir)
            results["load"][label] = loaded
            print(f"loaded bench-{label}: {loaded['records_per_s']:,.0f} records/s", flush=True)
        for label in labels:
            topic = f"bench-{label}"
            ends = [per_partition] * PARTITIONS
            expected_last = last_records(source.bootstrap, topic, dict(enumerate(ends)))
            for contender in args.contenders.split(","):
                target = TansuBroker(f"bench-target-{contender}-{label}", binary, log_dir=work_dir)
                brokers.append(target)
                target.start()
                job = Job(
                    label,
                    topic,
                    ends,
                    SIZES[label],
                    source.bootstrap,
                    target.bootstrap,
                    (source.pid, target.pid),
                    work_dir,
                )
                if contender == "mm2py":
                    result = run_mm2py(job, contender, args.master, args.mm2py_properties)
                elif contender == "mm2py-tuned":
                    result = run_mm2py(job, contender, args.master, TUNED + args.mm2py_properties)
                elif contender == "mm2":
                    from bench.mirror_maker import run_mirror_maker  # the tests' MM2 harness, only when asked

                    result = run_mirror_maker(job)
                elif contender in PATHS:
                    result = run_mm2py(job, contender, args.master, PATHS[contender] + args.mm2py_properties)
                else:
                    create_topic(target.bootstrap, topic, PARTITIONS)
                    result = run_loop(job, per_record_reports=contender == "loop-reports")
                    result["contender"] = contender
                verify(job, result, expected_last)
                result["size"] = label
                result["mb_per_s"] = result["bytes"] / result["copy_s"] / 1e6
                results["runs"].append(result)
                print(f"{contender} {label}: {result['records_per_s']:,.0f} records/s, verified", flush=True)
                stop_brokers([target])  # frees its memory (tansu keeps every record in RAM)
                brokers.remove(target)
    finally:
        stop_brokers(brokers)
    results["environment_after"] = environment()
    results["verdict"] = verdict(results["runs"])
    print(render_table(results), flush=True)
    if any(r["contender"] == "mm2" for r in results["runs"]):
        from bench.mirror_maker import ratios, render_ratios

        results["mm2_ratios"] = ratios(results["runs"])
        print(render_ratios(results["mm2_ratios"]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / time.strftime("bench-%Y%m%d-%H%M%S.json")
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {path}")


if __name__ == "__main__":
    main()

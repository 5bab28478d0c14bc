"""Continuous mode's latency: records at a steady rate over many partitions of one or more sources, source
timestamp -> on the target, every record checked.

Why: a DR replica's ``replication-latency-ms`` alert pages on the worst seconds, not the average, and the worst
seconds of a copier that starts jobs are right after an idle spell. So the load runs after ``--idle-seconds`` of
quiet (60 s: longer than any timer of the copier), the report has the p99 of every ``--window-seconds`` window
of send time, and the goal (``--goal-p99-ms``) must hold over the whole run and in every window, with no record
missing. ``--sources N`` merges N source clusters into one target (a flow each, DefaultReplicationPolicy), each
with ``--rate`` records/s.

The baseline, measured in the same run on fresh clusters of its own, is the tuned one-process loop of
``bench.loop`` (one per source; consume -> produce with confluent-kafka; consume() waits at most 0.1 s for a
full batch here, as latency matters, not throughput): what this machine allows a copier at all. The latency of a
record is the moment a consumer of the remote topic receives it minus its timestamp, which MM2 semantics keep
from the source (CreateTime, set when the load producer was handed the record): it includes the producer's
linger, both brokers, the copier and the reading consumer's fetch wait.

All clusters are real one-node Kafka (the jars ``make kafka-libs`` resolves): tansu answers ListOffsets LATEST
with the base offset of its newest batch + 1 (docs/test-broker.md, *ListOffsets*), which would hold the tail of
every partition back.

The load producer lingers 50 ms (``--linger-ms``): at 5 ms, a one-node Kafka on this 2-core machine could not
carry 10,000 records/s over 80 partitions even with no copier running (acknowledged after p50 2.5 s, p99 5.7 s:
200 Produce requests/s of 80 one-record batches each), and the source's own delay would bury the copier's.
Before the idle spell ``--warm-up-seconds`` of load are copied and not measured (the brokers' JIT is still
compiling then: with no copier, p99 0.9 s in the first 5 s against 0.09 s after).

    python -m bench.latency [--rate 10000] [--partitions 80] [--seconds 60] [--idle-seconds 60]
                            [--sources 1] [--goal-p99-ms 1000] [--contenders mm2py,loop]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.contenders import REPO
from bench.latency_load import Arrivals, Load, percentile, produce_steadily, windows
from tests.harness.kafka_harness import list_topics
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

TOPIC = "latency"
ARRIVAL_TIMEOUT_S = 120.0  # how long the last records may take before they count as missing


def aliases(sources: int) -> list[str]:
    return ["source"] if sources == 1 else [f"dc{k + 1}" for k in range(sources)]


def mm2py_config(sources: list[KafkaCluster], target: KafkaCluster, master: str) -> str:
    names = aliases(len(sources))
    lines = [f"clusters = {', '.join(names)}, target", f"target.bootstrap.servers = {target.bootstrap}"]
    for name, cluster in zip(names, sources, strict=True):
        lines += [
            f"{name}.bootstrap.servers = {cluster.bootstrap}",
            f"{name}->target.enabled = true",
            f"{name}->target.topics = {TOPIC}",
            f"{name}->target.consumer.poll.timeout.ms = 100",
        ]
    lines += [
        "# one broker per cluster: MM2's replication factors of 2 and 3 cannot be met",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        f"mm2py.spark.master = {master}",
    ]
    return "\n".join(lines) + "\n"


def start_mm2py(work: Path, sources: list[KafkaCluster], target: KafkaCluster, master: str) -> list[Any]:
    config = work / "latency.properties"
    config.write_text(mm2py_config(sources, target, master))
    log = (work / "run.log").open("w")
    cmd = [sys.executable, "-m", "mm2py", "-v", "run", str(config)]
    return [subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)]


def start_loops(work: Path, sources: list[KafkaCluster], target: KafkaCluster, partitions: int) -> list[Any]:
    """A loop per source; each copies until it is stopped (its ends are out of reach)."""
    loops = []
    for name, source in zip(aliases(len(sources)), sources, strict=True):
        remote = f"{name}.{TOPIC}"
        target.create_topic(remote, partitions)
        log = (work / f"run-{name}.log").open("w")
        cmd = [
            *(sys.executable, "-m", "bench.loop", "--source", source.bootstrap, "--target", target.bootstrap),
            *("--topic", TOPIC, "--remote-topic", remote, "--ends", json.dumps([10**15] * partitions)),
            *("--consume-timeout", "0.1"),
        ]
        loops.append(subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    return loops


def kill_running(copiers: list[Any]) -> None:
    for copier in copiers:
        if copier.poll() is None:
            copier.kill()


def copy_and_wait(arrivals: Arrivals, expected: int, what: str) -> None:
    poll_until(lambda: arrivals.count() >= expected, ARRIVAL_TIMEOUT_S, what)


def run(contender: str, args: argparse.Namespace) -> dict[str, Any]:
    partitions = args.partitions
    work = Path(tempfile.mkdtemp(prefix=f"mm2py-latency-{contender}-"))
    runtime = KafkaRuntime.locate()
    with ExitStack() as stack:
        target = stack.enter_context(KafkaCluster(work / "target", 1, runtime=runtime))
        sources = [stack.enter_context(KafkaCluster(work / name, 1, runtime=runtime)) for name in aliases(args.sources)]
        for source in sources:
            source.create_topic(TOPIC, partitions)
        if contender == "mm2py":
            copiers = start_mm2py(work, sources, target, args.master)
        else:
            copiers = start_loops(work, sources, target, partitions)
        stack.callback(kill_running, copiers)
        loads = [
            Load(k, source.bootstrap, TOPIC, partitions, args.rate, args.linger_ms) for k, source in enumerate(sources)
        ]
        stack.callback(loads.clear)  # the load producers go before their clusters do
        # One record per partition, then wait until they are all on the target: the run is up and copying.
        for load in loads:
            load.one_per_partition()
            load.flush()
        remotes = [f"{name}.{TOPIC}" for name in aliases(args.sources)]
        poll_until(lambda: set(remotes) <= set(list_topics(target.bootstrap)), 180, "the remote topics")
        arrivals = Arrivals(target.bootstrap, remotes, partitions)
        stack.callback(arrivals.close)
        copy_and_wait(arrivals, partitions * len(loads), "the warm-up records on the target")
        warmed = produce_steadily(loads, args.warm_up_seconds)
        copy_and_wait(arrivals, sum(load.next_seq for load in loads), "the warm-up load on the target")
        time.sleep(args.idle_seconds)  # the idle spell under test, not a synchronisation
        start_ms = time.time() * 1000
        produced = produce_steadily(loads, args.seconds)
        total = sum(load.next_seq for load in loads)
        deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
        while time.monotonic() < deadline and arrivals.count() < total:
            time.sleep(0.2)  # poll interval while the last records arrive (the missing ones are counted)
        stopping = time.monotonic()
        for copier in copiers:
            copier.send_signal(signal.SIGTERM)
        codes = [copier.wait(120) for copier in copiers]
        stop_s = time.monotonic() - stopping
        return summary(contender, args, arrivals, loads, produced, warmed, start_ms, codes, stop_s, work)


def summary(
    contender: str,
    args: argparse.Namespace,
    arrivals: Arrivals,
    loads: list[Load],
    produced: dict[int, range],
    warmed: dict[int, range],
    start_ms: float,
    codes: list[int],
    stop_s: float,
    work: Path,
) -> dict[str, Any]:
    measured = [(k, seq) for k, seqs in produced.items() for seq in seqs]
    latencies = [arrivals.latency_ms[s] for s in measured if s in arrivals.latency_ms]
    if not latencies:
        raise RuntimeError(f"no record arrived; see {work}")
    acked = {s: t for load in loads for s, t in load.acked_ms.items()}
    both = [s for s in measured if s in arrivals.seen_ms and s in acked]
    hops = [arrivals.seen_ms[s] - acked[s] for s in both]
    at_source = [acked[s] - arrivals.created_ms[s] for s in both]
    per_window = windows(arrivals, produced, start_ms, args.window_seconds)
    per_source = {
        k: round(percentile([arrivals.latency_ms[(k, q)] for q in seqs if (k, q) in arrivals.latency_ms], 0.99), 1)
        for k, seqs in produced.items()
    }
    return {
        "contender": contender,
        "sources": args.sources,
        "rate_per_source": args.rate,
        "partitions": args.partitions,
        "seconds": args.seconds,
        "idle_seconds": args.idle_seconds,
        "warm_up_records": sum(len(r) for r in warmed.values()),
        "linger_ms": args.linger_ms,
        "master": args.master,
        "records": len(measured),
        "missing": len(measured) - len(latencies),
        "duplicates": arrivals.duplicates,
        "exits": codes,
        "seconds_from_sigterm_to_exit": round(stop_s, 1),
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "max_ms": round(max(latencies), 1),
        "worst_window_p99_ms": max(w["p99_ms"] for w in per_window if w["window"] != "missing"),
        "p99_ms_per_source": per_source,
        "windows": per_window,
        # acknowledged by the source -> read on the target: the copier's share of the latency
        "hop_p50_ms": round(percentile(hops, 0.50), 1),
        "hop_p99_ms": round(percentile(hops, 0.99), 1),
        "source_p99_ms": round(percentile(at_source, 0.99), 1),  # CreateTime -> acknowledged by the source
        "log": str(work),
    }


def report(r: dict[str, Any], goal_ms: float) -> str:
    met = r["p99_ms"] <= goal_ms and r["worst_window_p99_ms"] <= goal_ms and r["missing"] == 0
    return (
        f"{r['contender']}: {r['records']:,} records, {r['sources']} source(s) x {r['rate_per_source']:,}/s over "
        f"{r['partitions']} partitions after {r['idle_seconds']:.0f} s idle: p50 {r['p50_ms'] / 1000:.2f} s, "
        f"p99 {r['p99_ms'] / 1000:.2f} s (worst {args_window(r)} window {r['worst_window_p99_ms'] / 1000:.2f} s), "
        f"max {r['max_ms'] / 1000:.2f} s; missing {r['missing']}, duplicates {r['duplicates']}; exits {r['exits']} "
        f"{r['seconds_from_sigterm_to_exit']} s after SIGTERM; source -> target p99 {r['hop_p99_ms'] / 1000:.2f} s; "
        f"goal p99 <= {goal_ms / 1000:g} s overall and per window, none missing: {'met' if met else 'NOT met'}"
    )


def args_window(r: dict[str, Any]) -> str:
    windows_ = [w for w in r["windows"] if w["window"] != "missing"]
    width = windows_[1]["from_s"] - windows_[0]["from_s"] if len(windows_) > 1 else 0
    return f"{width:g}-s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=10_000, help="records per second per source (default 10000)")
    parser.add_argument("--partitions", type=int, default=80, help="partitions per source topic (default 80)")
    parser.add_argument("--sources", type=int, default=1, help="source clusters merged into the target (default 1)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the measured load runs (default 60)")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="quiet before the measured load (60)")
    parser.add_argument("--warm-up-seconds", type=float, default=10.0, help="load copied, not measured (10)")
    parser.add_argument("--window-seconds", type=float, default=5.0, help="windows of send time (default 5)")
    parser.add_argument("--goal-p99-ms", type=float, default=1000.0, help="p99 goal, overall and per window")
    parser.add_argument("--linger-ms", type=int, default=50, help="the load producer's linger.ms (default 50)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--contenders", default="mm2py,loop", help="comma-separated: mm2py, loop")
    args = parser.parse_args()
    results = {c: run(c, args) for c in args.contenders.split(",")}
    for r in results.values():
        print(report(r, args.goal_p99_ms))
    if "mm2py" in results and "loop" in results:
        ratio = results["mm2py"]["p99_ms"] / results["loop"]["p99_ms"]
        print(f"mm2py p99 / loop p99 (same run): {ratio:.2f}x")
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / time.strftime("latency-%Y%m%d-%H%M%S.json")).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

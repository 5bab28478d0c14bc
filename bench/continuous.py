"""Continuous mode beside MirrorMaker 2: latency and CPU per load step, on the same brokers and the same load.

Why: what a team compares is mm2py against the MirrorMaker 2 it runs today, on its brokers and its load; an
absolute figure on this 2-core machine says more about the machine than about either copier. So both run here
one after the other against the same two one-node Apache Kafka clusters (the pinned version's jars, broker JVMs
with the C2 compiler and a 1 GiB heap, not the tests' fast-starting ones), each on a topic of its own.

For each shape (``--partitions`` x ``--sizes``) and contender: create the topic, start the contender (MM2 4.3 in
dedicated mode, tuned as ``make bench`` tunes it; mm2py ``run`` on ``--mm2py-master``, ``local[2]`` by default;
both with ``tasks.max`` = min(partitions, ``--tasks-max``), as one file would give them (mm2py runs at most its
Spark task slots: two here); both commit every
``--offset-flush-ms``, 1 s as ``make bench`` tunes MM2, which is also how often each sends MM2's delayed offset
syncs), copy one record per partition and ``--warm-up-seconds`` of load
(not measured), then for each rate of ``--rates``: ``--idle-seconds`` of quiet (the first window after it is often a
copier's worst),
``--seconds`` of load at that rate, every record awaited on the target and checked. Per step and contender:
p50/p99/max latency (CreateTime -> read by a consumer of the target) overall and per ``--window-seconds``
window of send time, the copier's share (acknowledged by the source -> read on the target), the source's own
acknowledgement p99, records missing and read twice, and CPU seconds of the copier's whole process tree per
million records (from the load's start to the last record's arrival, so it includes what the copier spends
waiting). The load producer and the checking consumer run in this process, outside the measured trees; their
CPU over each step is reported as ``bench_cpu_s``.

``--probe`` first finds the highest of ``--probe-rates`` at which the source alone (no copier) acknowledges
with p99 < 500 ms over the first shape's partitions and size, and adds it to the steps.

    python -m bench.continuous [--rates 1000,10000,30000] [--partitions 8,800] [--sizes 100,1000] [--probe]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.contenders import REPO
from bench.latency_load import Arrivals, Load, percentile, produce_steadily, windows
from bench.mirror_maker import MM2_JVM_FLAGS, tuned_properties
from bench.proctree import TreeMonitor
from tests.harness.kafka_harness import list_topics
from tests.harness.mirror_maker import MirrorMaker, properties_text
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

BROKER_JVM = ("-Xmx1g", "-XX:TieredStopAtLevel=4")  # after the harness's flags: these win
ARRIVAL_TIMEOUT_S = 120.0
ACK_GOAL_MS = 500.0
MEMORY_TUNED_UP_TO = 100  # partitions; above, MM2 gets Kafka's defaults for MEMORY_KEYS
MEMORY_KEYS = (
    "target.producer.buffer.memory",
    "source.consumer.max.partition.fetch.bytes",
    "source.consumer.fetch.max.bytes",
)
LINGER_MS = 50  # the load producer's, as bench.latency's (one-node brokers cannot take one-record batches)
SINGLE_NODE = {
    key: "1"
    for key in (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
    )
}


@dataclass
class Copier:
    """A running contender: its root pid, a liveness check that raises, and how to stop it (returns its exit)."""

    pid: int
    check: Callable[[], None]
    stop: Callable[[], int | None]

    def running_and(self, condition: Callable[[], bool]) -> Callable[[], bool]:
        """``condition`` for poll_until, failing at once if the copier has exited."""

        def check() -> bool:
            self.check()
            return condition()

        return check


def start_mm2py(
    work: Path, source: str, target: str, topic: str, tasks: int, flush_ms: int, master: str, extra: dict[str, str]
) -> Copier:
    settings = {
        "tasks.max": str(tasks),
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "source->target.topics": topic,
        "source->target.consumer.poll.timeout.ms": "100",
        "mm2py.spark.master": master,
        # Both contenders commit as often (--offset-flush-ms), so both send MM2's delayed offset syncs as often
        # (mm2py records progress every second either way).
        "target.offset.flush.interval.ms": str(flush_ms),
        **SINGLE_NODE,
        **extra,
    }
    config = work / "mm2py.properties"
    config.write_text(properties_text(settings))
    log = (work / "mm2py.log").open("w")
    run = subprocess.Popen([sys.executable, "-m", "mm2py", "run", str(config)], cwd=REPO, stdout=log, stderr=log)

    def check() -> None:
        if run.poll() is not None:
            raise RuntimeError(f"mm2py exited with {run.returncode}; log {work / 'mm2py.log'}")

    def stop() -> int | None:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
        return run.wait(120)

    return Copier(run.pid, check, stop)


def start_mm2(
    work: Path, source: str, target: str, topic: str, tasks: int, partitions: int, flush_ms: int, extra: dict[str, str]
) -> Copier:
    settings = {**tuned_properties(source, target, topic, tasks), "source->target.consumer.poll.timeout.ms": "100"}
    settings["target.offset.flush.interval.ms"] = str(flush_ms)
    # make bench's shorter worker-group session is for tansu; Kafka refuses one below group.min.session.timeout.ms
    for key in ("target.session.timeout.ms", "target.heartbeat.interval.ms"):
        del settings[key]
    if partitions > MEMORY_TUNED_UP_TO:
        # make bench's memory (a 256 MB producer buffer and 4 MB fetches per partition, per task) ran MM2 out of
        # its 2 GB heap with 800 partitions at 10,000 records/s (OutOfMemoryError, exit 1): Kafka's defaults here
        for key in MEMORY_KEYS:
            del settings[key]
    settings.update(extra)
    config = work / "mm2.properties"
    config.write_text(properties_text(settings))
    mm2 = MirrorMaker(KafkaRuntime.locate(), config, work, jvm_flags=MM2_JVM_FLAGS)
    mm2.start()
    assert mm2.pid is not None
    return Copier(mm2.pid, mm2.check_running, mm2.stop)


def self_cpu_s() -> float:
    """CPU seconds of this process (the load producer, the checking consumer, the monitor), threads included."""
    times = os.times()
    return times.user + times.system


def tree_cpu_s(monitor: TreeMonitor, start: float, end: float) -> float:
    """CPU seconds of the copier's process tree in [start, end] (the monitor watches no other pid)."""
    return sum(v for k, v in monitor.cores(start, end).items() if k != "others") * (end - start)


def step(
    load: Load, arrivals: Arrivals, monitor: TreeMonitor, copier: Copier, rate: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Idle, then ``rate`` records/s for ``args.seconds``; every record awaited; the figures of this step."""
    time.sleep(args.idle_seconds)  # the idle spell under test, not a synchronisation
    copier.check()
    load.rate = rate
    dups0, cpu0, wall0, start_ms = arrivals.duplicates, self_cpu_s(), time.time(), time.time() * 1000
    produced = produce_steadily([load], args.seconds)
    seqs = [(load.source, q) for q in produced[load.source]]
    # The last record of each partition; as a partition keeps its order, the rest arrived before it (checked below).
    tails = seqs[-load.partitions :]
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
    while time.monotonic() < deadline and any(s not in arrivals.seen_ms for s in tails):
        copier.check()
        time.sleep(0.05)  # poll interval of the arrivals (the checker's thread fills them)
    wall1 = time.time()
    behind = any(s not in arrivals.seen_ms for s in tails)
    deadline = time.monotonic() + 5
    while not behind and time.monotonic() < deadline and any(s not in arrivals.seen_ms for s in seqs):
        time.sleep(0.2)  # a record missing in the middle: counted after a short wait, not waited for forever
    monitor.sample(with_pss=False)  # a sample at the end, for the window's CPU
    cpu = tree_cpu_s(monitor, wall0, wall1)
    latencies = [arrivals.latency_ms[s] for s in seqs if s in arrivals.latency_ms]
    hops = [arrivals.seen_ms[s] - load.acked_ms[s] for s in seqs if s in arrivals.seen_ms and s in load.acked_ms]
    acks = [load.ack_delay_ms[s] for s in seqs if s in load.ack_delay_ms]
    per_window = [
        w for w in windows(arrivals, produced, start_ms, args.window_seconds, [load]) if w["window"] != "missing"
    ]
    return {
        "rate": rate,
        "records": len(seqs),
        "fell_behind": behind,  # the last records not on the target ARRIVAL_TIMEOUT_S after the load ended
        "missing": len(seqs) - len(latencies),
        "duplicates": arrivals.duplicates - dups0,
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "max_ms": round(max(latencies, default=float("nan")), 1),
        "worst_window_p99_ms": max((w["p99_ms"] for w in per_window), default=float("nan")),
        "first_window_p99_ms": per_window[0]["p99_ms"] if per_window else float("nan"),
        "hop_p99_ms": round(percentile(hops, 0.99), 1),
        "source_ack_p99_ms": round(percentile(acks, 0.99), 1),
        "cpu_s": round(cpu, 2),
        "cpu_s_per_million": round(cpu / len(seqs) * 1e6, 1),
        "bench_cpu_s": round(self_cpu_s() - cpu0, 2),
        "seconds": round(wall1 - wall0, 1),
        "windows": per_window,
    }


def run_shape(
    contender: str, source: KafkaCluster, target: KafkaCluster, partitions: int, size: int, args: argparse.Namespace
) -> dict[str, Any]:
    topic = f"c_{contender}_{partitions}_{size}"
    work = args.work / topic
    work.mkdir()
    source.create_topic(topic, partitions)
    tasks = min(partitions, args.tasks_max)
    extra = dict(args.both)
    if contender == "mm2py":
        copier = start_mm2py(
            work, source.bootstrap, target.bootstrap, topic, tasks, args.offset_flush_ms, args.mm2py_master, extra
        )
    else:
        copier = start_mm2(
            work, source.bootstrap, target.bootstrap, topic, tasks, partitions, args.offset_flush_ms, extra
        )
    steps = []
    with ExitStack() as stack:
        stack.callback(copier.stop)
        load = Load(0, source.bootstrap, topic, partitions, 1000, LINGER_MS, size)
        load.one_per_partition()
        load.flush()
        remote = f"source.{topic}"
        poll_until(copier.running_and(lambda: remote in list_topics(target.bootstrap)), 300, f"{remote} on target")
        arrivals = stack.enter_context(closing(Arrivals(target.bootstrap, [remote], partitions)))
        poll_until(copier.running_and(lambda: arrivals.count() >= partitions), 300, "the first records")
        load.rate = args.warm_up_rate
        produce_steadily([load], args.warm_up_seconds)
        poll_until(lambda: arrivals.count() >= load.next_seq, ARRIVAL_TIMEOUT_S, "the warm-up load on the target")
        monitor = stack.enter_context(TreeMonitor(copier.pid, interval_s=0.5))
        for rate in args.steps:
            steps.append(step(load, arrivals, monitor, copier, rate, args))
            print(
                json.dumps({"contender": contender, "partitions": partitions, "size": size, **steps[-1]}),
                file=sys.stderr,
                flush=True,
            )  # kept if a later step fails
            if steps[-1]["fell_behind"]:
                break  # a higher rate would only add to the backlog this one left
        code = copier.stop()
    return {"contender": contender, "partitions": partitions, "size": size, "exit_code": code, "steps": steps}


def probe(source: KafkaCluster, partitions: int, size: int, rates: list[int], seconds: float) -> dict[str, Any]:
    """The source alone: its acknowledgement p99 at each rate, up to the first at or above ``ACK_GOAL_MS``."""
    topic = f"probe_{partitions}_{size}"
    source.create_topic(topic, partitions)
    load = Load(0, source.bootstrap, topic, partitions, rates[0], LINGER_MS, size)
    load.rate = 1000
    produce_steadily([load], 5.0)  # the broker's JIT warms up on it
    found: dict[int, float] = {}
    for rate in rates:
        load.rate = rate
        seqs = produce_steadily([load], seconds)[0]
        found[rate] = round(percentile([load.ack_delay_ms[(0, q)] for q in seqs], 0.99), 1)
        print(f"probe: {rate:,} records/s -> source acknowledgement p99 {found[rate]} ms", file=sys.stderr)
        if found[rate] >= ACK_GOAL_MS:
            break
    below = [rate for rate, p99 in found.items() if p99 < ACK_GOAL_MS]
    return {"partitions": partitions, "size": size, "ack_p99_ms": found, "highest_below_goal": max(below, default=0)}


def verdict(mm2py: dict[str, Any], mm2: dict[str, Any]) -> dict[str, Any]:
    """Issue 34's goals for one step: latency where the source keeps up, the copier's share where it does not,
    CPU per million records always."""
    source_ok = max(mm2py["source_ack_p99_ms"], mm2["source_ack_p99_ms"]) < ACK_GOAL_MS
    if source_ok:
        latency = (
            mm2py["p99_ms"] <= 0.5 * mm2["p99_ms"]
            and mm2py["worst_window_p99_ms"] <= 0.5 * mm2["worst_window_p99_ms"]
            and max(mm2py["p99_ms"], mm2py["worst_window_p99_ms"]) <= 1000
        )
    else:
        latency = mm2py["hop_p99_ms"] <= 0.5 * mm2["hop_p99_ms"]
    return {
        "source_below_500ms": source_ok,
        "p99_ratio": round(mm2py["p99_ms"] / mm2["p99_ms"], 2),
        "hop_p99_ratio": round(mm2py["hop_p99_ms"] / mm2["hop_p99_ms"], 2),
        "cpu_ratio": round(mm2py["cpu_s_per_million"] / mm2["cpu_s_per_million"], 2),
        "latency_goal": latency,
        "cpu_goal": mm2py["cpu_s_per_million"] <= mm2["cpu_s_per_million"],
        "clean": mm2py["missing"] == mm2py["duplicates"] == 0,
    }


def table(shapes: list[dict[str, Any]]) -> str:
    """The side-by-side table of docs/performance.md: one row per step, MM2 / mm2py."""
    rows = [
        "| partitions | value | records/s | source ack p99 | p99 MM2 / mm2py | worst 5-s window | after source ack "
        "p99 | CPU-s per M records | missing, dups (mm2py) | goals |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_key = {(r["contender"], r["partitions"], r["size"]): r for r in shapes}
    for (contender, partitions, size), mine in by_key.items():
        theirs = by_key.get(("mm2", partitions, size))
        if contender != "mm2py" or theirs is None:
            continue
        mine_by_rate = {step["rate"]: step for step in mine["steps"]}
        for a in theirs["steps"]:
            b = mine_by_rate.get(a["rate"])
            if b is None:  # mm2py fell behind at a lower step and ran no higher one
                rows.append(f"| {partitions} | {size} B | {a['rate']:,} | mm2py not run at this step |")
                continue
            v = verdict(b, a)
            goals = ("latency met" if v["latency_goal"] else "latency NOT met") + (
                ", CPU met" if v["cpu_goal"] else ", CPU NOT met"
            )
            behind = "".join(f" ({who} fell behind)" for who, x in (("MM2", a), ("mm2py", b)) if x["fell_behind"])
            rows.append(
                f"| {partitions} | {size} B | {a['rate']:,} | {a['source_ack_p99_ms']:.0f} / "
                f"{b['source_ack_p99_ms']:.0f} ms | {a['p99_ms'] / 1000:.2f} / {b['p99_ms'] / 1000:.2f} s | "
                f"{a['worst_window_p99_ms'] / 1000:.2f} / {b['worst_window_p99_ms'] / 1000:.2f} s | "
                f"{a['hop_p99_ms'] / 1000:.2f} / {b['hop_p99_ms'] / 1000:.2f} s | "
                f"{a['cpu_s_per_million']:.0f} / {b['cpu_s_per_million']:.0f} | {b['missing']}, {b['duplicates']} | "
                f"{goals}{behind} |"
            )
        rows.extend(
            f"| {partitions} | {size} B | {b['rate']:,} | MM2 not run at this step (fell behind below it) |"
            for b in mine["steps"]
            if b["rate"] not in {a["rate"] for a in theirs["steps"]}
        )
    return "\n".join(rows)


def sustained(shapes: list[dict[str, Any]]) -> list[str]:
    """Per shape and contender, the highest step copied with p99 <= 1 s overall and in every window, none
    missing: the must-show "mm2py sustains at least 3x the step MM2 sustains"."""
    lines = []
    for shape in shapes:
        ok = [
            s["rate"]
            for s in shape["steps"]
            if max(s["p99_ms"], s["worst_window_p99_ms"]) <= 1000 and s["missing"] == 0
        ]
        lines.append(
            f"{shape['contender']} {shape['partitions']} partitions x {shape['size']} B: highest step with p99 <= 1 s "
            f"{max(ok, default=0):,} records/s"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser.add_argument("--rates", type=ints, default=[1000, 10_000, 30_000], help="records/s per step")
    parser.add_argument("--partitions", type=ints, default=[8, 800])
    parser.add_argument("--sizes", type=ints, default=[100, 1000], help="value bytes")
    parser.add_argument("--seconds", type=float, default=30.0, help="load per step (default 30)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="quiet before each step (default 20)")
    parser.add_argument("--warm-up-seconds", type=float, default=10.0)
    parser.add_argument("--warm-up-rate", type=int, default=5000)
    parser.add_argument("--window-seconds", type=float, default=5.0)
    parser.add_argument("--tasks-max", type=int, default=8, help="both contenders' tasks.max is min(partitions, this)")
    parser.add_argument(
        "--mm2py-master", default="local[2]", help="mm2py's Spark master: local[N] gives a flow N task slots"
    )
    parser.add_argument(
        "--offset-flush-ms", type=int, default=1000, help="offset.flush.interval.ms of both contenders (MM2's: 60000)"
    )
    parser.add_argument("--probe", action="store_true", help="add the highest rate with source ack p99 < 500 ms")
    parser.add_argument("--probe-rates", type=ints, default=[20_000, 30_000, 40_000, 50_000])
    parser.add_argument("--contenders", default="mm2,mm2py")
    parser.add_argument(
        "--both",
        type=lambda kv: tuple(part.strip() for part in kv.split("=", 1)),
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property both contenders get, after their tuning (e.g. source.consumer.fetch.min.bytes=65536)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    args.work = Path(tempfile.mkdtemp(prefix="mm2py-continuous-"))
    runtime = KafkaRuntime.locate()
    result: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "shapes": []}
    with ExitStack() as stack:
        source, target = (
            stack.enter_context(KafkaCluster(args.work / name, 1, runtime=runtime, jvm_options=BROKER_JVM))
            for name in ("source", "target")
        )
        args.steps = list(args.rates)
        if args.probe:
            found = probe(source, args.partitions[0], args.sizes[0], args.probe_rates, args.seconds / 2)
            result["probe"] = found
            if found["highest_below_goal"] and found["highest_below_goal"] not in args.steps:
                args.steps = sorted([*args.steps, found["highest_below_goal"]])  # a step behind stops the higher
        contenders = args.contenders.split(",")
        for n, (partitions, size) in enumerate((p, s) for p in args.partitions for s in args.sizes):
            for contender in contenders if n % 2 == 0 else contenders[::-1]:  # neither always goes first
                result["shapes"].append(run_shape(contender, source, target, partitions, size, args))
    result["table"] = table(result["shapes"])
    result["sustained"] = sustained(result["shapes"])
    print(result["table"])
    print("\n".join(result["sustained"]))
    text = json.dumps(result, indent=2)
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / time.strftime("continuous-%Y%m%d-%H%M%S.json")).write_text(text + "\n")
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

"""Exactly-once on real Apache Kafka: mm2py at-least-once, mm2py exactly-once and MirrorMaker 2 exactly-once.

``python -m bench.exactly_once [--records N --value-bytes B --rounds R ...]`` starts a one-node source and a
one-node target (Apache Kafka in KRaft mode from ``.kafka-libs``, tests/harness/real_kafka.py), loads one topic
(8 partitions, 2 headers per record by default) and copies it with each contender in turn, ``--rounds`` times,
the order rotated every round so that none always goes first. Why real Kafka and not tansu: transactions are
what is measured, and tansu's transactions are not Kafka's (docs/test-broker.md, *Transactions*).

Same brokers, same data, measured the same way (bench/eos_contenders.py): the visible rate runs from 10% of the
records written on the target to 90% readable under read_committed, and the steady rate is the slope of the
target's read_committed end offsets between 10% and 90% of the records (bench/steady.py), start-up excluded.
The ratios use the visible rate: a copy that commits a few times only (2M records in two seconds) has no
read_committed slope to speak of, its end moving in one or two steps.
Every copy is then checked record by record under read_committed (bench/record_check.py: lost, duplicated,
extra, reordered) and its remote topic deleted, so each contender finds the target as the first did.

The brokers run with Kafka's own start-script JVM settings (1 GiB heap, G1) and its default thread counts, not
the tests' small fast-starting JVM (``--broker-jvm test`` for that): the target broker does the transaction
coordinator's work, and a C1-only broker would measure the harness, not the copiers.

Results: a table with the ratios issue 21 names (mm2py EOS / MM2 EOS, mm2py EOS / mm2py at-least-once) and
``bench-results/eos-<time>.json`` with everything measured and the git commit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from bench.contenders import REPO, Job, environment
from bench.eos_contenders import markers, run_mm2, run_mm2py, transactional_ids
from bench.record_check import check_copy, digests
from bench.run_bench import load
from tests.harness.real_kafka import JVM_FLAGS, KafkaCluster, KafkaRuntime

PARTITIONS = 8
CONTENDERS = ("mm2py-alo", "mm2py-eos", "mm2")
# Issue 21 (a): mm2py EOS over MM2 EOS per value size, and mm2py EOS over mm2py at-least-once.
GOAL_OVER_MM2 = {100: 5.0, 1024: 2.0}
GOAL_OVER_ALO = 0.7
# kafka-server-start.sh's heap and kafka-run-class.sh's performance options.
KAFKA_START_JVM = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
KAFKA_THREAD_DEFAULTS = {"num.network.threads": "3", "num.io.threads": "8"}


@dataclass(frozen=True)
class BrokerRuntime(KafkaRuntime):
    """The harness's runtime, but brokers (``kafka.Kafka``) start with ``broker_jvm`` instead of the tests' flags."""

    broker_jvm: tuple[str, ...] = KAFKA_START_JVM

    def command(
        self, main: str, *args: str, log_file: Path, log4j: Path, dump_archive: Path | None = None
    ) -> list[str]:
        if main != "kafka.Kafka":
            return super().command(main, *args, log_file=log_file, log4j=log4j, dump_archive=dump_archive)
        cmd = super().command(main, *args, log_file=log_file, log4j=log4j)
        rest = [a for a in cmd[1:] if a not in JVM_FLAGS and not a.startswith("-XX:SharedArchiveFile=")]
        return [cmd[0], *self.broker_jvm, *rest]


def _pids(cluster: KafkaCluster) -> int:
    process = cluster.nodes[0]._process  # the harness keeps the JVM's Popen; the monitor needs its pid
    assert process is not None
    return process.pid


def run_contender(job: Job, contender: str, round_no: int, args: argparse.Namespace, runtime: KafkaRuntime) -> dict:
    alias = f"{contender.replace('mm2py-', '')}r{round_no}"
    name = f"{contender}-{job.label}-r{round_no}"
    if contender == "mm2":
        result = run_mm2(job, name, alias, runtime)
        prefix = f"{alias}-mm2-"
    else:
        result = run_mm2py(job, name, alias, exactly_once=contender == "mm2py-eos", master=args.master)
        prefix = f"{alias}-mm2-"
    result.update(contender=contender, round=round_no, size=job.label, records=sum(job.ends))
    result["markers"] = markers(job.target, result["remote_topic"], job.ends)
    result["transactional_ids"] = transactional_ids(job.target, prefix)
    return result


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(60)


def _steady(r: dict[str, Any]) -> float:
    return float(r.get("steady_records_per_s") or 0.0)


def _visible(r: dict[str, Any]) -> float:
    return float(r.get("visible_records_per_s") or 0.0)


def ratios(runs: list[dict[str, Any]], value_bytes: int) -> list[dict[str, Any]]:
    """Per round: mm2py EOS over MM2 EOS and over mm2py at-least-once, by the visible rate (10% written to 90%
    readable: defined however few commits a copy makes), with the read_committed slopes' ratios beside them."""
    out = []
    for round_no in sorted({r["round"] for r in runs}):
        by = {r["contender"]: r for r in runs if r["round"] == round_no}
        row: dict[str, Any] = {"round": round_no}
        for name, (a, b) in {
            "eos_over_mm2": ("mm2py-eos", "mm2"),
            "eos_over_alo": ("mm2py-eos", "mm2py-alo"),
            "alo_over_mm2": ("mm2py-alo", "mm2"),
        }.items():
            top, bottom = by.get(a), by.get(b)
            if top and bottom and _visible(bottom):
                row[name] = _visible(top) / _visible(bottom)
            if top and bottom and _steady(bottom):
                row[f"{name}_by_slope"] = _steady(top) / _steady(bottom)
        if "eos_over_mm2" in row:
            row["eos_over_mm2_goal"] = GOAL_OVER_MM2.get(value_bytes)
        if "eos_over_alo" in row:
            row["eos_over_alo_goal"] = GOAL_OVER_ALO
        out.append(row)
    return out


def render(results: dict[str, Any]) -> str:
    head = (
        "round",
        "contender",
        "records",
        "visible rec/s",
        "steady rec/s",
        "steady MB/s",
        "written rec/s",
        "wall s",
        "others' cores",
        "markers",
        "txn ids",
        "check",
    )
    rows = [head]
    for r in results["runs"]:
        c = r["check"]
        check = (
            "exact"
            if c["exact"]
            else f"lost {c['lost']} dup {c['duplicated']} extra {c['extra']} reord {c['reordered']}"
        )
        rows.append(
            (
                str(r["round"]),
                r["contender"],
                f"{r['records']:,}",
                f"{_visible(r):,.0f}",
                f"{_steady(r):,.0f}",
                f"{_steady(r) * results['value_bytes'] / 1e6:.1f}",
                f"{r.get('written_records_per_s') or 0:,.0f}",
                f"{r['wall_s']:.1f}",
                f"{r.get('cores_steady', {}).get('others', 0):.2f}",
                f"{r['markers']:,}",
                str(len(r["transactional_ids"])),
                check,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for row in results["ratios"]:
        parts = [f"round {row['round']}:"]
        if "eos_over_mm2" in row:
            goal = row["eos_over_mm2_goal"]
            met = "" if goal is None else f" (goal {goal}x: {'met' if row['eos_over_mm2'] >= goal else 'NOT met'})"
            parts.append(f"mm2py-eos/mm2 {row['eos_over_mm2']:.2f}x{met};")
        if "eos_over_alo" in row:
            met = "met" if row["eos_over_alo"] >= GOAL_OVER_ALO else "NOT met"
            parts.append(f"mm2py-eos/mm2py-alo {row['eos_over_alo']:.2f}x (goal {GOAL_OVER_ALO}x: {met});")
        if "alo_over_mm2" in row:
            parts.append(f"mm2py-alo/mm2 {row['alo_over_mm2']:.2f}x")
        lines.append(" ".join(parts) + " (visible rates)")
    lines.append(
        "visible: records/s from 10% of the records written on the target to 90% readable under read_committed "
        "(bench.steady.visible_rate); the ratios and goals use it. "
        "steady: slope of the remote topic's read_committed end offsets from 10% to 90% of the records; MB/s counts "
        "value bytes. written: the same slope of the log end (read_uncommitted). others' cores: CPU of the rest of the "
        "machine during the steady window. markers: target offsets holding no record (commit markers). txn ids: "
        "the contender's transactional.ids the target's coordinator lists. check: every record compared under "
        "read_committed."
    )
    before, after = results["environment_before"]["loadavg"], results["environment_after"]["loadavg"]
    lines.append(
        f"load average before {before[0]:.2f}, after {after[0]:.2f} ({results['environment_before']['cpus']} CPUs)"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000, help="records to copy (default 2,000,000)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size in bytes (default 100)")
    parser.add_argument("--headers", type=int, default=2, help="headers per record (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="times every contender copies the topic (default 1)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=f"of {', '.join(CONTENDERS)}")
    parser.add_argument("--master", default="local[2]", help="Spark master for mm2py (default local[2])")
    parser.add_argument("--broker-jvm", choices=("kafka", "test"), default="kafka", help="brokers' JVM settings")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    args = parser.parse_args()
    per_partition = -(-args.records // PARTITIONS)
    runtime: KafkaRuntime = BrokerRuntime.locate() if args.broker_jvm == "kafka" else KafkaRuntime.locate()
    work = Path(tempfile.mkdtemp(prefix="mm2py-bench-eos-"))
    label = f"{args.value_bytes}b"
    results: dict[str, Any] = {
        "environment_before": environment(kafka=runtime.version),
        "partitions": PARTITIONS,
        "records": per_partition * PARTITIONS,
        "value_bytes": args.value_bytes,
        "headers_per_record": args.headers,
        "broker_jvm": list(getattr(runtime, "broker_jvm", JVM_FLAGS)),
        "work_dir": str(work),
        "runs": [],
    }
    print(
        f"bench.exactly_once: {per_partition * PARTITIONS:,} x {args.value_bytes} B, {PARTITIONS} partitions, "
        f"Kafka {runtime.version}, work dir {work}",
        flush=True,
    )
    broker_config = KAFKA_THREAD_DEFAULTS if args.broker_jvm == "kafka" else {}
    clusters = [
        KafkaCluster(work / side, 1, runtime=runtime, broker_config=broker_config) for side in ("source", "target")
    ]
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(KafkaCluster.start, clusters))
        source, target = clusters
        topic = f"bench-{label}"
        results["load"] = load(source.bootstrap, topic, per_partition, args.value_bytes, args.headers, work)
        source_digests = digests(source.bootstrap, topic, PARTITIONS)
        job = Job(
            label,
            topic,
            [per_partition] * PARTITIONS,
            args.value_bytes,
            source.bootstrap,
            target.bootstrap,
            (_pids(source), _pids(target)),
            work,
        )
        order = [c.strip() for c in args.contenders.split(",") if c.strip()]
        for round_no in range(1, args.rounds + 1):
            first = (round_no - 1) % len(order)  # each contender goes first in turn, however many rounds
            for contender in order[first:] + order[:first]:
                result = run_contender(job, contender, round_no, args, runtime)
                result["check"] = check_copy(
                    source.bootstrap, topic, target.bootstrap, result["remote_topic"], source_digests
                )
                results["runs"].append(result)
                print(
                    f"round {round_no} {contender}: steady {_steady(result):,.0f} records/s, wall "
                    f"{result['wall_s']:.1f} s, markers {result['markers']}, check "
                    f"{'exact' if result['check']['exact'] else result['check']}",
                    flush=True,
                )
                _delete_topic(target.bootstrap, result["remote_topic"])
    finally:
        for cluster in clusters:
            cluster.stop()
    results["environment_after"] = environment(kafka=runtime.version)
    results["ratios"] = ratios(results["runs"], args.value_bytes)
    print(render(results), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / time.strftime(f"eos-{label}-%Y%m%d-%H%M%S.json")
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"results: {path}")
    if not all(r["check"]["exact"] for r in results["runs"]):
        sys.exit(1)


if __name__ == "__main__":
    main()

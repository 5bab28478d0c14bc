"""The cut-over must-shows of issue 31 at full size, on real Apache Kafka: ``python -m bench.cutover_drill
--scenario planned|unplanned|merged|all --runs N`` (``make bench-cutover CUTOVER_ARGS=...``; not part of ``make test``).

The commands are proven scaled down in ``make test`` (tests/realkafka/test_real_kafka_handover.py,
test_real_kafka_unplanned_failover.py); this runs them at the size the issue names, each run on fresh clusters A
and B started here, with ``mm2py run``, the load generator and the applications' consumers on A each in a process
of their own (bench/cutover_roles.py), so that none of them takes CPU from the measured run's process.

- ``planned``: 5,000 records/s of unique 100-byte values into 8 partitions of A for ``--seconds`` (60) while a
  continuous ``mm2py run`` copies A->B; group ``ahead`` follows A's end, group ``behind`` stops ``--behind``
  (100,000) records short of it. Then the producer and the consumers stop and ``mm2py cutover --json`` runs with
  the run still going: the run must hand the flow over and stand down by itself. Both groups then read B to its
  end. Measured: per group the records processed on A and on B, read twice, skipped (both must be 0); the
  report's ``handover`` line; the cut-over's wall time; that the run logged it stood down; and that B holds every
  record of A once, in order (tests/harness/record_check.py: lost, duplicated, reordered, unexpected).
- ``unplanned``: the same load and a run copying in rounds of ``--range-max-records`` (5,000) per partition; A
  has ``--a-nodes`` (3) nodes. Group ``billing`` processes ``--billing-records`` on A and stops; once its checkpoint
  is on B and the run copies along, every process of the run is SIGSTOPped for ``--freeze-seconds`` (24) while the
  load goes on, building the backlog; the load stops, the run is SIGCONTed and, once it has kept on B a listing of
  A's ends while it copies the backlog, every node of A is SIGKILLed, then the run (the runbook says why).
  ``mm2py failover --json`` must exit 0 within 60 s. Measured: the report's "not replicated" bound against the
  truth (A's ends before the kill minus B's ends after it): at most the truth, at least the truth less what A took
  after the run's last kept listing; and ``billing`` on B skips nothing B holds and reads nothing twice that the
  offset syncs on B cover (re-reads past the newest sync, a range written as the run died, are counted apart).
- ``merged``: three sources A, C, D merged into one topic on T under IdentityReplicationPolicy, cut over
  together with ``--flow A->T,C->T,D->T`` (bench/cutover_merged.py says what it runs and checks).

One JSON line per run; a summary per scenario; everything in ``bench-results/cutover-drill-<scenario>-<time>.json``.
Exit 1 when a run failed a check (``failed_checks`` names them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cutover_merged
from bench.contenders import environment
from bench.cutover_roles import Roles
from bench.cutover_steps import await_lease, command, read_on_target, values_per_partition
from mm2py.mirror.record_formats import OffsetSync
from tests.harness.faults import MirrorRun, session_processes
from tests.harness.kafka_harness import committed_group, end_offsets, list_topics, read_all
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import checkpointed, kept_ends, one_flow_config
from tests.harness.record_check import compare, digest_topic
from tests.harness.recording_consumer import Processed, once_per_group

REPO = Path(__file__).resolve().parents[1]
TOPIC = "orders"
# As the scaled failover test: syncs on B (failover re-translates with them), a checkpoint every second.
FAILOVER_SETTINGS = "offset-syncs.topic.location = target\nemit.checkpoints.interval.seconds = 1\n"
Scenario = Callable[[argparse.Namespace, KafkaRuntime, Path], dict[str, Any]]


def planned(args: argparse.Namespace, runtime: KafkaRuntime, work: Path) -> dict[str, Any]:
    with KafkaCluster(work / "a", 1, runtime=runtime) as a, KafkaCluster(work / "b", 1, runtime=runtime) as b:
        topic = a.create_topic(TOPIC, partitions=args.partitions)
        config, src, tgt = one_flow_config(work / "mm2.properties", a.bootstrap, b.bootstrap, topic)
        flow, remote = f"{src}->{tgt}", f"{src}.{topic}"
        with MirrorRun(config, work / "run.log") as run, Roles(work) as roles:
            await_lease(run, b, src, tgt, held=True)
            load = roles.producer(a.bootstrap, topic, partitions=args.partitions, rate=args.rate, seconds=args.seconds)
            ahead = roles.consumer(src, a.bootstrap, "ahead", topic)
            behind = roles.consumer(src, a.bootstrap, "behind", topic, int(args.rate * args.seconds) - args.behind)
            produced = roles.result(load, args.seconds + 300)
            a_ends = end_offsets(a.bootstrap, topic)
            roles.tell_stop(ahead, a_ends)
            on_a = {"ahead": roles.processed(ahead, 300), "behind": roles.processed(behind, 300)}
            lag_at_load_end = sum(a_ends.values()) - sum(end_offsets(b.bootstrap, remote).values())
            cut, wall_s = command("cutover", str(config), "--flow", flow, "--groups", "ahead|behind", "--json")
            with contextlib.suppress(subprocess.TimeoutExpired):  # a run left with no flow exits by itself
                run.proc.wait(120)
        log = run.log_text()
        report = json.loads(cut.stdout) if cut.returncode == 0 else {}
        b_ends = end_offsets(b.bootstrap, remote)
        source = values_per_partition(a.bootstrap, topic)
        every_id = [v for values in source.values() for v in values]
        groups = {}
        for group, processed in on_a.items():
            on_b = read_on_target(tgt, b, group, remote, b_ends, f"{group}-app-on-b")
            twice, skipped = once_per_group(processed + on_b, every_id)
            groups[group] = {"on_a": len(processed), "on_b": len(on_b), "read_twice": twice, "skipped": skipped}
        copy = compare(
            digest_topic(a.bootstrap, topic, args.partitions), digest_topic(b.bootstrap, remote, args.partitions)
        )
    return {
        "produced": produced,
        "a_records": sum(a_ends.values()),
        "behind_lag_on_a": sum(a_ends.values()) - groups["behind"]["on_a"],
        "lag_when_load_stopped": lag_at_load_end,
        "cutover_exit": cut.returncode,
        "cutover_stderr": cut.stderr[-2000:],
        "cutover_wall_s": wall_s,
        "handover": "; ".join(report.get("handovers", [])),
        "quiet_waited_s": report.get("quiet_waited_seconds"),
        "report_totals": report.get("totals"),
        "report_methods": sorted({g["method"] for g in report.get("groups", [])}),
        "run_exit": run.proc.returncode,
        "run_stood_down": "asks for the flow; handing it over" in log and "this run copies nothing more for it" in log,
        "run_traceback": "Traceback" in log,
        "groups": groups,
        "copy": copy.summary(),
        "copy_exact": copy.exact and copy.source_records == copy.target_records == sum(a_ends.values()),
    }


def _lag(a: KafkaCluster, b: KafkaCluster, topic: str, remote: str) -> int:
    try:
        copied = sum(end_offsets(b.bootstrap, remote).values())
    except Exception:  # the remote topic does not exist yet
        copied = 0
    return sum(end_offsets(a.bootstrap, topic).values()) - copied


def _freeze(run: MirrorRun, signum: signal.Signals) -> None:
    for pid in session_processes(run.session):
        os.kill(pid, signum)


def _synced_to(b: KafkaCluster, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the downstream offset of the newest offset sync on B: what the syncs cover."""
    covered: dict[int, int] = {}
    for name in (t for t in list_topics(b.bootstrap) if t.startswith("mm2-offset-syncs.")):
        for r in read_all(b.bootstrap, name, timeout=300):
            sync = OffsetSync.from_record(r.key, r.value)
            if sync.topic == topic:
                covered[sync.partition] = max(covered.get(sync.partition, -1), sync.downstream_offset)
    return covered


def twice_covered(on_a: list[Processed], on_b: list[Processed], covered: dict[int, int]) -> int:
    """Records the group processed again on B at an offset the syncs on B cover (the rest B got after the newest
    sync, when the run was killed: no translation can know where they stand)."""
    seen = {p.record_id for p in on_a}
    twice = 0
    for p in on_b:
        if p.record_id in seen and p.offset <= covered.get(p.partition, -1):
            twice += 1
        seen.add(p.record_id)
    return twice


def unplanned(args: argparse.Namespace, runtime: KafkaRuntime, work: Path) -> dict[str, Any]:
    nodes, group = args.a_nodes, "billing"
    with KafkaCluster(work / "a", nodes, runtime=runtime) as a, KafkaCluster(work / "b", 1, runtime=runtime) as b:
        topic = a.create_topic(TOPIC, partitions=args.partitions, replication_factor=nodes)
        rounds = f"mm2py.continuous.tasks = rounds\nmm2py.range.max.records = {args.range_max_records}\n"
        settings = FAILOVER_SETTINGS + (rounds if args.range_max_records else "")
        config, src, tgt = one_flow_config(work / "mm2.properties", a.bootstrap, b.bootstrap, topic, settings)
        flow, remote = f"{src}->{tgt}", f"{src}.{topic}"
        with MirrorRun(config, work / "run.log") as run, Roles(work) as roles:
            await_lease(run, b, src, tgt, held=True)
            load = roles.producer(a.bootstrap, topic, partitions=args.partitions, rate=args.rate)
            on_a = roles.processed(roles.consumer(src, a.bootstrap, group, topic, args.billing_records), 300)
            committed = {p: o for p, o in committed_group(a.bootstrap, group, topic, args.partitions).items() if o >= 0}
            run.wait_for(
                lambda: checkpointed(b.bootstrap, src, group, remote) == committed, 120, "the group's checkpoints"
            )
            # The run copies along before it is stalled: the backlog at the kill is the stall's, not a slow start's.
            run.wait_for(lambda: _lag(a, b, topic, remote) <= args.rate * 2, 180, "the run to copy along with the load")
            lag_before_stall = _lag(a, b, topic, remote)
            _freeze(run, signal.SIGSTOP)
            time.sleep(args.freeze_seconds)  # the length of the stall (the load goes on), not a synchronisation
            roles.tell_stop(load)
            produced = roles.result(load, 300)
            a_ends = end_offsets(a.bootstrap, topic)
            before_resume = sum(end_offsets(b.bootstrap, remote).values())
            _freeze(run, signal.SIGCONT)
            # A kills while the run copies the backlog, once the run has kept (on B) a listing of A's every end.
            run.wait_for(lambda: kept_ends(b.bootstrap, src, topic) == a_ends, 120, "the run to keep A's ends on B")
            for node in a.nodes:
                a.kill_node(node.node_id)
            killed_at = time.monotonic()
            run.kill()
        await_lease(run, b, src, tgt, held=False)
        b_ends = end_offsets(b.bootstrap, remote)
        kept = kept_ends(b.bootstrap, src, topic)
        done, wall_s = command("failover", str(config), "--flow", flow, "--groups", re.escape(group), "--json")
        kill_to_failed_over_s = round(time.monotonic() - killed_at, 1)
        report = json.loads(done.stdout) if done.returncode == 0 else {}
        point = report.get("recovery_point", {})
        bound = {r["partition"]: r["not_replicated_at_least"] for r in point.get("partitions", [])}
        truth = {p: a_ends[p] - b_ends.get(p, 0) for p in a_ends}  # one record per offset: no transactions
        # What A took after the run's last kept listing; a partition with no listing kept is unknown to B.
        unlisted = {p: a_ends[p] - kept[p] if p in kept else truth[p] for p in a_ends}
        held = [v for values in values_per_partition(b.bootstrap, remote).values() for v in values]
        on_b = read_on_target(tgt, b, group, remote, b_ends, f"{group}-app-on-b") if done.returncode == 0 else []
        twice, skipped = once_per_group(on_a + on_b, held)
        covered = _synced_to(b, topic)
    return {
        "a_nodes": nodes,
        "produced": produced,
        "a_records": sum(a_ends.values()),
        "b_records_after_kill": sum(b_ends.values()),
        "lag_before_stall": lag_before_stall,
        "lag_at_kill": sum(truth.values()),
        "copied_after_resume": sum(b_ends.values()) - before_resume,
        "unlisted": sum(unlisted.values()),
        "failover_exit": done.returncode,
        "failover_stderr": done.stderr[-2000:],
        "failover_wall_s": wall_s,
        "kill_to_failed_over_s": kill_to_failed_over_s,
        "not_replicated_reported": point.get("not_replicated_at_least"),
        "bound_at_most_truth": bool(bound) and all(bound[p] <= truth[p] for p in truth),
        "bound_at_least_truth_less_unlisted": bool(bound) and all(bound[p] >= truth[p] - unlisted[p] for p in truth),
        "methods": sorted({g["method"] for g in report.get("groups", [])}),
        "landings": [
            {k: g.get(k) for k in ("partition", "checkpoint_upstream_offset", "checkpoint_downstream_offset", "offset")}
            for g in report.get("groups", [])
        ],
        "b_ends": b_ends,
        "synced_to": covered,
        "billing": {
            "on_a": len(on_a),
            "on_b": len(on_b),
            "read_twice": twice,
            "read_twice_syncs_cover": twice_covered(on_a, on_b, covered),
            "skipped": skipped,
        },
    }


def failed_checks(scenario: str, r: dict[str, Any]) -> list[str]:
    """What the run did not show: empty when it showed every must-show of its scenario."""
    if scenario == "merged":
        return cutover_merged.failed_checks(r)
    if scenario == "planned":
        groups = r["groups"].values()
        checks = {
            "cutover exit 0": r["cutover_exit"] == 0,
            "the run handed over": " handed " in r["handover"] and "over in " in r["handover"],
            "the run stood down and exited 0": r["run_stood_down"] and r["run_exit"] == 0 and not r["run_traceback"],
            "nothing read twice": all(g["read_twice"] == 0 for g in groups),
            "nothing skipped": all(g["skipped"] == 0 for g in groups),
            "every record processed once across A and B": all(g["on_a"] + g["on_b"] == r["a_records"] for g in groups),
            "B holds every record of A once, in order": r["copy_exact"],
        }
    else:
        checks = {
            "lag of at least 50,000 at the kill": r["lag_at_kill"] >= 50_000,
            "killed while the run copied": r["copied_after_resume"] > 0,
            "failover exit 0": r["failover_exit"] == 0,
            "failover within 60 s": r["failover_wall_s"] < 60,
            "not replicated <= truth": r["bound_at_most_truth"],
            "not replicated >= truth - unlisted": r["bound_at_least_truth_less_unlisted"],
            "nothing B holds skipped": r["billing"]["skipped"] == 0,
            "nothing the syncs cover read twice": r["billing"]["read_twice_syncs_cover"] == 0,
        }
    return [name for name, ok in checks.items() if not ok]


SCENARIOS: dict[str, Scenario] = {"planned": planned, "unplanned": unplanned, "merged": cutover_merged.merged}


def one_run(name: str, number: int, args: argparse.Namespace, runtime: KafkaRuntime) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"mm2py-cutover-{name}-"))
    started = time.monotonic()
    try:
        result: dict[str, Any] = {"scenario": name, "run": number, **SCENARIOS[name](args, runtime, work)}
        result["failed_checks"] = failed_checks(name, result)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # recorded, and the next run goes on
        error = "".join(traceback.format_exception(exc))[-4000:]
        result = {"scenario": name, "run": number, "error": error, "failed_checks": ["raised"]}
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["work_dir"] = str(work)
    for data in work.glob("*/node-*/data"):  # the records; the logs stay for a look
        shutil.rmtree(data, ignore_errors=True)
    return result


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--runs", type=int, default=3, help="runs of each scenario (default 3)")
    parser.add_argument("--rate", type=float, default=5000.0, help="records/s written to A, or to A, C and D together")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the sources' topic (default 8)")
    parser.add_argument("--seconds", type=float, default=60.0, help="planned, merged: seconds of load (default 60)")
    parser.add_argument("--behind", type=int, default=100_000, help="planned: records `behind` ends short of A's end")
    parser.add_argument("--c-behind", type=int, default=50_000, help="merged: records billing ends short of C's end")
    parser.add_argument("--d-behind", type=int, default=80_000, help="merged: records billing ends short of D's end")
    parser.add_argument("--billing-records", type=int, default=50_000, help="unplanned: records billing processes")
    parser.add_argument("--freeze-seconds", type=float, default=24.0, help="unplanned: the run's SIGSTOP (24 s)")
    parser.add_argument(
        "--range-max-records",
        type=int,
        default=5000,
        help="unplanned: copy in rounds of at most this many records per partition (default 5,000; 0: follow, the "
        "default mode, which catches up within the 1 s between two kept listings)",
    )
    parser.add_argument("--a-nodes", type=int, default=3, help="unplanned: nodes of A, all SIGKILLed (default 3)")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)  # unwinds like Ctrl-C: brokers, run and roles are stopped
    runtime = KafkaRuntime.locate()
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    results: dict[str, Any] = {
        "environment_before": environment(kafka=runtime.version, args={k: str(v) for k, v in vars(args).items()}),
        "runs": [],
    }
    try:
        for name in names:
            for number in range(1, args.runs + 1):
                result = one_run(name, number, args, runtime)
                results["runs"].append(result)
                print(json.dumps(result), flush=True)
    finally:
        results["environment_after"] = {"loadavg": os.getloadavg()}
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / time.strftime(f"cutover-drill-{args.scenario}-%Y%m%d-%H%M%S.json")
        path.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"results: {path}", flush=True)
    failed = [r for r in results["runs"] if r["failed_checks"]]
    for name in names:
        runs = [r for r in results["runs"] if r["scenario"] == name]
        print(f"{name}: {len(runs) - sum(1 for r in failed if r in runs)} of {len(runs)} runs passed every check")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

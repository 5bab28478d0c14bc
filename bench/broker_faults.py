"""The broker-failure campaign of issue 20 at full size: ``python -m bench.broker_faults --scenario NAME --runs N``.

Each run is one scenario of ``tests/harness/fault_scenarios.py`` (the code ``tests/realkafka/test_broker_failures.py``
runs once, scaled down, in ``make test``) between a three-node source and a three-node target (RF 3,
min.insync.replicas 2), with every record checked. Defaults are the issue's must-shows: 1,000,000 records of
100 bytes over 8 partitions per ``--once`` run, the node killed at 40 % of the copy, 20 runs, rolling restarts
20 s apart, 4,000 records/s in continuous mode, a 60 s SIGSTOP, a partition offline for 60 s.

Prints one line per run (exit code, seconds, lost, duplicated, reordered, which node went down at what share of
the copy) and a summary; writes everything measured to ``bench-results/broker-faults-<scenario>-<time>.json``.
The clusters start once per invocation; a run that raised is recorded with its error, the clusters are brought
back (every node running and in sync) and the next run goes on. Scenarios (``--scenario all`` runs each in turn):

- ``target-leader-kill``, ``source-leader-kill``: SIGKILL of the node leading most partitions at ``--at``;
- ``rolling-{sigterm,sigkill}-{target,source}-{continuous,once}``: each node of that cluster in turn, ``--gap``
  seconds apart (at full speed a ``--once`` copy may end before the last node: the rows say which were skipped);
- ``stall``: the target's busiest leader SIGSTOPped for ``--stall-seconds``, then SIGCONT;
- ``churn``: replicas reordered or moved and preferred leaders elected every ``--churn-interval`` s, for
  ``--churn-seconds`` of continuous copying (``churn-once``: during a ``--once`` copy);
- ``offline-once``: a partition whose only replica is down when a ``--once`` run starts, back after
  ``--offline-seconds``; ``offline-continuous``: the same during a continuous copy.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from bench.contenders import environment
from tests.harness.broker_faults import await_in_sync, fault_cluster
from tests.harness.fault_bed import Bed, Outcome
from tests.harness.fault_scenarios import (
    churn_continuous,
    churn_once,
    leader_kill,
    partition_offline_continuous,
    partition_offline_once,
    rolling_continuous,
    rolling_once,
    stall_leader,
)
from tests.harness.kafka_harness import client_config
from tests.harness.real_kafka import PINNED_VERSION, KafkaRuntime

REPO = Path(__file__).resolve().parents[1]
Scenario = Callable[[Bed, argparse.Namespace], Outcome]


def _rolling(side: str, how: str, mode: str) -> Scenario:
    if mode == "once":
        return lambda bed, a: rolling_once(bed, a.records, side=side, how=how, gap_s=a.gap, start_at=a.start_at)
    return lambda bed, a: rolling_continuous(bed, [(side, how)], rate=a.rate, gap_s=a.gap)


SCENARIOS: dict[str, Scenario] = {
    "target-leader-kill": lambda bed, a: leader_kill(bed, a.records, side="target", at=a.at),
    "source-leader-kill": lambda bed, a: leader_kill(bed, a.records, side="source", at=a.at),
    **{
        f"rolling-{how}-{side}-{mode}": _rolling(side, how, mode)
        for how in ("sigterm", "sigkill")
        for side in ("target", "source")
        for mode in ("continuous", "once")
    },
    "stall": lambda bed, a: stall_leader(bed, a.records, seconds=a.stall_seconds, at=a.at),
    "churn": lambda bed, a: churn_continuous(bed, rate=a.rate, seconds=a.churn_seconds, interval_s=a.churn_interval),
    "churn-once": lambda bed, a: churn_once(bed, a.records, interval_s=a.churn_interval),
    "offline-once": lambda bed, a: partition_offline_once(bed, a.records // 2, seconds=a.offline_seconds),
    "offline-continuous": lambda bed, a: partition_offline_continuous(bed, seconds=a.offline_seconds, rate=a.rate),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", required=True, choices=[*SCENARIOS, "all"])
    parser.add_argument("--runs", type=int, default=20, help="runs per scenario (default 20)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records per --once run (default 1,000,000)")
    parser.add_argument("--at", type=float, default=0.4, help="share of the copy at which a node goes (0.4)")
    parser.add_argument("--start-at", type=float, default=0.05, help="share of a --once copy a roll starts at")
    parser.add_argument("--gap", type=float, default=20.0, help="seconds from one node of a roll to the next (20)")
    parser.add_argument("--rate", type=float, default=4000.0, help="records/s in continuous mode (4,000)")
    parser.add_argument("--stall-seconds", type=float, default=60.0)
    parser.add_argument("--offline-seconds", type=float, default=60.0)
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--churn-interval", type=float, default=3.0)
    parser.add_argument("--source-version", default=PINNED_VERSION, help=f"Kafka of the source ({PINNED_VERSION})")
    parser.add_argument("--target-version", default=PINNED_VERSION, help=f"Kafka of the target ({PINNED_VERSION})")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    return parser.parse_args(argv)


def recover(bed: Bed) -> None:
    """After a run that raised: every node running (and thawed) again, every partition in sync."""
    for cluster in (bed.source, bed.target):
        for node in cluster.nodes:
            if not node.running:
                cluster.restart_node(node.node_id)
            else:
                node.send_signal(signal.SIGCONT)  # a node left frozen
        await_in_sync(cluster)


def drop_remote_topic(bed: Bed, outcome: Outcome) -> None:
    """A million records RF 3 is about 400 MB on the target: each run's copy goes once it was found exact. A copy
    that is not stays for diagnosis (kafka.tools.DumpLogSegments shows each batch's producer id, epoch and
    sequences), as long as the clusters run."""
    topic = outcome.notes.get("remote_topic")
    if topic and outcome.exit_code == 0 and outcome.comparison.exact:
        admin = AdminClient(client_config(bed.target.bootstrap))
        admin.delete_topics([topic], operation_timeout=30)[topic].result(60)


def summary(name: str, runs: list[dict[str, Any]]) -> str:
    done = [r for r in runs if "error" not in r]
    exits = sum(1 for r in done if r["exit_code"] == 0)
    total = {k: sum(r["comparison"][k] for r in done) for k in ("lost", "duplicated", "reordered", "unexpected")}
    seconds = sorted(r["seconds"] for r in done)
    median = seconds[len(seconds) // 2] if seconds else 0.0
    return (
        f"{name}: {exits} of {len(runs)} runs exited 0 ({len(runs) - len(done)} raised); lost {total['lost']}, "
        f"duplicated {total['duplicated']}, reordered {total['reordered']}, unexpected {total['unexpected']}; "
        f"median {median:.1f} s, max {max(seconds, default=0.0):.1f} s"
    )


def campaign(bed: Bed, name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for i in range(1, args.runs + 1):
        try:
            outcome = SCENARIOS[name](bed, args)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # recorded (the harness fails with pytest's Failed too), and the campaign goes on
            runs.append({"scenario": name, "run": i, "error": "".join(traceback.format_exception(exc))[-4000:]})
            print(f"{i:>3} {name:<22} raised {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            recover(bed)
            continue
        runs.append({"run": i, **outcome.as_dict()})
        print(f"{i:>3} {outcome.row()}", flush=True)
        drop_remote_topic(bed, outcome)
    print(summary(name, runs), flush=True)
    return runs


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kafka_harness.librdkafka").setLevel(logging.CRITICAL)
    work = Path(tempfile.mkdtemp(prefix="mm2py-broker-faults-"))
    source = fault_cluster(work / "source", KafkaRuntime.locate(args.source_version))
    target = fault_cluster(work / "target", KafkaRuntime.locate(args.target_version))
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    results: dict[str, Any] = {"work_dir": str(work), "scenarios": {}}
    print(f"broker faults: {', '.join(names)}, {args.runs} run(s) each, work dir {work}", flush=True)
    try:
        source.start()
        target.start()
        results["environment_before"] = environment(
            kafka_source=source.runtime.version,
            kafka_target=target.runtime.version,
            args={k: str(v) for k, v in vars(args).items()},
        )
        bed = Bed(source, target, work)
        for name in names:
            results["scenarios"][name] = campaign(bed, name, args)
    finally:
        source.stop(timeout=3.0)
        target.stop(timeout=3.0)
        results["environment_after"] = {"loadavg": os.getloadavg()}
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / time.strftime(f"broker-faults-{args.scenario}-%Y%m%d-%H%M%S.json")
        path.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"results: {path}", flush=True)


if __name__ == "__main__":
    main()

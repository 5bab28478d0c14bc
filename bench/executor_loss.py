"""An executor JVM SIGKILLed in the middle of ``mm2py run`` on a Spark standalone cluster (issue 22).

Why: on a real cluster an executor is a machine, and machines die. Three one-node Apache Kafka source clusters
(dc1, dc2, dc3, topic ``orders``) are merged into one target cluster (IdentityReplicationPolicy) by ``mm2py run
--master spark://...`` on a standalone master with two workers; once records are arriving on the target, the
executor JVM running the most copy tasks is SIGKILLed. Spark runs the lost tasks again (on the other executor,
or on the one the worker starts in its place) and each retried attempt resumes from the progress its predecessor
recorded, so:

- ``--mode once``: ``mm2py run --once`` still exits 0 with every record on the target;
- ``--mode continuous``: the run carries on while load keeps arriving; once the load stops and the target holds
  everything, SIGTERM ends it with exit 0 within seconds, its progress recorded;
- ``--mode stop-at-loss``: as continuous, but SIGTERM comes as soon as the driver noticed the lost executor, while
  the lost tasks wait for a task slot: it still exits 0 within seconds, and a ``--once`` run then copies the rest.

Every record is identified by ``<dc>/<partition>/<sequence>`` (tests/harness/sequenced.py), so the result says
one by one how many were lost, duplicated (re-copied: only what the lost tasks copied after they last recorded
progress, about ``min(offset.flush.interval.ms, 1 s)`` of copying) and reordered within a source partition.
How many task attempts Spark made, and why some failed, comes from Spark's event log.

One JSON object per scenario run on stdout (and all of them in bench-results/executor-loss-*.json):

    python -m bench.executor_loss [--mode once|continuous|stop-at-loss|both|all] [--records N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.harness.executor_loss import Params, Scene, run_scenario

REPO = Path(__file__).resolve().parents[1]


def failed_checks(result: dict[str, Any]) -> list[str]:
    """What the run did not show: empty when it proved every promise of the scenario."""
    lost_tasks = [a for a in result["spark"]["failed_attempts"] if a["reason"] == "ExecutorLostFailure"]
    checks = {
        "exit code 0": result["exit_code"] == 0,
        "nothing lost": result["lost"] == 0,
        "order kept per source partition": result["reordered"] == 0,
        "nothing unexpected": result["unexpected"] == 0,
        "the kill failed a running task": bool(lost_tasks),
        "duplicates only from the lost tasks' unrecorded progress": result["duplicates"]["explained_by_lost_tasks"],
        "progress recorded to the end": result["progress_lag_after_exit"] == 0,
    }
    if result["scenario"] != "once":
        checks["exit within 10 s of SIGTERM"] = result["sigterm_to_exit_s"] <= 10
    if result["scenario"] == "stop-at-loss":
        checks["--once after it exits 0"] = result["once_after_exit_code"] == 0
    return [name for name, ok in checks.items() if not ok]


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mode",
        choices=("once", "continuous", "stop-at-loss", "both", "all"),
        default="both",
        help="both: once and continuous; all: and stop-at-loss (continuous, SIGTERM as soon as the executor is "
        "lost, then --once copies the rest)",
    )
    parser.add_argument("--records", type=int, default=300_000, help="backlog per source cluster (default 300000)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of orders in each source (default 4)")
    parser.add_argument("--value-size", type=int, default=1000, help="bytes per record value (default 1000)")
    parser.add_argument("--kill-at", type=float, default=0.25, help="share of the backlog copied at the kill")
    parser.add_argument("--rate", type=int, default=2000, help="continuous: records/s per source while it runs")
    parser.add_argument("--after-kill-seconds", type=float, default=15.0, help="continuous: load after the kill")
    parser.add_argument(
        "--worker-cores",
        type=int,
        default=0,
        help="cores of each of the two workers (default: 1 for once; 2 for continuous, whose 3 flows need a "
        "task slot each to follow their partitions)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each scenario (default 1)")
    args = parser.parse_args()
    # A SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the brokers and the Spark cluster are stopped.
    signal.signal(signal.SIGTERM, _interrupted)
    modes = {"both": ("once", "continuous"), "all": ("once", "continuous", "stop-at-loss")}.get(args.mode, (args.mode,))
    results: list[dict[str, Any]] = []
    for mode in modes:
        for run in range(1, args.runs + 1):
            params = Params(
                mode,
                records=args.records,
                partitions=args.partitions,
                value_size=args.value_size,
                kill_at=args.kill_at,
                worker_cores=args.worker_cores or (1 if mode == "once" else 2),
                rate=args.rate,
                after_kill_s=args.after_kill_seconds,
            )
            work = Path(tempfile.mkdtemp(prefix=f"mm2py-executor-loss-{mode}-"))
            started = time.monotonic()
            with Scene(work, params.worker_cores, params.partitions) as scene:
                result = {"run": run, "worker_cores": params.worker_cores, **run_scenario(scene, params, work)}
            result["wall_s"] = round(time.monotonic() - started, 1)
            for data in work.glob("*/node-*/data"):  # gigabytes of records; the logs stay for a look
                shutil.rmtree(data, ignore_errors=True)
            result["failed_checks"] = failed_checks(result)
            results.append(result)
            print(json.dumps(result), flush=True)
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / time.strftime("executor-loss-%Y%m%d-%H%M%S.json")).write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if any(r["failed_checks"] for r in results) else 0)


if __name__ == "__main__":
    main()

"""An executor JVM SIGKILLed in the middle of ``mm2py run`` on a two-worker Spark standalone cluster, three real
Kafka sources merged into one real Kafka target: the compact form of ``bench/executor_loss.py`` (issue 22).

Spark runs the lost copy tasks again; each retried attempt resumes from the progress its predecessor recorded.
So ``--once`` exits 0 and continuous mode carries on (and exits 0 within 10 s of SIGTERM), with every record on
the target, each source partition in order, and records copied twice only where a lost task had copied past
its last recorded progress (tests/harness/executor_loss.py counts them record by record).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness.executor_loss import Params, Scene, run_scenario
from tests.harness.real_kafka import KafkaRuntime

# One scenario at a time (a module is one worker's unit, tests/conftest.py): each starts four Kafka clusters and a
# Spark standalone cluster, and a kill aimed at a running copy task must not miss it because the other scenario
# took the cores.
pytestmark = [pytest.mark.realkafka, pytest.mark.spark, pytest.mark.timeout(600)]

SCENARIOS = [
    # About 30 s of copying in two one-core executors: the kill lands well inside it.
    Params("once", records=100_000, partitions=4, value_size=1000, kill_at=0.2, worker_cores=1, timeout_s=300),
    # Three flows following need a task slot each: two workers of two cores. Load arrives all along.
    Params(
        "continuous",
        records=20_000,
        partitions=4,
        value_size=1000,
        kill_at=0.2,
        worker_cores=2,
        rate=1000,
        after_kill_s=5.0,
        timeout_s=300,
    ),
]


def _run(params: Params, work: Path, runtime: KafkaRuntime) -> dict[str, Any]:
    try:
        with Scene(work, params.worker_cores, params.partitions, runtime) as scene:
            return run_scenario(scene, params, work)
    finally:
        for data in work.glob("*/node-*/data"):  # hundreds of MB of records; the logs stay
            shutil.rmtree(data, ignore_errors=True)


@pytest.mark.parametrize("params", SCENARIOS, ids=[p.mode for p in SCENARIOS])
def test_a_lost_executor_loses_no_record_and_keeps_each_partition_s_order(
    params: Params, kafka_runtime: KafkaRuntime, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    result = _run(params, tmp_path, kafka_runtime)
    print(json.dumps(result))  # every number of the run, shown with -rA or when an assertion fails
    for key in ("expected", "duplicated", "sigterm_to_exit_s", "killed", "spark", "duplicates"):
        record_property(key, result.get(key))
    lost_tasks = [a for a in result["spark"]["failed_attempts"] if a["reason"] == "ExecutorLostFailure"]
    assert lost_tasks, f"the kill failed no running copy task, so it proved nothing: {result}"
    assert all(a["next_attempt_on"] is not None for a in lost_tasks), result["spark"]
    assert result["exit_code"] == 0, result["log"]
    assert (result["lost"], result["reordered"], result["unexpected"]) == (0, 0, 0), result
    assert result["duplicates"]["explained_by_lost_tasks"], result["duplicates"]
    assert result["progress_lag_after_exit"] == 0, result
    if params.mode == "continuous":
        assert result["sigterm_to_exit_s"] <= 10, result

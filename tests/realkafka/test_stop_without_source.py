"""SIGTERM ends a continuous run whose source cluster is gone: the copy tasks, which keep retrying the dead
bootstrap, are given ``task.shutdown.graceful.timeout.ms`` (Connect's key) and then cancelled, and the run exits 0
having released its lease, so that ``mm2py failover`` need not wait for the lease to lapse.

A is a cluster of this test's own (every node of it is SIGKILLed while a backlog is being copied); B is the
session's shared target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mm2py.control.lease import lease_group
from mm2py.librdkafka.admin import ClusterAdmin
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import make_records, produce, read_all, records_in
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
BACKLOG = 40_000
GRACE_MS = 3_000
# SIGTERM to exit: the grace period, then Spark's cancellation and its context's stop.
EXIT_WITHIN_S = GRACE_MS / 1000 + 30


@pytest.mark.parametrize("tasks", ["rounds", "follow"])
def test_sigterm_ends_a_run_whose_source_died_mid_copy_within_the_grace_period_and_releases_its_lease(
    tasks: str,
    kafka_runtime: KafkaRuntime,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    b = real_kafka_target
    with KafkaCluster(tmp_path / "a", 1, runtime=kafka_runtime) as a:
        topic = a.create_topic(unique_topic("orders"), partitions=PARTITIONS)
        settings = f"mm2py.continuous.tasks = {tasks}\nmm2py.range.max.records = 50\n"
        config, src, tgt = one_flow_config(tmp_path / "mm2.properties", a.bootstrap, b.bootstrap, topic, settings)
        config.write_text(f"{config.read_text()}task.shutdown.graceful.timeout.ms = {GRACE_MS}\n")
        remote = f"{src}.{topic}"
        records = make_records(BACKLOG, partitions=PARTITIONS, seed=37)
        produce(a.bootstrap, topic, records)
        with MirrorRun(config, tmp_path / "run.log") as run:
            run.wait_for(lambda: records_in(b.bootstrap, remote) > 0, 180, "the copy to start")
            for node in a.nodes:
                a.kill_node(node.node_id)
            copied_at_kill = records_in(b.bootstrap, remote)
            if tasks == "rounds":  # small ranges, one job each: A dies with a job in flight
                assert copied_at_kill < BACKLOG, "the backlog was copied before A was killed"
            # Following tasks may have copied it all already: they then follow a source that is gone.
            stopping = time.monotonic()
            code = run.stop(timeout=120)
            stop_s = time.monotonic() - stopping
            log = run.log_text()
        assert code == 0, log
        assert stop_s < EXIT_WITHIN_S, f"{stop_s:.1f} s from SIGTERM to exit\n{log}"
        if "did not end within task.shutdown.graceful.timeout.ms" in log:
            assert f"({GRACE_MS} ms)" in log and "copied again by the next run" in log, log
        # The lease is left at once, not after its session timeout.
        members = ClusterAdmin(tgt, {"bootstrap.servers": b.bootstrap}).describe_group(lease_group(src, tgt)).members
        assert not members, members

    # What B holds of each partition is a prefix of A's, each record once and in order.
    held = sorted(read_all(b.bootstrap, remote), key=lambda r: (r.partition, r.offset))
    for p in range(PARTITIONS):
        produced = [(r.key, r.value) for r in records if r.partition == p]
        on_b = [(r.key, r.value) for r in held if r.partition == p]
        assert on_b == produced[: len(on_b)], f"partition {p}: B is not a prefix of A"
    print(f"FIGURES tasks={tasks} copied at kill {copied_at_kill} of {BACKLOG}, SIGTERM to exit {stop_s:.1f} s")

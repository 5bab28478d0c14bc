"""Exactly-once on the batch path through crashes, on real Kafka (issue 21 (b) and (c)).

- ``mm2py run`` SIGKILLed five times (every process of the run at once) while a producer keeps writing to the
  source: each restart fences the killed run's transactional producers, whose open transaction is aborted, and
  resumes from the progress committed with the records; a read_committed reader of the target sees every source
  record once, in order, and ``mm2py verify`` agrees.
- The target node that coordinates a task's transactions SIGKILLed mid-copy (three-node target, RF 3,
  min.insync.replicas 2, transaction state log RF 3): the task finds the new coordinator and the run finishes
  with nothing lost or copied twice.

Counts (lost, duplicated, extra, reordered) come from tests/harness/exactly_once.py, the coordinator from
kafka-python's DescribeTransactions and the ``__transaction_state`` leader, not from the code under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.exactly_once import (
    TargetOffsets,
    Transaction,
    TransactionDescriber,
    copy_faults,
    transaction_state_partition,
)
from tests.harness.faults import BurstProducer, LandingWatch, MirrorRun
from tests.harness.kafka_harness import make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import REAL_SMALL_CLUSTER, unique_alias, write_real_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

KILLS = 5
PARTITIONS = 4
FENCED_LINE = "before copying exactly-once"  # the driver's log line once every earlier producer is fenced
# The target's internal topics and remote topic on three nodes; the syncs topics stay on the one-node source.
THREE_NODE_TARGET = REAL_SMALL_CLUSTER.replace("replication.factor = 1", "replication.factor = 3").replace(
    "offset-syncs.topic.replication.factor = 3", "offset-syncs.topic.replication.factor = 1"
)
NO_FAULTS = {"lost": 0, "duplicated": 0, "extra": 0, "reordered": 0}


def _eos_config(
    path: Path, source: KafkaCluster, target: KafkaCluster, topic: str, settings: str, extra: str = ""
) -> tuple[Path, str, str]:
    """An exactly-once flow ``src->tgt`` of ``topic``; ``extra`` may name the aliases as {src} and {tgt}."""
    src, tgt = unique_alias("src"), unique_alias("tgt")
    body = f"{src}->{tgt}.enabled = true\ntopics = {topic}\n{tgt}.exactly.once.source.support = enabled\n"
    config = write_real_config(
        path, {src: source.bootstrap, tgt: target.bootstrap}, body + extra.format(src=src, tgt=tgt), settings
    )
    return config, src, f"{src}.{topic}"


def _faults(source: KafkaCluster, topic: str, target: KafkaCluster, remote: str) -> dict[str, int]:
    """Source (read_committed) against target (read_committed), record by record."""
    return copy_faults(read_all(source.bootstrap, topic), read_all(target.bootstrap, remote, timeout=60))


def test_mm2py_killed_five_times_under_load_then_once_leaves_every_record_exactly_once_in_order(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    topic = real_kafka.create_topic(unique_topic("eos-kill5"), partitions=PARTITIONS)
    produce(real_kafka.bootstrap, topic, make_records(20_000, partitions=PARTITIONS, seed=71, value_size=64))
    # No lease: after a SIGKILL only the transactional fencing keeps the dead run's producers from committing
    # (and the next run need not wait out the dead holder's group session).
    config, _src, remote = _eos_config(
        tmp_path / "mm2.properties",
        real_kafka,
        real_kafka_target,
        topic,
        REAL_SMALL_CLUSTER,
        "mm2py.lease.enabled = false\n",
    )
    load = BurstProducer(real_kafka.bootstrap, topic, PARTITIONS, burst=200, interval_s=0.1).start()
    left_open: list[int] = []  # records of the transaction each kill left open (0: it landed between two)
    try:
        with TargetOffsets(real_kafka_target.bootstrap, remote, PARTITIONS) as offsets:
            for n in range(1, KILLS + 1):
                with MirrorRun(config, tmp_path / f"run-{n}.log", verbose=True) as run:
                    run.wait_for(lambda: FENCED_LINE in run.log_text(), 180, f"run {n} fencing its predecessors")
                    fenced = offsets.stable()  # the predecessor's open transaction is aborted by now
                    # Kill once this run has committed a transaction of its own and has the next one open.
                    run.wait_for(
                        lambda: offsets.stable() > fenced and offsets.open_records() > 0,  # noqa: B023
                        120,
                        f"run {n} committing with a transaction open",
                    )
                    run.kill()
                left_open.append(offsets.open_records())
    finally:
        produced = load.stop()
    record_property("records_produced_under_load", len(produced))
    record_property("open_records_left_by_each_kill", left_open)
    assert len(produced) > 0
    # A kill can land just after a commit and before the next batch is sent; most must land inside one.
    assert sum(1 for n in left_open if n > 0) >= 3, left_open

    once = time.monotonic()
    result = mm2py("run", str(config), "--once", timeout=300)
    assert result.returncode == 0, result.stderr[-5000:]
    record_property("final_once_seconds", round(time.monotonic() - once, 1))
    faults = _faults(real_kafka, topic, real_kafka_target, remote)
    record_property("faults", faults)
    assert faults["source"] == 20_000 + len(produced)
    assert {k: faults[k] for k in NO_FAULTS} == NO_FAULTS, faults
    assert faults["target"] == faults["source"]
    verified = mm2py("verify", str(config), "--json", timeout=300)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    record_property("seconds", round(time.monotonic() - started, 1))


def test_the_target_node_coordinating_the_transactions_killed_mid_copy_loses_and_duplicates_nothing(
    real_kafka: KafkaCluster,
    real_kafka_cluster: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    source, target = real_kafka, real_kafka_cluster
    topic = source.create_topic(unique_topic("eos-coordinator"), partitions=PARTITIONS)
    # Enough records for the kill to land while a task's transaction is open (seen by DescribeTransactions).
    records = make_records(300_000, partitions=PARTITIONS, seed=81, value_size=64, with_headers=False)
    produce(source.bootstrap, topic, records)
    config, src, remote = _eos_config(
        tmp_path / "mm2.properties",
        source,
        target,
        topic,
        THREE_NODE_TARGET,
        "{tgt}->{src}.emit.heartbeats.enabled = false\n",
    )
    target.create_topic(remote, PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    # Two task slots (local[2]); which of them copies which partition is a hash of the topic name.
    transactional_ids = [f"{src}-mm2-MirrorSourceConnector-{slot}" for slot in (0, 1)]
    victim, landed = -1, 0
    try:
        with (
            MirrorRun(config, tmp_path / "run.log", "--once", verbose=True) as run,
            LandingWatch(target.bootstrap, remote, PARTITIONS) as watch,
            TransactionDescriber(target.bootstrap) as describer,
        ):

            def ongoing() -> Transaction | None:
                return next((t for t in describer.describe(transactional_ids).values() if t.state == "ONGOING"), None)

            # Kill its coordinator while a task has a transaction open: records sent, none of them committed.
            described = poll_until(
                ongoing, 120, "a task's transaction open", process=run.proc, log=run.log, interval=0.01
            )
            transactional_id, victim = described.transactional_id, described.coordinator
            state_partition = transaction_state_partition(transactional_id, 5)
            assert target.partition_state("__transaction_state", state_partition)[0] == victim
            landed = watch.sample()  # committed so far (last stable offsets)
            assert run.proc.poll() is None, "the run ended before the kill"
            target.kill_node(victim)
            killed = time.monotonic()
            code = run.proc.wait(timeout=300)
            record_property("kill_to_exit_seconds", round(time.monotonic() - killed, 1))
            log = run.log_text()
    finally:
        if victim > 0:
            target.restart_node(victim)
    record_property(
        "coordinator_killed", {"id": transactional_id, "node": victim, "__transaction_state": state_partition}
    )
    record_property("transaction_at_kill", {"state": described.state, "epoch": described.producer_epoch})
    record_property("committed_offsets_at_kill", landed)
    assert landed < len(records), "the coordinator was not killed inside the copy"
    assert code == 0, log[-8000:]
    faults = _faults(source, topic, target, remote)
    record_property("faults", faults)
    assert {k: faults[k] for k in NO_FAULTS} == NO_FAULTS, faults
    assert faults["target"] == faults["source"] == len(records)
    record_property("seconds", round(time.monotonic() - started, 1))

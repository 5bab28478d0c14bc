"""A flow handed between Apache Kafka's MirrorMaker 2 and mm2py, both exactly-once, on real Kafka (issue 21 (d)).

Both tools name a source task's transactional producer ``<source>-mm2-MirrorSourceConnector-<task>`` (KIP-618's
``<group.id>-<connector>-<task>`` with a dedicated MM2's group ``<source>-mm2``; mm2py's task slots use the same
numbers), so whichever starts second fences the other: its InitProducerId bumps the id's epoch and aborts the
other's open transaction, and every later request of the fenced producer is refused. The predecessor is alive
when the successor starts, under a producer load, and must be the one that stops:

- MM2 -> mm2py: MM2 keeps running; mm2py's driver fences its producers before reading the progress, and MM2's
  task fails on its next send or commit (Connect never re-initializes a fenced task's producer);
- mm2py -> MM2: mm2py is stopped (SIGSTOP) inside an open transaction and resumed once MM2 has taken over and
  copied everything, as a zombie would; it must exit 3 without committing anything. (A running mm2py stops too:
  its driver bumps each id's epoch before every job expecting the epoch it holds, and the coordinator refuses
  that once MM2 took the id; test_real_kafka_exactly_once_fencing.py shows it.)

Both of mm2py's copy paths write under those ids (the record path's tasks initialize them with librdkafka, and a
fenced one ends its task without copying more), so the hand-over runs once per path.

A read_committed reader of the target sees every source record exactly once, in order. ``tasks.max = 2``: MM2
fences only the ids of its own tasks, so it must run at least as many tasks as mm2py has task slots
(``local[2]``: two) for every mm2py producer to be fenced when MM2 takes over. Until a paused run's open transaction
is aborted, the last stable offset of the partitions it wrote holds back every read_committed reader, and when it
holds progress (the record path writes a range's progress just before its commit) that includes MM2's start-up
read of the offsets topic: the coordinator aborts it after the producers' ``transaction.timeout.ms``, set to
20 s here for both tools (mm2py's default is 300 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.exactly_once import Transaction, TransactionDescriber, copy_faults
from tests.harness.faults import BurstProducer, MirrorRun, session_processes
from tests.harness.kafka_harness import Record, end_offsets, make_records, produce, read_all
from tests.harness.mirror_maker import MirrorMaker, connect_offsets, properties_text
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import unique_alias

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 3
NO_FAULTS = {"lost": 0, "duplicated": 0, "extra": 0, "reordered": 0}
# How a fenced MM2 task's producer learns it. A commit in flight when mm2py's fencing aborted the transaction can also
# be refused as InvalidTxnStateException (Kafka 4.3, seen in CI: fatal to the producer, the task dies the same way).
MM2_FENCED = ("ProducerFencedException", "InvalidProducerEpochException", "InvalidTxnStateException")


def _properties(path: Path, alias: str, source: KafkaCluster, target: KafkaCluster, topic: str, copy: str) -> Path:
    """One file for both tools (as test_mm2_beside.py), exactly-once on the target, read_committed source; mm2py
    on the ``copy`` path."""
    settings = {
        "mm2py.copy.mode": copy,
        "clusters": f"{alias}, dst",
        f"{alias}.bootstrap.servers": source.bootstrap,
        "dst.bootstrap.servers": target.bootstrap,
        f"{alias}->dst.enabled": "true",
        f"{alias}->dst.topics": topic,
        f"dst->{alias}.emit.heartbeats.enabled": "false",
        "dst.exactly.once.source.support": "enabled",
        f"{alias}.consumer.isolation.level": "read_committed",
        "tasks.max": "2",
        "dst.producer.transaction.timeout.ms": "20000",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "plugin.discovery": "service_load",
        "dst.plugin.discovery": "service_load",
        "mm2py.spark.master": "local[2]",
        "mm2py.lease.session.timeout.ms": "6000",
        "mm2py.continuous.follow.ms": "3000",
    }
    path.write_text(properties_text(settings))
    return path


def _fenced(mirror_maker: MirrorMaker) -> bool:
    text = mirror_maker.log_tail(2_000_000)
    return any(name in text for name in MM2_FENCED)


def _signal_run(run: MirrorRun, sig: signal.Signals) -> None:
    """Send ``sig`` to every process of the run (driver, Spark's JVM, Python workers) at once."""
    for pid in session_processes(run.session):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _pause_inside_a_transaction(run: MirrorRun, describer: TransactionDescriber, ids: list[str]) -> Transaction:
    """SIGSTOP the run while one of its tasks has a transaction open (a zombie: alive, and about to go on)."""
    for _attempt in range(20):
        open_one = poll_until(
            lambda: next((t for t in describer.describe(ids).values() if t.state == "ONGOING"), None),
            120,
            "an open transaction of mm2py",
            process=run.proc,
            log=run.log,
            interval=0.01,
        )
        _signal_run(run, signal.SIGSTOP)
        still = describer.describe([open_one.transactional_id])[open_one.transactional_id]
        if still.state == "ONGOING" and still.producer_epoch == open_one.producer_epoch:
            return still
        _signal_run(run, signal.SIGCONT)  # it committed before the stop landed: try the next one
    pytest.fail(f"no stop landed inside a transaction:\n{run.log_text()[-5000:]}")


@pytest.mark.parametrize("copy", ["batch", "record"])
def test_a_flow_handed_from_mm2_to_mm2py_and_back_exactly_once_each_predecessor_fenced(
    copy: str,
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    kafka_runtime: KafkaRuntime,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    source, target = real_kafka, real_kafka_target
    alias = unique_alias("src")
    topic = source.create_topic(unique_topic("eos-handover"), PARTITIONS)
    config = _properties(tmp_path / "mm2.properties", alias, source, target, topic, copy)
    planned = mm2py("plan", str(config))
    assert f"path={copy}" in planned.stdout, planned.stdout + planned.stderr
    produce(source.bootstrap, topic, make_records(600, partitions=PARTITIONS, seed=91))
    ids = [f"{alias}-mm2-MirrorSourceConnector-{task}" for task in range(2)]

    def source_ends() -> dict[tuple[str, int], int]:
        return {(topic, p): e for p, e in end_offsets(source.bootstrap, topic).items()}

    first = MirrorMaker(kafka_runtime, config, tmp_path / "mm2-first")
    load = BurstProducer(source.bootstrap, topic, PARTITIONS, burst=150, interval_s=0.1)
    produced: list[Record] | None = None
    load_started = False
    with first, TransactionDescriber(target.bootstrap) as describer:
        first.await_progress(target.bootstrap, alias, source_ends())
        assert set(describer.describe(ids)) == set(ids), "MM2's transactional producers are not on the target"
        load.start()
        load_started = True
        # MM2 -> mm2py, MM2 still running: mm2py's driver fences MM2's producers before it reads the progress,
        # and MM2's next send or commit is refused (its task dies: Connect never re-initializes a fenced one).
        with MirrorRun(config, tmp_path / "mm2py.log", verbose=True) as run:
            try:
                run.wait_for(lambda: "before copying exactly-once" in run.log_text(), 180, "mm2py fencing MM2")
                poll_until(lambda: _fenced(first), 120, "MM2's task refused as fenced", log=first.log_path)
                first.stop()
                # mm2py -> MM2, mm2py a zombie: stopped inside a transaction, it resumes once MM2 has taken over
                # and copied everything; its transaction was aborted by MM2's InitProducerId, and it cannot
                # commit anything any more (exit 3).
                paused = _pause_inside_a_transaction(run, describer, ids)
                record_property("mm2py_paused_in", f"{paused.transactional_id} epoch {paused.producer_epoch}")
                with MirrorMaker(kafka_runtime, config, tmp_path / "mm2-second") as second:
                    produced = load.stop()
                    second.await_progress(target.bootstrap, alias, source_ends(), timeout=240)
                    taken = describer.describe([paused.transactional_id])[paused.transactional_id]
                    assert taken.producer_epoch > paused.producer_epoch, (paused, taken)
                    _signal_run(run, signal.SIGCONT)
                    # A zombie that does not exit fails with its log's tail: what it met after SIGCONT is the fault.
                    poll_until(lambda: run.proc.poll() is not None, 180, "the fenced mm2py to exit", log=run.log)
                    code = run.proc.returncode
                    # (MM2 also replicates the source's heartbeats topic, if another test made one: not compared.)
                    progress = {tp: o for tp, o in connect_offsets(target.bootstrap, alias).items() if tp[0] == topic}
                    assert progress == {tp: e - 1 for tp, e in source_ends().items()}
            finally:
                _signal_run(run, signal.SIGCONT)
                if produced is None and load_started:
                    load.stop()
    log = run.log_text()
    record_property("mm2py_exit_code_when_fenced", code)
    assert code == 3, log[-8000:]
    assert "INVALID_PRODUCER_EPOCH" in log or "PRODUCER_FENCED" in log, log[-8000:]
    assert produced is not None
    record_property("records_produced_under_load", len(produced))
    faults = copy_faults(read_all(source.bootstrap, topic), read_all(target.bootstrap, f"{alias}.{topic}"))
    record_property("faults", faults)
    assert faults["source"] == 600 + len(produced)
    assert {k: faults[k] for k in NO_FAULTS} == NO_FAULTS, faults
    assert faults["target"] == faults["source"]
    record_property("seconds", round(time.monotonic() - started, 1))

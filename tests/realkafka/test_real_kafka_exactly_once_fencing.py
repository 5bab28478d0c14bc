"""Exactly-once fencing on real Kafka: who may write a flow's transactional.ids, before a run and while it runs.

Transactions are tested on real Kafka only: tansu shows aborted records to read_committed readers and answers an
InitProducerId that carries the epoch its sender holds (KIP-360) with UNKNOWN_SERVER_ERROR
(docs/test-broker.md), and the driver bumps every task slot's epoch that way before each job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mm2py.errors import ReplicationError
from mm2py.executor import record_transactions
from mm2py.executor.contract import slot_transactional_id
from tests.harness.broker_faults import freeze, thaw
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import client_config, end_offsets, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]


def _config(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, topic: str, extra: str = ""
) -> tuple[Path, str]:
    config, src, _tgt = one_flow_config(
        tmp_path / "mm2.properties", source.bootstrap, target.bootstrap, topic, extra, exactly_once=True
    )
    return config, src


def _visible(target: KafkaCluster, topic: str) -> int:
    try:
        return len(read_all(target.bootstrap, topic))
    except LookupError:  # not created yet
        return 0


def test_ranges_and_progress_are_committed_in_transactions(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = real_kafka.create_topic(unique_topic("eos-ranges"), partitions=2)
    records = make_records(400, partitions=2, seed=5)
    produce(real_kafka.bootstrap, topic, records)
    config, src = _config(tmp_path, real_kafka, real_kafka_target, topic, "mm2py.range.max.records = 50\n")
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    remote = f"{src}.{topic}"
    assert Counter(r.value for r in read_all(real_kafka_target.bootstrap, remote)) == Counter(r.value for r in records)
    # 4 transactions per partition, each ending in a commit marker that takes an offset.
    assert end_offsets(real_kafka_target.bootstrap, remote) == {0: 204, 1: 204}
    progress = read_all(real_kafka_target.bootstrap, f"mm2-offsets.{src}.internal")
    assert {r.value for r in progress} >= {b'{"offset":199}'}


def test_a_predecessor_with_the_same_transactional_id_is_fenced_and_its_open_transaction_aborted(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = real_kafka.create_topic(unique_topic("eos-zombie"), partitions=2)
    records = make_records(100, partitions=2, seed=6)
    produce(real_kafka.bootstrap, topic, records)
    config, src = _config(tmp_path, real_kafka, real_kafka_target, topic)
    remote = real_kafka_target.create_topic(f"{src}.{topic}", partitions=2)
    # A predecessor that died mid-transaction, holding the transactional.id of task slot 0 (MM2's naming for
    # task 0 of this flow, which MirrorMaker 2 with exactly-once uses too).
    zombie = Producer(client_config(real_kafka_target.bootstrap, **{"transactional.id": slot_transactional_id(src, 0)}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(remote, b"zombie", partition=0)
    assert zombie.flush(30) == 0
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    # Fenced: what it sends now is refused with a fatal error, and it cannot commit.
    zombie.produce(remote, b"zombie-2", partition=0)
    with pytest.raises(KafkaException) as fenced:
        zombie.flush(30)
        zombie.commit_transaction(30)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), fenced.value
    # The zombie's open transaction was aborted by the fence: a read_committed reader never sees it.
    assert Counter(r.value for r in read_all(real_kafka_target.bootstrap, remote)) == Counter(r.value for r in records)


def test_a_running_flow_whose_transactional_id_another_producer_takes_stops_with_exit_3(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """MirrorMaker 2 (here a producer with its transactional.id) started on a flow mm2py copies exactly-once: mm2py
    must not take the id back at its next job, or both would copy the flow; it stops, naming the id."""
    topic = real_kafka.create_topic(unique_topic("eos-intruder"), partitions=1)
    produce(real_kafka.bootstrap, topic, make_records(500, partitions=1, seed=7))
    config, src = _config(
        tmp_path,
        real_kafka,
        real_kafka_target,
        topic,
        "mm2py.range.max.records = 100\nconsumer.poll.timeout.ms = 200\n",
    )
    remote = f"{src}.{topic}"
    with MirrorRun(config, tmp_path / "run.log") as run:
        run.wait_for(lambda: _visible(real_kafka_target, remote) >= 500, 180, "500 records copied")
        # MM2 with tasks.max = 4 (at least mm2py's slot count here): every id the flow's partition could be under.
        ids = [slot_transactional_id(src, slot) for slot in range(4)]
        intruders = [Producer(client_config(real_kafka_target.bootstrap, **{"transactional.id": i})) for i in ids]
        for intruder in intruders:
            intruder.init_transactions(30)
        produce(real_kafka.bootstrap, topic, make_records(500, partitions=1, seed=8))  # work for the next job
        run.wait_for(lambda: run.proc.poll() is not None, 120, "mm2py to stop after its id was taken")
        assert run.proc.returncode == 3, run.log_text()
        assert "fenced" in run.log_text() and any(i in run.log_text() for i in ids), run.log_text()
    # The intruders hold the ids: their own transactions commit.
    intruder = intruders[0]
    intruder.begin_transaction()
    intruder.produce(remote, b"intruder", partition=0)
    intruder.commit_transaction(30)
    assert b"intruder" in {r.value for r in read_all(real_kafka_target.bootstrap, remote)}


def test_a_record_path_abort_after_a_timed_out_record_is_refused_as_fenced_once_another_producer_took_the_id(
    kafka_runtime: KafkaRuntime, tmp_path: Path
) -> None:
    """A record-path task stalled past ``message.timeout.ms`` inside a transaction resumes to a timed-out record:
    abortable, but the abort needs a new epoch, asked for with the one the task holds (KIP-360). Once MM2 (here a
    producer with the same transactional.id) initialized the id meanwhile, the coordinator refuses it, and mm2py's
    abort must raise that fencing: swallowed, the task failed with the retriable timeout and Spark's retry took the
    id back from MM2 (a full run's MM2 hand-over test, 86b1137). A node of its own: the test stalls it."""
    with KafkaCluster(tmp_path / "kafka", 1, runtime=kafka_runtime) as cluster:
        topic = cluster.create_topic("eos-abort", 1)
        settings = client_config(
            cluster.bootstrap,
            **{"transactional.id": "dc1-mm2-MirrorSourceConnector-0", "message.timeout.ms": 1000},
        )
        zombie, reports = Producer(settings), []
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(topic, b"acknowledged", partition=0)
        assert zombie.flush(30) == 0  # the partition is in the transaction
        freeze(cluster, 1)
        try:
            zombie.produce(topic, b"stalled", partition=0, on_delivery=lambda err, _msg: reports.append(err))
            poll_until(lambda: zombie.poll(0.1) > 0 or bool(reports), 30, "the stalled record's delivery report")
        finally:
            thaw(cluster, 1)
        assert reports[0] is not None and reports[0].code() == KafkaError._MSG_TIMED_OUT
        with pytest.raises(KafkaException) as timed_out:
            zombie.commit_transaction(30)
        assert timed_out.value.args[0].txn_requires_abort() and not timed_out.value.args[0].fatal()
        Producer(
            client_config(cluster.bootstrap, **{"transactional.id": settings["transactional.id"]})
        ).init_transactions(30)
        with pytest.raises(ReplicationError) as refused:
            record_transactions.abort(zombie, settings, "flow=dc1->target topic=t partition=0")
    assert refused.value.code == "PRODUCER_FENCED" and not refused.value.retriable, refused.value.failure
    assert "abort transaction failed" in str(refused.value)

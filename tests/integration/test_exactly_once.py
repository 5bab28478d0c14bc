"""Exactly-once mode (`<target>.exactly.once.source.support = enabled`): records and progress commit together.

The test broker returns aborted records to read_committed consumers (docs/test-broker.md, *Transactions*),
so these tests cover what it can show: transactional commits, fencing of a predecessor with the same
transactional.id, and resuming after a crash mid-transaction without losing anything. That aborted data is hidden from
read_committed consumers is Kafka's part of the contract and cannot be observed here.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mm2py.executor.contract import slot_transactional_id
from tests.harness.flows_helpers import config_for, copied, start_run
from tests.harness.kafka_harness import (
    TansuBroker,
    client_config,
    create_topic,
    end_offsets,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 2
EOS = "target.exactly.once.source.support = enabled\n"


def test_ranges_and_progress_are_committed_in_transactions(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    records = make_records(400, partitions=2, seed=5)
    produce(pair["dc1"].bootstrap, "orders", records)
    config = config_for(tmp_path, pair, EOS + "mm2py.batch.max.records = 50\n")
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    target = read_all(pair["target"].bootstrap, "dc1.orders")  # read_committed
    assert Counter(r.value for r in target) == Counter(r.value for r in records)
    # 4 transactions per partition, each ending in a commit marker that takes an offset.
    assert end_offsets(pair["target"].bootstrap, "dc1.orders") == {0: 204, 1: 204}
    progress = read_all(pair["target"].bootstrap, "mm2-offsets.dc1.internal")
    assert {r.value for r in progress} >= {b'{"offset":199}'}


def test_a_predecessor_with_the_same_transactional_id_is_fenced(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    records = make_records(100, partitions=2, seed=6)
    produce(pair["dc1"].bootstrap, "orders", records)
    create_topic(pair["target"].bootstrap, "dc1.orders", 2)
    # A predecessor that died mid-transaction on partition 0, holding the transactional.id of the task slot that
    # copies it: MM2's naming for task 0 of flow dc1->target, which an MM2 with exactly-once would use too.
    zombie_id = slot_transactional_id("dc1", 0)
    zombie = Producer(client_config(pair["target"].bootstrap, **{"transactional.id": zombie_id}))
    zombie.init_transactions(10)
    zombie.begin_transaction()
    zombie.produce("dc1.orders", b"zombie", partition=0)
    assert zombie.flush(10) == 0
    config = config_for(tmp_path, pair, EOS)
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    # The predecessor is fenced: what it sends now is refused, and it cannot commit.
    errors: list[KafkaError] = []
    zombie.produce("dc1.orders", b"zombie-2", partition=0, on_delivery=lambda err, _m: errors.append(err))
    zombie.flush(10)
    assert [e.code() for e in errors] == [KafkaError.PRODUCER_FENCED]
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(10)
    assert fenced.value.args[0].code() == KafkaError.PRODUCER_FENCED
    copied = Counter(r.value for r in read_all(pair["target"].bootstrap, "dc1.orders"))
    # The zombie's aborted record stays visible on the test broker (it ignores aborts for read_committed).
    copied.pop(b"zombie", None)
    assert copied == Counter(r.value for r in records)


def test_sigkill_mid_transaction_then_once_loses_nothing(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    records = make_records(60_000, partitions=2, seed=8, value_size=64, with_headers=False)
    produce(pair["dc1"].bootstrap, "orders", records)
    config = config_for(tmp_path, pair, EOS + "mm2py.batch.max.records = 3000\nconsumer.poll.timeout.ms = 200\n")
    log = tmp_path / "run.log"
    proc = start_run(config, log)
    try:
        poll_until(
            lambda: copied(pair["target"], "dc1.orders") >= 15_000,
            180,
            "15000 records downstream",
            process=proc,
            log=log,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    copied_values = Counter(r.value for r in read_all(pair["target"].bootstrap, "dc1.orders"))
    assert not [r for r in records if r.value not in copied_values]

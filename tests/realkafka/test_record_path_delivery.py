"""The record path's target producer when a record fails, on real Kafka: nothing queued behind it may land.

librdkafka's idempotent producer lets a partition's series have gaps: records that time out are dropped, and
the records queued behind them are sent once the cluster answers again (after an epoch bump if the producer had
written before; librdkafka's INTRODUCTION.md, *Idempotent Producer*). For a copy task that would be a range's
tail landing before the retried range copies its head again: the remote partition out of order. A target node
that stalls longer than ``message.timeout.ms`` does exactly that, so the test stalls it (SIGSTOP) with two waves
of records queued a little apart: the first times out while the node is stopped, the second would still be in
time when it comes back. The copy task's delivery reports must void the producer at the first failure.

And when an exactly-once producer is fenced with records in flight, what its flush raises must be taken for
the fencing it is: confluent-kafka leaves the fatal error pending while the copy task's delivery reports run,
so the flush raises a SystemError around it (``mm2py.librdkafka.clients.client_exception``).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mm2py.executor.contract import PartitionRange
from mm2py.executor.delivery import range_failure
from mm2py.executor.record_copy import RangeCopy
from mm2py.executor.record_transactions import fenced_failure
from mm2py.librdkafka.clients import cached_producer, client_exception, drop_producer
from mm2py.librdkafka.defaults import copy_producer_settings
from tests.harness.broker_faults import freeze, thaw
from tests.harness.kafka_harness import read_all
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.unit.test_errors import SPEC

pytestmark = pytest.mark.realkafka

MESSAGE_TIMEOUT_MS = 8000
# How much younger the second wave is: its time left once the first one has timed out. librdkafka needs about
# 2 s after SIGCONT to reconnect (its requests timed out, it backs off); without the purge, 5 s here is what made
# both cases land the second wave (2 s did not: it timed out too before the producer was connected again).
WAVE_GAP_S = 5.0


@pytest.mark.parametrize("producer", ["new", "established"])
def test_records_queued_behind_a_timed_out_record_never_land(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], producer: str
) -> None:
    """``new``: the producer has no producer id yet when the node stops (a Spark task's first range); it gets one
    once the node is back, and would send the second wave with it. ``established``: it has written before, so
    librdkafka bumps its epoch after the timeout and would send the second wave with the new epoch."""
    topic = real_kafka.create_topic(unique_topic("gap"), partitions=1, replication_factor=1)
    settings = copy_producer_settings(
        {
            "bootstrap.servers": real_kafka.bootstrap,
            "client.id": f"gap-{uuid.uuid4().hex[:8]}",  # a producer of its own in this process's cache
            "message.timeout.ms": str(MESSAGE_TIMEOUT_MS),
            "socket.timeout.ms": "2000",
        },
        exactly_once=False,
    )
    target = cached_producer(settings)
    written_before = 0
    if producer == "established":
        target.produce(topic, b"before", partition=0)
        assert target.flush(30) == 0
        written_before = 1
    copying = RangeCopy(producer=target)
    node = real_kafka.nodes[0].node_id
    freeze(real_kafka, node)
    try:
        for i in range(100):
            target.produce(topic, f"first-{i}".encode(), partition=0, on_delivery=copying.on_delivery)
        target.poll(0)
        time.sleep(WAVE_GAP_S)  # the fault's shape, not a wait for an event: the second wave is younger by this
        for i in range(100):
            target.produce(topic, f"second-{i}".encode(), partition=0, on_delivery=copying.on_delivery)
        poll_until(lambda: target.poll(0.05) >= 0 and copying.failures, 30, "the first wave timed out")
    finally:
        thaw(real_kafka, node)
    thawed = time.monotonic()
    try:
        # Every record reports (timed out, or withdrawn); then give a producer that would still send the second
        # wave the time to do it: the node is back, and the second wave's own timeout is not yet up.
        poll_until(lambda: target.poll(0.05) >= 0 and len(target) == 0, 30, "every record reported")
        left = MESSAGE_TIMEOUT_MS / 1000 - WAVE_GAP_S - (time.monotonic() - thawed)
        assert left > 0, "the node came back after the second wave's timeout too: nothing was proven"
    finally:
        drop_producer(settings)
    codes = Counter(err.code() for err in copying.failures)
    assert copying.downstream == [], "a record was acknowledged after the node stopped"
    assert codes[KafkaError._MSG_TIMED_OUT] >= 1, codes
    assert (
        codes[KafkaError._MSG_TIMED_OUT] + codes[KafkaError._PURGE_QUEUE] + codes[KafkaError._PURGE_INFLIGHT]
        == len(copying.failures)
        == 200
    ), codes
    # What the stopped node may still append is what was on the wire before it stopped: a head of the first
    # wave, in order. Never anything of the second wave.
    values = [r.value for r in read_all(real_kafka.bootstrap, topic)][written_before:]
    assert values == [f"first-{i}".encode() for i in range(len(values))], values[:5]


def test_a_producer_fenced_with_records_in_flight_ends_its_range_as_fenced(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    """A zombie's transaction with records lingering when another producer initializes its id (MM2 taking the
    flow over): its flush, with the copy task's own delivery reports, ends the range as fenced, never as a retry."""
    topic = real_kafka.create_topic(unique_topic("fenced"), partitions=1, replication_factor=1)
    transactional_id = f"fenced-{uuid.uuid4().hex[:8]}"
    settings = copy_producer_settings(
        {"bootstrap.servers": real_kafka.bootstrap, "transactional.id": transactional_id, "linger.ms": "1000"},
        exactly_once=True,
    )
    zombie = cached_producer(settings)  # its transactions initialized, as a copy task's
    copying = RangeCopy(producer=zombie)
    try:
        zombie.begin_transaction()
        zombie.produce(topic, b"first", partition=0, on_delivery=copying.on_delivery)
        assert zombie.flush(30) == 0 and copying.downstream == [0]
        for i in range(10):  # lingering for a second: in flight when the successor fences the id
            zombie.produce(topic, f"late-{i}".encode(), partition=0, on_delivery=copying.on_delivery)
        successor = Producer({"bootstrap.servers": real_kafka.bootstrap, "transactional.id": transactional_id})
        successor.init_transactions(30)
        with pytest.raises((KafkaException, SystemError)) as raised:
            zombie.flush(30)
    finally:
        drop_producer(settings)
    client = client_exception(raised.value)
    assert client is not None and client.args[0].code() == KafkaError._FENCED, repr(raised.value)
    spec, rng = dataclasses.replace(SPEC, exactly_once=True), PartitionRange(topic, 0, f"dc1.{topic}", 0, 11)
    fenced = fenced_failure(spec, rng, range_failure(spec, rng, raised.value))
    assert fenced is not None and (fenced.code, fenced.retriable) == ("PRODUCER_FENCED", False), fenced

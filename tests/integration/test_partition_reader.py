"""The one partition reader: from given offsets to each partition's end, with a deadline that names the
cluster and the purpose of the read."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.partition_reader import PartitionReader, read_partitions, read_topic
from tests.harness.kafka_harness import ClusterFactory, create_topic, make_records, produce

pytestmark = pytest.mark.integration


def test_reads_each_partition_from_its_start_offset_to_its_end(kafka_cluster: ClusterFactory) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    create_topic(broker.bootstrap, "orders", 3)
    records = make_records(90, partitions=3, seed=7)
    produce(broker.bootstrap, "orders", records)
    starts = {("orders", 0): 5, ("orders", 1): OFFSET_BEGINNING, ("orders", 2): 30}
    read = [
        (m.partition(), m.offset(), m.value())
        for m in read_partitions(
            "dc1", {"bootstrap.servers": broker.bootstrap, "group.id": "t"}, starts, purpose="reading orders for a test"
        )
    ]
    expected = []
    for p, first in ((0, 5), (1, 0), (2, 30)):
        values = [r.value for r in records if r.partition == p]
        expected += [(p, o, v) for o, v in enumerate(values) if o >= first]
    assert sorted(read) == sorted(expected)
    assert [o for p, o, _ in read if p == 0] == sorted(o for p, o, _ in read if p == 0)  # offset order


def test_a_stopped_partition_yields_nothing_more(kafka_cluster: ClusterFactory) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    create_topic(broker.bootstrap, "orders", 2)
    produce(broker.bootstrap, "orders", make_records(40, partitions=2, seed=8))
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": "t"}
    seen: dict[int, int] = {}
    with PartitionReader("dc1", settings, {("orders", 0): 0, ("orders", 1): 0}, purpose="test") as reader:
        for msg in reader.records():
            seen[msg.partition()] = seen.get(msg.partition(), 0) + 1
            if msg.partition() == 0:
                reader.stop("orders", 0)
        assert reader.at_end
    assert seen == {0: 1, 1: 20}


def test_a_missing_topic_reads_as_empty(kafka_cluster: ClusterFactory) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    assert list(read_topic("dc1", {"bootstrap.servers": broker.bootstrap}, "nowhere", purpose="test")) == []


def test_a_read_that_misses_its_deadline_names_cluster_purpose_and_position(kafka_cluster: ClusterFactory) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    create_topic(broker.bootstrap, "orders", 1)
    produce(broker.bootstrap, "orders", make_records(5, partitions=1, seed=9))
    # Beyond the end: the test broker then answers neither records nor end of partition.
    starts = {("orders", 0): 1000}
    with pytest.raises(KafkaOperationError) as caught:
        list(
            read_partitions(
                "dc1",
                {"bootstrap.servers": broker.bootstrap, "group.id": "t"},
                starts,
                purpose="reading progress",
                timeout_s=2.0,
            )
        )
    message = str(caught.value)
    assert message.startswith("reading progress (orders) on dc1 failed: did not reach the end within 2 s"), message
    assert "orders-0 at offset 1000" in message, message

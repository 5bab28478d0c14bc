"""The batch path's connection (KafkaConnection) against a real broker: Metadata, multi-partition Fetch,
InitProducerId, raw Produce, and what a broker that stops answering turns into."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import producer_parts, split_batches
from mm2py.wire.cluster import (
    ClusterMetadata,
    FetchAnswer,
    FetchedPartition,
    FetchPosition,
    Pending,
    ProducedPartition,
    ProducerIds,
)
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.errors import WireError
from tests.harness.kafka_harness import ClusterFactory, create_topic, make_records, produce, read_all
from tests.harness.polling import answer_of
from tests.harness.translation_helpers import client_settings

pytestmark = pytest.mark.integration
T = TypeVar("T")


def wait(client: KafkaConnection, pending: Pending[T], timeout_s: float = 10.0) -> T | WireError:
    return answer_of(client, pending, timeout_s)


def leaders(client: KafkaConnection, topic: str) -> dict[int, int]:
    node = sorted(client.brokers())[0]
    answer = wait(client, client.metadata(node, [topic]))
    assert isinstance(answer, ClusterMetadata), answer
    assert not answer.topic_errors
    return {p: leader.leader for (t, p), leader in answer.partitions.items() if t == topic}


def test_fetched_batches_produced_raw_arrive_unchanged(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    brokers = kafka_cluster("src", "dst")
    topic = unique_topic("wire")
    create_topic(brokers["src"].bootstrap, topic, 3)
    create_topic(brokers["dst"].bootstrap, topic, 3)
    produced = make_records(300, partitions=3)
    produce(brokers["src"].bootstrap, topic, produced)
    source = KafkaConnection("src", client_settings({"bootstrap.servers": brokers["src"].bootstrap}))
    target = KafkaConnection("dst", client_settings({"bootstrap.servers": brokers["dst"].bootstrap}))
    try:
        source.bootstrap(10)
        node = leaders(source, topic)[0]
        assert set(leaders(source, topic).values()) == {node}
        positions = [FetchPosition(topic, p, 0, 1 << 20) for p in range(3)]
        answer = wait(source, source.fetch(node, positions, read_committed=True, max_wait_ms=100, max_bytes=1 << 24))
        assert isinstance(answer, FetchAnswer) and answer.error is None, answer
        fetched = answer.partitions
        assert all(isinstance(f, FetchedPartition) for f in fetched)
        assert sorted(f.partition for f in fetched) == [0, 1, 2]
        assert all(f.error is None and f.high_watermark == 100 and f.aborted_transactions == [] for f in fetched)
        batches = {f.partition: split_batches(f.records).batches for f in fetched}
        decoded = {p: [r for b in bs for r in decode_records(b)] for p, bs in batches.items()}
        for p in range(3):
            expected = [r for r in produced if r.partition == p]
            assert [(r.key, r.value, list(r.headers), r.timestamp) for r in decoded[p]] == [
                (r.key, r.value, r.headers, r.timestamp) for r in expected
            ]
            assert [r.offset for r in decoded[p]] == list(range(100))

        target.bootstrap(10)
        dst_node = leaders(target, topic)[0]
        ids = wait(target, target.init_producer_id(dst_node))
        assert isinstance(ids, ProducerIds) and ids.producer_id >= 0
        producer_id, epoch = ids.producer_id, ids.epoch
        sequence = dict.fromkeys(range(3), 0)
        base_offsets: dict[int, list[int]] = {p: [] for p in range(3)}
        for round_ in range(max(len(bs) for bs in batches.values())):
            record_sets = {}
            for p, bs in batches.items():
                if round_ < len(bs):  # one batch per partition per request, as a real broker requires
                    record_sets[(topic, p)] = producer_parts(bs[round_], producer_id, epoch, sequence[p])
                    sequence[p] += bs[round_].record_count
            answer = wait(target, target.produce(dst_node, record_sets, timeout_ms=10_000))
            assert isinstance(answer, list) and all(
                isinstance(a, ProducedPartition) and a.error is None for a in answer
            )
            for a in answer:
                base_offsets[a.partition].append(a.base_offset)
        for p, bs in batches.items():  # each batch landed where the previous one ended
            assert base_offsets[p] == [b.base_offset for b in bs]
    finally:
        source.close()
        target.close()
    copied = read_all(brokers["dst"].bootstrap, topic)
    assert [(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp) for r in copied] == [
        (r.partition, r.offset, r.key, r.value, r.headers, r.timestamp)
        for r in read_all(brokers["src"].bootstrap, topic)
    ]


def test_requests_to_an_unreachable_broker_come_back_as_retriable_errors(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    broker = kafka_cluster("src")["src"]
    topic = unique_topic("wire")
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaConnection(
        "src",
        client_settings(
            {"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": "2000", "reconnect.backoff.max.ms": "200"}
        ),
    )
    try:
        client.bootstrap(10)
        node = leaders(client, topic)[0]
        broker.stop()
        pending = client.fetch(
            node, [FetchPosition(topic, 0, 0, 1024)], read_committed=False, max_wait_ms=100, max_bytes=1024
        )
        answer = wait(client, pending)
        assert isinstance(answer, WireError) and answer.retriable, answer
        assert not client.ready(node)  # never blocks; the broker is gone
    finally:
        client.close()

"""The batch path's wire client against a real broker: multi-partition Fetch, InitProducerId, raw Produce."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import producer_parts, split_batches
from mm2py.wire.connection import FetchPosition, WireClient
from tests.harness.kafka_harness import ClusterFactory, create_topic, make_records, produce, read_all

pytestmark = pytest.mark.integration


def test_fetched_batches_produced_raw_arrive_unchanged(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    brokers = kafka_cluster("src", "dst")
    topic = unique_topic("wire")
    create_topic(brokers["src"].bootstrap, topic, 3)
    create_topic(brokers["dst"].bootstrap, topic, 3)
    produced = make_records(300, partitions=3)
    produce(brokers["src"].bootstrap, topic, produced)
    source = WireClient("src", {"bootstrap.servers": brokers["src"].bootstrap})
    target = WireClient("dst", {"bootstrap.servers": brokers["dst"].bootstrap})
    try:
        source.bootstrap(10)
        assert source.refresh_leaders([topic], 10) == {}
        node = source.leader((topic, 0))
        assert node is not None and {source.leader((topic, p)) for p in range(3)} == {node}
        positions = [FetchPosition(topic, p, 0, 1 << 20) for p in range(3)]
        fetched = source.fetch_result(source.send_fetch(node, positions, read_committed=True), 10)
        assert isinstance(fetched, list), fetched
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
        assert target.refresh_leaders([topic], 10) == {}
        ids = target.init_producer_id(10)
        assert isinstance(ids, tuple) and ids[0] >= 0
        producer_id, epoch = ids
        sequence = dict.fromkeys(range(3), 0)
        base_offsets: dict[int, list[int]] = {p: [] for p in range(3)}
        for round_ in range(max(len(bs) for bs in batches.values())):
            record_sets = {}
            for p, bs in batches.items():
                if round_ < len(bs):  # one batch per partition per request, as a real broker requires
                    record_sets[(topic, p)] = producer_parts(bs[round_], producer_id, epoch, sequence[p])
                    sequence[p] += bs[round_].record_count
            dst_node = target.leader((topic, 0))
            assert dst_node is not None
            answer = target.produce_result(target.send_produce(dst_node, record_sets), 10)
            assert isinstance(answer, list) and all(a.error is None for a in answer), answer
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
    client = WireClient(
        "src", {"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": "2000", "reconnect.backoff.max.ms": "200"}
    )
    try:
        client.bootstrap(10)
        client.refresh_leaders([topic], 10)
        node = client.leader((topic, 0))
        assert node is not None
        broker.stop()
        answer = client.fetch_result(
            client.send_fetch(node, [FetchPosition(topic, 0, 0, 1024)], read_committed=False), 5
        )
        assert not isinstance(answer, list) and answer.retriable, answer
    finally:
        client.close()

"""The batch path's own Produce body: byte for byte what kafka-python encodes, from pieces."""

from __future__ import annotations

import os

import pytest
from kafka.protocol.frame import KafkaBytes  # type: ignore[import-untyped]
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # type: ignore[import-untyped]

from mm2py.wire.errors import MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER
from mm2py.wire.produce_request import VERSIONS, ForwardingProduceRequest, produced


def library_request(record_sets: dict[tuple[str, int], bytes], transactional_id: str | None = None) -> ProduceRequest:
    partition_type = ProduceRequest.TopicProduceData.PartitionProduceData
    by_topic: dict[str, list[object]] = {}
    for (topic, partition), records in record_sets.items():
        by_topic.setdefault(topic, []).append(partition_type(index=partition, records=records))
    topics = [ProduceRequest.TopicProduceData(name=t, partition_data=ps) for t, ps in by_topic.items()]
    return ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=30_000, topic_data=topics)


@pytest.mark.parametrize("transactional_id", [None, "mm2py-dc1->dc2-0"])
@pytest.mark.parametrize("version", range(VERSIONS[0], VERSIONS[1] + 1))
def test_the_request_is_what_the_library_encodes_for_the_joined_pieces(
    version: int, transactional_id: str | None
) -> None:
    pieces = {
        ("orders", 0): [os.urandom(61), memoryview(os.urandom(5000))],
        ("orders", 3): [os.urandom(61), memoryview(b"")],
        ("dc1.päyments", 1): [os.urandom(70)],  # a non-ASCII name: its length is counted in bytes
    }
    ours = ForwardingProduceRequest(pieces, acks=-1, timeout_ms=30_000, transactional_id=transactional_id)
    theirs = library_request({key: b"".join(parts) for key, parts in pieces.items()}, transactional_id)
    for request in (ours, theirs):
        request.API_VERSION = version
        request.with_header(correlation_id=41, client_id="mm2py")
    assert ours.encode(framed=True, header=True) == bytes(theirs.encode(framed=True, header=True))
    assert ours.encode() == bytes(theirs.encode())
    assert ours.expect_response()


def test_the_flexible_versions_are_refused_and_never_negotiated() -> None:
    request = ForwardingProduceRequest({("t", 0): [b"x"]}, acks=-1, timeout_ms=1000)
    assert request._max_version == 8  # what the client negotiates with the broker's ApiVersions
    with pytest.raises(ValueError, match="v3-v8, not 9"):
        request.encode(version=9)


def library_answer(version: int) -> ProduceResponse:
    partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    record_error = partition.BatchIndexAndErrorMessage

    def one(index: int) -> object:
        return partition(
            index=index,
            error_code=[0, 10, 45, 0][index % 4],  # MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER
            base_offset=-1 if index % 4 else 1_000_000_007 * index,
            log_append_time_ms=-1 if index % 2 else 1_764_000_000_000 + index,
            log_start_offset=index * 3,
            record_errors=[record_error(batch_index=0, batch_index_error_message="too big")] if index % 4 == 1 else [],
            error_message="refused" if index % 4 else None,
        )

    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(name="orders", partition_responses=[one(i) for i in range(5)]),
            ProduceResponse.TopicProduceResponse(name="dc1.päyments", partition_responses=[one(7)]),
        ],
        throttle_time_ms=250 + version,
    )


@pytest.mark.parametrize("version", range(VERSIONS[0], VERSIONS[1] + 1))
def test_the_answer_is_what_the_library_decodes(version: int) -> None:
    response = library_answer(version)
    frame_bytes = (41).to_bytes(4, "big") + bytes(response.encode(version=version))  # ResponseHeader v0
    frame = KafkaBytes(len(frame_bytes))  # as the library's parser holds a complete frame
    frame.write(frame_bytes)
    frame.seek(0)
    request = ForwardingProduceRequest({}, acks=-1, timeout_ms=1000)
    decoder = request.answer_class(version)
    assert decoder.parse_header(frame).correlation_id == 41
    answer = decoder.decode(frame)
    assert answer.throttle_time_ms == 250 + version  # what the library's connection reads for throttling
    ours = produced(3, answer)
    theirs = [
        (t.name, p.index, p.error_code, p.base_offset, p.log_start_offset if version >= 5 else -1)
        for t in response.responses
        for p in t.partition_responses
    ]
    assert [
        (p.topic, p.partition, p.error.code if p.error else 0, p.base_offset, p.log_start_offset) for p in ours
    ] == theirs
    assert {p.error.kind for p in ours if p.error} == {MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER}
    # v8 adds what the broker says beside the code, shown as Java's producer shows it
    details = [p.error.detail for p in ours if p.error]
    if version >= 8:
        assert details == ["node 3: record 0 of the batch: too big", "node 3: refused"]
    else:
        assert details == ["node 3"] * 2

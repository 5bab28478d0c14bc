"""The batch path's own Produce body: byte for byte what kafka-python encodes, from pieces."""

from __future__ import annotations

import os

import pytest
from kafka.protocol.producer import ProduceRequest  # type: ignore[import-untyped]

from mm2py.wire.produce_request import VERSIONS, ForwardingProduceRequest


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

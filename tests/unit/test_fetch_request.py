"""The batch path's own Fetch request and answer: byte for byte what kafka-python encodes, and the same answer
that kafka-python decodes, for every version the fetcher negotiates, read from the receive buffer as the
library's parser hands it over."""

from __future__ import annotations

import os
import random

import pytest
from kafka.protocol.broker_version_data import BrokerVersionData  # type: ignore[import-untyped]
from kafka.protocol.consumer import FetchRequest as LibraryFetchRequest  # type: ignore[import-untyped]
from kafka.protocol.consumer import FetchResponse  # type: ignore[import-untyped]
from kafka.protocol.frame import KafkaBytes  # type: ignore[import-untyped]

from mm2py.wire.cluster import FetchAnswer, FetchPosition
from mm2py.wire.errors import FETCH_SESSION_ID_NOT_FOUND, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE
from mm2py.wire.fetch_request import VERSIONS, FetchAnswerFrame, FetchRequest, fetched

ALL = range(VERSIONS[0], VERSIONS[1] + 1)
POSITIONS = [
    FetchPosition("orders", 0, 1_234_567_890_123, 1 << 20, 7),
    FetchPosition("dc1.päyments", 3, 0, 4 << 20, -1),  # a non-ASCII name: its length is counted in bytes
    FetchPosition("orders", 5, 42, 65536, 0),
]
FORGOTTEN = [("orders", 9), ("gone", 0), ("orders", 11)]


def library_request(version: int, read_committed: bool, min_bytes: int) -> LibraryFetchRequest:
    partition_type = LibraryFetchRequest.FetchTopic.FetchPartition
    by_topic: dict[str, list[object]] = {}
    for p in POSITIONS:
        by_topic.setdefault(p.topic, []).append(
            partition_type(
                partition=p.partition,
                fetch_offset=p.offset,
                partition_max_bytes=p.max_bytes,
                log_start_offset=-1,
                current_leader_epoch=p.leader_epoch,
            )
        )
    gone: dict[str, list[int]] = {}
    for topic, partition in FORGOTTEN:
        gone.setdefault(topic, []).append(partition)
    return LibraryFetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=min_bytes,
        max_bytes=64 << 20,
        isolation_level=1 if read_committed else 0,
        session_id=123456,
        session_epoch=9,
        topics=[LibraryFetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[LibraryFetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()],
        rack_id="",
    )


@pytest.mark.parametrize("min_bytes", [1, 65536])  # the default, and a consumer's fetch.min.bytes
@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("version", ALL)
def test_the_request_is_what_the_library_encodes(version: int, read_committed: bool, min_bytes: int) -> None:
    ours = FetchRequest(
        POSITIONS,
        read_committed=read_committed,
        max_wait_ms=500,
        max_bytes=64 << 20,
        session=(123456, 9),
        forgotten=FORGOTTEN,
        min_bytes=min_bytes,
    )
    theirs = library_request(version, read_committed, min_bytes)
    for request in (ours, theirs):
        request.API_VERSION = version
        request.with_header(correlation_id=41, client_id="mm2py")
    assert ours.encode(framed=True, header=True) == bytes(theirs.encode(framed=True, header=True))
    assert ours.header is not None and ours.header.correlation_id == 41 and ours.expect_response()


def test_the_library_negotiates_the_highest_version_both_sides_have() -> None:
    request = FetchRequest([], read_committed=False, max_wait_ms=0, max_bytes=1, session=(0, -1), forgotten=())
    assert BrokerVersionData(api_versions={1: (4, 17)}).api_version(request) == 12
    assert BrokerVersionData(api_versions={1: (0, 11)}).api_version(request) == 11
    with pytest.raises(ValueError, match="v4-v12, not 13"):
        request.API_VERSION = 13


def library_answer(version: int, error_code: int = 0) -> FetchResponse:
    rng = random.Random(version)
    partition = FetchResponse.FetchableTopicResponse.PartitionData
    aborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction

    def one(index: int) -> object:
        fields: dict[str, object] = {
            "partition_index": index,
            "error_code": [0, 0, 6, 1][index % 4],  # some NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE
            "high_watermark": rng.randrange(1 << 40),
            "last_stable_offset": rng.randrange(1 << 40),
            "log_start_offset": rng.randrange(1 << 20),
            "aborted_transactions": None
            if index % 3 == 0
            else [
                aborted(producer_id=rng.randrange(1 << 50), first_offset=rng.randrange(1 << 30))
                for _ in range(index % 3)
            ],
            "preferred_read_replica": -1,
            "records": None if index == 4 else (b"" if index == 5 else os.urandom(rng.randrange(1, 3000))),
        }
        if version >= 12 and index % 2:  # tagged fields the batch path skips
            fields["diverging_epoch"] = partition.EpochEndOffset(epoch=3, end_offset=77)
            fields["current_leader"] = partition.LeaderIdAndEpoch(leader_id=2, leader_epoch=8)
        return partition(**fields)

    return FetchResponse(
        throttle_time_ms=rng.randrange(1000),
        error_code=error_code,
        session_id=rng.randrange(1 << 31),
        responses=[
            FetchResponse.FetchableTopicResponse(topic="orders", partitions=[one(i) for i in range(7)]),
            FetchResponse.FetchableTopicResponse(topic="dc1.päyments", partitions=[one(i) for i in range(2)]),
        ],
    )


def received(response: FetchResponse, version: int, request: FetchRequest) -> FetchAnswerFrame:
    """What the library's parser makes of the answer's frame with our request's answer class."""
    header = (41).to_bytes(4, "big") + (b"\0" if version >= 12 else b"")  # ResponseHeader v1 / v0
    frame_bytes = header + bytes(response.encode(version=version))
    frame = KafkaBytes(len(frame_bytes))  # as the parser holds a frame once it is complete
    frame.write(frame_bytes)
    frame.seek(0)
    answer_class = request.answer_class(version)
    assert answer_class.parse_header(frame).correlation_id == 41
    decoded = answer_class.decode(frame)
    assert isinstance(decoded, FetchAnswerFrame)
    return decoded


def expected(node: int, response: FetchResponse, version: int) -> FetchAnswer:
    """The answer as the batch path took it from the library's decoding before it decoded answers itself."""
    from mm2py.wire.cluster import FetchedPartition
    from mm2py.wire.errors import broker_error

    top = broker_error(response.error_code if version >= 7 else 0, f"Fetch at node {node}")
    session_id = response.session_id if version >= 7 else 0
    if top is not None:
        return FetchAnswer([], session_id, response.throttle_time_ms, top)
    partitions = [
        FetchedPartition(
            t.topic,
            p.partition_index,
            broker_error(p.error_code, f"node {node}"),
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset if version >= 5 else -1,
            None
            if p.aborted_transactions is None
            else [(a.producer_id, a.first_offset) for a in p.aborted_transactions],
            p.records or b"",
        )
        for t in response.responses
        for p in t.partitions
    ]
    return FetchAnswer(partitions, session_id, response.throttle_time_ms)


@pytest.mark.parametrize("version", ALL)
def test_the_answer_is_what_the_library_decodes(version: int) -> None:
    request = FetchRequest([], read_committed=False, max_wait_ms=0, max_bytes=1, session=(0, -1), forgotten=())
    response = library_answer(version)
    frame = received(response, version, request)
    assert frame.throttle_time_ms == response.throttle_time_ms  # what the library's throttling reads
    ours = fetched(2, frame)
    assert [bytes(p.records) for p in ours.partitions] == [
        bytes(p.records) for p in expected(2, response, version).partitions
    ]
    assert _comparable(ours) == _comparable(expected(2, response, version))
    kinds = {p.error.kind for p in ours.partitions if p.error is not None}
    assert kinds == {NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE}
    assert sum(p.aborted_transactions is None for p in ours.partitions) == 4


@pytest.mark.parametrize("version", range(7, VERSIONS[1] + 1))
def test_an_error_for_the_whole_request_keeps_the_session_id(version: int) -> None:
    request = FetchRequest([], read_committed=False, max_wait_ms=0, max_bytes=1, session=(5, 3), forgotten=())
    response = library_answer(version, error_code=70)  # FETCH_SESSION_ID_NOT_FOUND
    response.responses = []
    ours = fetched(1, received(response, version, request))
    assert ours.error is not None and ours.error.kind is FETCH_SESSION_ID_NOT_FOUND
    assert (ours.partitions, ours.session_id) == ([], response.session_id)


def _comparable(answer: FetchAnswer) -> object:
    partitions = [
        (
            p.topic,
            p.partition,
            p.error and (p.error.kind, str(p.error)),
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.aborted_transactions,
            bytes(p.records),
        )
        for p in answer.partitions
    ]
    return partitions, answer.session_id, answer.throttle_time_ms, answer.error


def test_unsigned_varints_read_back_what_was_written() -> None:
    from mm2py.wire.wire_types import Reader, uvarint

    values = [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**31 - 1, 2**32 - 1]
    reader = Reader(memoryview(b"".join(uvarint(v) for v in values)))
    assert [reader.uvarint() for _ in values] == values and reader.pos == len(reader.data)
    assert [len(uvarint(v)) for v in (127, 128, 16383, 16384)] == [1, 2, 2, 3]
    with pytest.raises(ValueError, match="longer than 5 bytes"):
        Reader(memoryview(b"\xff" * 6)).uvarint()


def test_an_answer_cut_short_is_a_retriable_network_error_not_a_crash() -> None:
    from kafka.future import Future  # type: ignore[import-untyped]

    from mm2py.wire.connection import _Pending
    from mm2py.wire.errors import NETWORK_EXCEPTION, WireError

    request = FetchRequest([], read_committed=False, max_wait_ms=0, max_bytes=1, session=(0, -1), forgotten=())
    whole = received(library_answer(12), 12, request)
    cut = FetchAnswerFrame(whole.data[: len(whole.data) // 2], 12)
    pending = _Pending(4, Future().success(cut), lambda frame: fetched(4, frame))
    answer = pending.result()
    assert isinstance(answer, WireError) and answer.kind is NETWORK_EXCEPTION and answer.retriable
    assert "node 4" in str(answer) and "does not decode" in str(answer)

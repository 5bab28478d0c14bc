"""A Fetch request from the fetcher's positions, and its answer as mm2py's plain data, both encoded and decoded
here (:mod:`mm2py.wire.wire_types` says why not by kafka-python).

Versions 4 (aborted transactions, for read_committed) to 12, the last that names topics (13 and later name them
by topic id); incremental fetch sessions (KIP-227) from 7: an older broker ignores the session fields and
answers without a session id, which leaves every request full (:mod:`mm2py.wire.fetch_session`). The layouts
are Kafka's ``clients/src/main/resources/common/message/FetchRequest.json`` and ``FetchResponse.json``; 12 is
the first "flexible" version (compact arrays and strings, tagged fields). A consumer's request sends none of
the tagged fields (``ClusterId`` is a controller's), and of the answer's (``DivergingEpoch``, ``CurrentLeader``,
``SnapshotId``, ``NodeEndpoints``) the batch path uses none: the fetcher learns leaders from Metadata and
handles a truncated log through the error codes, so they are skipped. Unit tests check both directions against
kafka-python's own encoder and decoder for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import Buffer, FetchAnswer, FetchedPartition, FetchPosition
from mm2py.wire.errors import broker_error
from mm2py.wire.wire_types import (
    INT32,
    NO_TAGGED_FIELDS,
    OwnRequest,
    Reader,
    array_length,
    string,
)

VERSIONS = (4, 12)
FIRST_FLEXIBLE = 12

_TOP = struct.Struct(">iiiib")  # replica id, max wait, min bytes, max bytes, isolation level
_SESSION = struct.Struct(">ii")  # v7+: session id and epoch
_PARTITION_V9 = struct.Struct(">iiqqi")  # partition, current leader epoch, fetch offset, log start, max bytes
_PARTITION_V12 = struct.Struct(">iiqiqi")  # ... with the last fetched epoch after the fetch offset
_PARTITION_V5 = struct.Struct(">iqqi")  # partition, fetch offset, log start offset, max bytes
_PARTITION_V4 = struct.Struct(">iqi")  # partition, fetch offset, max bytes
_ANSWER_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, last stable, log start (v5+)
_ANSWER_PARTITION_V4 = struct.Struct(">ihqq")
_ABORTED = struct.Struct(">qq")  # producer id, first offset


class FetchAnswerFrame:
    """A received Fetch answer, kept as a view of its frame until :func:`fetched` reads it (the library's parser
    hands it over; ``throttle_time_ms`` is what its connection reads to honour KIP-219 throttling)."""

    __slots__ = ("data", "throttle_time_ms", "version")

    def __init__(self, data: memoryview, version: int) -> None:
        self.data = data
        self.version = version
        self.throttle_time_ms = INT32.unpack_from(data, 0)[0]

    def __repr__(self) -> str:
        return f"FetchAnswerFrame(v{self.version}, {len(self.data)} bytes)"


class FetchRequest(OwnRequest):
    """A consumer's Fetch (replica id -1) for ``positions``, in the session ``session`` (id, epoch)."""

    API_KEY = 1
    name = "Fetch"
    VERSIONS = VERSIONS
    FIRST_FLEXIBLE = FIRST_FLEXIBLE
    ANSWER_FRAME = FetchAnswerFrame

    def __init__(
        self,
        positions: Sequence[FetchPosition],
        *,
        read_committed: bool,
        max_wait_ms: int,
        max_bytes: int,
        session: tuple[int, int],
        forgotten: Sequence[TopicPartition],
        min_bytes: int = 1,
    ) -> None:
        super().__init__()
        self.positions = positions
        self.read_committed = read_committed
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.session = session
        self.forgotten = forgotten

    def __repr__(self) -> str:
        return f"FetchRequest(session={self.session}, partitions={len(self.positions)}, gone={len(self.forgotten)})"

    def encode_body(self, version: int, flexible: bool) -> list[Buffer]:
        tags = NO_TAGGED_FIELDS if flexible else b""
        out: list[Buffer] = [
            _TOP.pack(-1, self.max_wait_ms, self.min_bytes, self.max_bytes, 1 if self.read_committed else 0)
        ]
        if version >= 7:
            out.append(_SESSION.pack(*self.session))
        by_topic: dict[str, list[FetchPosition]] = {}
        for p in self.positions:
            by_topic.setdefault(p.topic, []).append(p)
        out.append(array_length(len(by_topic), compact=flexible))
        for topic, positions in by_topic.items():
            out.append(string(topic, compact=flexible) + array_length(len(positions), compact=flexible))
            for p in positions:
                if version >= 12:
                    out.append(_PARTITION_V12.pack(p.partition, p.leader_epoch, p.offset, -1, -1, p.max_bytes))
                elif version >= 9:
                    out.append(_PARTITION_V9.pack(p.partition, p.leader_epoch, p.offset, -1, p.max_bytes))
                elif version >= 5:
                    out.append(_PARTITION_V5.pack(p.partition, p.offset, -1, p.max_bytes))
                else:
                    out.append(_PARTITION_V4.pack(p.partition, p.offset, p.max_bytes))
                out.append(tags)
            out.append(tags)
        if version >= 7:
            gone: dict[str, list[int]] = {}
            for topic, partition in self.forgotten:
                gone.setdefault(topic, []).append(partition)
            out.append(array_length(len(gone), compact=flexible))
            for topic, partitions in gone.items():
                out.append(string(topic, compact=flexible) + array_length(len(partitions), compact=flexible))
                out.append(struct.pack(f">{len(partitions)}i", *partitions))
                out.append(tags)
        if version >= 11:
            out.append(string("", compact=flexible))  # rack id
        out.append(tags)
        return out


def fetched(node: int, frame: FetchAnswerFrame) -> FetchAnswer:
    """The answer ``node`` gave: an error for the whole request, or an entry per partition it names."""
    version, flexible = frame.version, frame.version >= FIRST_FLEXIBLE
    reader = Reader(frame.data, 4)  # after the throttle time
    session_id = 0
    if version >= 7:
        top = broker_error(reader.int16(), f"Fetch at node {node}")
        session_id = reader.int32()
        if top is not None:
            return FetchAnswer([], session_id, frame.throttle_time_ms, top)
    result = []
    for _ in range(reader.length(compact=flexible)):
        topic = reader.string(compact=flexible) or ""
        for _ in range(reader.length(compact=flexible)):
            if version >= 5:
                index, error, high_watermark, last_stable, log_start = reader.fields(_ANSWER_PARTITION)
            else:
                index, error, high_watermark, last_stable = reader.fields(_ANSWER_PARTITION_V4)
                log_start = -1
            aborted = None
            count = reader.length(compact=flexible)
            if count >= 0:
                aborted = []
                for _ in range(count):
                    aborted.append(reader.fields(_ABORTED))
                    if flexible:
                        reader.skip_tagged_fields()
            if version >= 11:
                reader.pos += 4  # preferred read replica: only a follower fetch (KIP-392) sets it
            size = reader.length(compact=flexible)
            records = reader.view(size) if size > 0 else b""
            if flexible:
                reader.skip_tagged_fields()
            result.append(
                FetchedPartition(
                    topic,
                    index,
                    broker_error(error, f"node {node}"),
                    high_watermark,
                    last_stable,
                    log_start,
                    aborted,
                    records,
                )
            )
        if flexible:
            reader.skip_tagged_fields()
    return FetchAnswer(result, session_id, frame.throttle_time_ms)

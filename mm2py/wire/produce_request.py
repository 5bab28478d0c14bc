"""A Produce request that carries forwarded record batches in pieces, copied once into the bytes sent, and its
answer, both encoded and decoded here (:mod:`mm2py.wire.wire_types` says why not by kafka-python).

kafka-python encodes a Produce request by copying each record set into a reusable buffer and then copying
that buffer out, and a forwarded batch needs a new header first: three copies of every byte the batch path
sends, each as large as the data (a megabyte or so per batch). Here the pieces of each partition's record set
(:func:`mm2py.wire.batches.producer_parts`: a new header and a view of the rest of the batch) are joined once
into the request's bytes.

Versions 3 to 8 only: the ones with v2 record batches whose body is not "flexible" (no tagged fields, no
compact arrays), so one layout serves all of them; version 9 adds nothing but that encoding. The layouts are
Kafka's ``clients/src/main/resources/common/message/ProduceRequest.json`` and ``ProduceResponse.json``. Unit
tests check the request against kafka-python's encoder and the answer against its decoder for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from mm2py.wire.cluster import Buffer, ProducedPartition, RecordSetPieces
from mm2py.wire.errors import NONE_CODE, broker_error
from mm2py.wire.wire_types import INT16, INT32, OwnRequest, Reader, string

VERSIONS = (3, 8)
FIRST_FLEXIBLE = 9  # not encoded here

_PARTITION = struct.Struct(">ii")  # partition index, record set length
_ANSWER_PARTITION = struct.Struct(">ihqq")  # index, error code, base offset, log append time


class ProduceAnswerFrame:
    """A received Produce answer, kept as a view of its frame until :func:`produced` reads it; its throttle time
    (the frame's last field in these versions) is what the library's connection reads for KIP-219."""

    __slots__ = ("data", "throttle_time_ms", "version")

    def __init__(self, data: memoryview, version: int) -> None:
        self.data = data
        self.version = version
        self.throttle_time_ms = INT32.unpack_from(data, len(data) - 4)[0]

    def __repr__(self) -> str:
        return f"ProduceAnswerFrame(v{self.version}, {len(self.data)} bytes)"


class ForwardingProduceRequest(OwnRequest):
    """Produce of ``record_sets``: {(topic, partition): pieces}, in the mapping's order; inside the transaction of
    ``transactional_id`` when one is given (its batches carry the transactional bit)."""

    API_KEY = 0
    name = "Produce"
    VERSIONS = VERSIONS
    FIRST_FLEXIBLE = FIRST_FLEXIBLE
    ANSWER_FRAME = ProduceAnswerFrame

    def __init__(
        self,
        record_sets: Mapping[tuple[str, int], RecordSetPieces],
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> None:
        super().__init__()
        self.record_sets = record_sets
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.transactional_id = transactional_id

    def __repr__(self) -> str:
        return f"ForwardingProduceRequest(acks={self.acks}, partitions={len(self.record_sets)})"

    def encode_body(self, version: int, flexible: bool) -> list[Buffer]:
        by_topic: dict[str, list[tuple[int, RecordSetPieces]]] = {}
        for (topic, partition), pieces in self.record_sets.items():
            by_topic.setdefault(topic, []).append((partition, pieces))
        parts: list[Buffer] = [
            string(self.transactional_id, compact=False)
            + INT16.pack(self.acks)
            + INT32.pack(self.timeout_ms)
            + INT32.pack(len(by_topic))
        ]
        for topic, partitions in by_topic.items():
            parts.append(string(topic, compact=False) + INT32.pack(len(partitions)))
            for partition, pieces in partitions:
                parts.append(_PARTITION.pack(partition, sum(len(piece) for piece in pieces)))
                parts.extend(pieces)
        return parts


def produced(node: int, frame: ProduceAnswerFrame) -> list[ProducedPartition]:
    """The answer ``node`` gave: an entry per partition of the request."""
    version = frame.version
    reader = Reader(frame.data)
    result = []
    for _ in range(reader.int32()):
        topic = reader.string(compact=False) or ""
        for _ in range(reader.int32()):
            index, error, base_offset, _append_time = reader.fields(_ANSWER_PARTITION)
            log_start = reader.int64() if version >= 5 else -1
            record_errors: list[tuple[int, str | None]] = []
            message = None
            if version >= 8:
                record_errors = [(reader.int32(), reader.string(compact=False)) for _ in range(reader.int32())]
                message = reader.string(compact=False)
            failure = broker_error(error, _detail(node, message, record_errors)) if error != NONE_CODE else None
            result.append(ProducedPartition(topic, index, failure, base_offset, log_start))
    return result


def _detail(node: int, message: str | None, record_errors: list[tuple[int, str | None]]) -> str:
    """Where a failure came from and what the broker said beside its code (v8+), as Java's producer reports it
    (``Sender.failBatch``): the first record the broker names, with its own reason (else the partition's message),
    or the partition's message (``Sender.formatErrMsg``). A forwarded batch is written whole or not at all, so that
    record says why."""
    if not record_errors:
        return f"node {node}: {message}" if message else f"node {node}"
    position, reason = record_errors[0]
    more = f" (and {len(record_errors) - 1} more)" if len(record_errors) > 1 else ""
    return f"node {node}: record {position} of the batch{more}: {reason or message or 'no reason given'}"

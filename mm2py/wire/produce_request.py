"""A Produce request that carries forwarded record batches in pieces, copied once into the bytes sent.

kafka-python encodes a Produce request by copying each record set into a reusable buffer and then copying
that buffer out, and a forwarded batch needs a new header first: three copies of every byte the batch path
sends, each as large as the data (a megabyte or so per batch). This request keeps the library's
connection, version negotiation, request header and response decoding, and encodes only its own body:
the pieces of each partition's record set (:func:`mm2py.wire.batches.producer_parts`: a new header
and a view of the rest of the batch) are joined once into the request's bytes.

Versions 3 to 8 only: the ones with v2 record batches whose body is not "flexible" (no tagged fields, no
compact arrays), so one layout serves all of them; version 9 adds nothing but that encoding. A unit test
checks the bytes against the library's own encoder for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from kafka.protocol.producer import ProduceRequest  # type: ignore[import-untyped]

Buffer = bytes | bytearray | memoryview
RecordSetPieces = Sequence[Buffer]  # one partition's record set, as pieces sent back to back
VERSIONS = (3, 8)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ii")  # partition index, record set length
_NULL_STRING = _INT16.pack(-1)


# init=False: the class has no protocol schema of its own (the library would look for one by its name).
class ForwardingProduceRequest(ProduceRequest, init=False):  # type: ignore[misc,call-arg]
    """Produce of ``record_sets``: {(topic, partition): pieces}, in the mapping's order; inside the transaction of
    ``transactional_id`` when one is given (its batches carry the transactional bit)."""

    __slots__ = ("record_sets",)

    def __init__(
        self,
        record_sets: Mapping[tuple[str, int], RecordSetPieces],
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> None:
        super().__init__(
            transactional_id=transactional_id,
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[],  # the library's view of the body; encode() below writes the real one
            min_version=VERSIONS[0],
            max_version=VERSIONS[1],
        )
        self.record_sets = record_sets

    def __repr__(self) -> str:
        return f"ForwardingProduceRequest(acks={self.acks}, partitions={len(self.record_sets)})"

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        if version is not None:
            self.API_VERSION = version  # type: ignore[misc]  # the library's property, as its encode() sets it
        version = self.API_VERSION
        if version is None or not VERSIONS[0] <= version <= VERSIONS[1]:
            raise ValueError(f"ForwardingProduceRequest encodes Produce v{VERSIONS[0]}-v{VERSIONS[1]}, not {version}")
        by_topic: dict[str, list[tuple[int, RecordSetPieces]]] = {}
        for (topic, partition), pieces in self.record_sets.items():
            by_topic.setdefault(topic, []).append((partition, pieces))
        parts: list[Buffer] = [b""] if framed else []  # the frame's size goes first, once it is known
        if header:
            parts.append(self.encode_header(flexible=False))
        parts.append(
            _string(self.transactional_id)
            + _INT16.pack(self.acks)
            + _INT32.pack(self.timeout_ms)
            + _INT32.pack(len(by_topic))
        )
        for topic, partitions in by_topic.items():
            name = topic.encode()
            parts.append(_INT16.pack(len(name)) + name + _INT32.pack(len(partitions)))
            for partition, pieces in partitions:
                parts.append(_PARTITION.pack(partition, sum(len(piece) for piece in pieces)))
                parts.extend(pieces)
        if framed:
            parts[0] = _INT32.pack(sum(len(part) for part in parts))
        return b"".join(parts)


def _string(value: str | None) -> bytes:
    """A nullable STRING: int16 length (-1: null), then UTF-8."""
    if value is None:
        return _NULL_STRING
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded

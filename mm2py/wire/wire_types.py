"""Kafka's primitive wire types and the request and response headers, for the requests the batch path encodes
and the answers it decodes itself (:mod:`mm2py.wire.fetch_request`, :mod:`mm2py.wire.produce_request`).

Why our own: kafka-python encodes and decodes every request through a generic schema walk that builds an object
per field; on a copy that makes hundreds of small round trips a second that walk was a large share of the
executors' CPU (docs/performance.md). The rules are Kafka's own: ``common/protocol/types/Type.java`` and
``ByteUtils.java`` for the types (big-endian fixed widths; an unsigned varint for the compact lengths of the
"flexible" versions, length + 1 with 0 for null; a tagged-field section that starts with its count),
``RequestHeader.json`` (version 1, and 2 for flexible requests: the client id stays a non-compact nullable
string, tagged fields follow) and ``ResponseHeader.json`` (version 0, and 1 for flexible responses: tagged
fields after the correlation id).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar

from mm2py.wire.cluster import Buffer

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
NO_TAGGED_FIELDS = b"\x00"


def uvarint(value: int) -> bytes:
    """An unsigned varint (``ByteUtils.writeUnsignedVarint``): 7 bits a byte, least significant first."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str | None, *, compact: bool) -> bytes:
    """A (nullable) STRING, or COMPACT_STRING in flexible versions."""
    if value is None:
        return b"\x00" if compact else INT16.pack(-1)
    encoded = value.encode()
    return (uvarint(len(encoded) + 1) if compact else INT16.pack(len(encoded))) + encoded


def array_length(count: int, *, compact: bool) -> bytes:
    return uvarint(count + 1) if compact else INT32.pack(count)


class RequestHeader:
    """What kafka-python's connection keeps of a request in flight: the header it encodes, and the class that
    decodes the answer. A plain object in place of the library's schema-driven header."""

    __slots__ = ("_answer", "client_id", "correlation_id", "request_api_key", "request_api_version")

    def __init__(self, api_key: int, version: int, correlation_id: int, client_id: str, answer: Any) -> None:
        self.request_api_key = api_key
        self.request_api_version = version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self._answer = answer

    # the names the library's parser uses in its error messages
    @property
    def api_key(self) -> int:
        return self.request_api_key

    @property
    def api_version(self) -> int:
        return self.request_api_version

    def get_response_class(self) -> Any:
        return self._answer

    def encode(self, *, flexible: bool) -> bytes:
        fixed = _HEADER.pack(self.request_api_key, self.request_api_version, self.correlation_id)
        return fixed + string(self.client_id, compact=False) + (NO_TAGGED_FIELDS if flexible else b"")


class ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id


def answer_decoders(versions: range, first_flexible: int, frame: Callable[[memoryview, int], Any]) -> dict[int, Any]:
    """Per version, what the library's parser decodes an answer with, as its response classes do: ``parse_header``
    reads the correlation id (ResponseHeader v0; v1, with tagged fields, from ``first_flexible``) from the frame
    it holds (a bytearray with a read position) and ``decode`` keeps a view of the rest as ``frame(view,
    version)``, parsed when the fetcher or the sender takes the answer."""

    def decoder(version: int) -> Any:
        class AnswerDecoder:
            @staticmethod
            def parse_header(received: Any) -> ResponseHeader:
                reader = Reader(memoryview(received), received.tell())
                correlation_id = reader.int32()
                if version >= first_flexible:
                    reader.skip_tagged_fields()
                received.seek(reader.pos)
                return ResponseHeader(correlation_id)

            @staticmethod
            def decode(received: Any) -> Any:
                return frame(memoryview(received)[received.tell() :], version)

        return AnswerDecoder

    return {version: decoder(version) for version in versions}


class Reader:
    """Reads Kafka's types from a view of a received frame, front to back."""

    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def fields(self, layout: struct.Struct) -> tuple[Any, ...]:
        """The next fixed-width fields, as ``layout`` reads them."""
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return values

    def int16(self) -> int:
        value: int = self.fields(INT16)[0]
        return value

    def int32(self) -> int:
        value: int = self.fields(INT32)[0]
        return value

    def int64(self) -> int:
        value: int = self.fields(INT64)[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("an unsigned varint longer than 5 bytes")

    def length(self, *, compact: bool) -> int:
        """An array's or a nullable field's length: -1 for null."""
        return self.uvarint() - 1 if compact else self.int32()

    def string(self, *, compact: bool) -> str | None:
        size = self.uvarint() - 1 if compact else self.int16()
        if size < 0:
            return None
        value = str(self.data[self.pos : self.pos + size], "utf-8")
        self.pos += size
        return value

    def view(self, size: int) -> memoryview:
        """The next ``size`` bytes, not copied."""
        if self.pos + size > len(self.data):
            raise ValueError(f"a field of {size} bytes runs past the end of the frame")
        value = self.data[self.pos : self.pos + size]
        self.pos += size
        return value

    def skip_tagged_fields(self) -> None:
        """A tagged-field section whose fields are all skipped: count, then (tag, size, bytes) each."""
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            size = self.uvarint()  # read before pos is: ``self.pos += self.uvarint()`` would drop its bytes
            self.pos += size


class OwnRequest:
    """What kafka-python's connection asks of a request (version negotiation, header, encoding) for a request
    whose body and answer we encode and decode ourselves: ``API_KEY``, ``name``, ``VERSIONS`` and
    ``FIRST_FLEXIBLE`` from the subclass, with ``encode_body`` and ``ANSWER_FRAME`` (what keeps a received answer:
    ``ANSWER_FRAME(view, version)``; the per-version decoders the library's parser calls are made from it once per
    class, :func:`answer_decoders`)."""

    API_KEY: int
    name: str
    VERSIONS: tuple[int, int]
    FIRST_FLEXIBLE: int  # the first version with the flexible encoding
    ANSWER_FRAME: Callable[[memoryview, int], Any]
    _answers: ClassVar[dict[int, Any]] = {}  # set for each subclass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        versions = range(cls.VERSIONS[0], cls.VERSIONS[1] + 1)
        cls._answers = answer_decoders(versions, cls.FIRST_FLEXIBLE, cls.ANSWER_FRAME)

    def __init__(self) -> None:
        self._version: int | None = None
        self.header: RequestHeader | None = None

    # the library's version negotiation (BrokerVersionData.api_version) reads these
    @property
    def _min_version(self) -> int:
        return self.VERSIONS[0]

    @property
    def _max_version(self) -> int:
        return self.VERSIONS[1]

    min_version = 0

    @property
    def max_version(self) -> int:
        return self.VERSIONS[1]

    @property
    def API_VERSION(self) -> int | None:
        return self._version

    @API_VERSION.setter
    def API_VERSION(self, version: int) -> None:
        if not self.VERSIONS[0] <= version <= self.VERSIONS[1]:
            raise ValueError(f"{self.name} encodes v{self.VERSIONS[0]}-v{self.VERSIONS[1]}, not {version}")
        self._version = version
        if self.header is not None:
            self.header.request_api_version = version
            self.header._answer = self.answer_class(version)

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "mm2py") -> None:
        version = self._version if self._version is not None else self.VERSIONS[1]
        self.header = RequestHeader(self.API_KEY, version, correlation_id, client_id, self.answer_class(version))

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        if version is not None:
            self.API_VERSION = version
        if self._version is None:
            raise ValueError(f"{self.name}: version required to encode")
        flexible = self._version >= self.FIRST_FLEXIBLE
        parts: list[Buffer] = self.encode_body(self._version, flexible)
        if header:
            assert self.header is not None, "with_header() first"
            parts.insert(0, self.header.encode(flexible=flexible))
        if framed:
            parts.insert(0, INT32.pack(sum(len(part) for part in parts)))
        return b"".join(parts)

    def encode_body(self, version: int, flexible: bool) -> list[Buffer]:
        """The request's body, in pieces that are joined once."""
        raise NotImplementedError

    def answer_class(self, version: int) -> Any:
        """What decodes this request's answer at ``version`` (the library's parser asks the header for it)."""
        return self._answers[version]

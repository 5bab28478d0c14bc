"""Kafka v2 record batches as bytes: split a Fetch response's record set, read and rewrite batch headers.

Why a module of its own: the batch copy path forwards whole batches from a Fetch response into a Produce
request without decoding a record, so keys, values, headers, timestamps and compression pass through
untouched. What it must still do per batch is here: find batch boundaries (without copying the bytes), read
the header (offsets, record count, codec, producer fields, control/transactional bits), give the batch the
target producer's id/epoch/sequence with a fresh CRC-32C, and decide which batches read_committed drops.
Decoding and encoding the records themselves (for the batches that cannot be forwarded unchanged) is in
:mod:`mm2py.wire.batch_codec`.

Layout (big-endian; Kafka's ``DefaultRecordBatch``): baseOffset int64 @0, batchLength int32 @8,
partitionLeaderEpoch int32 @12, magic int8 @16, crc uint32 @17 (CRC-32C of bytes 21..end), attributes int16
@21, lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43,
producerEpoch int16 @51, baseSequence int32 @53, recordCount int32 @57, records @61.

The CRC is computed with the ``crc32c`` package (C, hardware-accelerated where the CPU has SSE4.2 or ARMv8
CRC instructions): a pure-Python CRC over megabytes would cost more than the copy it protects.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

MAGIC_V2 = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PRODUCER = struct.Struct(">qhi")
_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_PRODUCER_OFFSET = 43

CODEC_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40


class Codec(IntEnum):
    """Compression codec ids in the attributes' low three bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class RecordBatchError(ValueError):
    """Bytes that are not a well-formed v2 record batch (or are an older message format)."""


class RecordBatch:
    """A view of one v2 batch inside a larger buffer; reading it copies nothing.

    ``buffer`` is the whole batch (``LOG_OVERHEAD + batch_length`` bytes), a memoryview into the Fetch
    response it came from, so forwarding it unchanged is a slice, not a copy.
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "buffer",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(self, buffer: memoryview) -> None:
        if len(buffer) < HEADER_SIZE:
            raise RecordBatchError(f"a record batch needs at least {HEADER_SIZE} bytes, got {len(buffer)}")
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _HEADER.unpack_from(buffer, 0)
        if self.magic != MAGIC_V2:
            raise RecordBatchError(
                f"message format v{self.magic} at offset {self.base_offset}: only v2 record "
                "batches (Kafka 0.11 and later) can be forwarded"
            )
        self.buffer = buffer

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
            f"last_offset_delta={self.last_offset_delta}, codec={self.codec.name}, "
            f"producer_id={self.producer_id}, control={self.is_control}, "
            f"transactional={self.is_transactional})"
        )

    @property
    def size(self) -> int:
        return len(self.buffer)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Where a reader continues after this batch (also after a control batch or a compacted one)."""
        return self.last_offset + 1

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & LOG_APPEND_TIME_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        """When set (by the log cleaner), base_timestamp holds the delete horizon, not the first record's time."""
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def is_contiguous(self) -> bool:
        """Whether its records hold offsets base..last without a hole, so record i sits at base + i.

        A compacted batch keeps its original lastOffsetDelta with fewer records, and a real broker refuses
        a produced batch whose offset range and record count disagree (LogValidator), so only contiguous
        batches may be forwarded as they are.
        """
        return self.record_count == self.last_offset_delta + 1 and self.record_count > 0

    def crc_ok(self) -> bool:
        return crc32c(self.buffer[_ATTRIBUTES_OFFSET:]) == self.crc

    def upstream_offsets(self) -> range:
        """The source offsets of a contiguous batch's records, in order."""
        return range(self.base_offset, self.base_offset + self.record_count)


@dataclass(frozen=True)
class RecordSet:
    """The complete batches of one partition's Fetch data, and where a cut-off trailing batch began.

    ``truncated_at`` is the base offset of a batch the response ended inside of (the broker fills a
    response up to its size limit): fetch again from there. When no batch is complete at all, the batch at
    the fetch position is larger than the fetch allowed, and ``truncated_size`` says how large it is.
    """

    batches: list[RecordBatch]
    truncated_at: int | None = None
    truncated_size: int = 0


def split_batches(record_set: bytes | bytearray | memoryview) -> RecordSet:
    """Cut a record set (concatenated batches, as in a Fetch response) into batch views, copying nothing."""
    view = record_set if isinstance(record_set, memoryview) else memoryview(record_set)
    total = len(view)
    position = 0
    batches: list[RecordBatch] = []
    while position < total:
        if total - position < LOG_OVERHEAD:
            # Not even a base offset and length: the offset is unknown, so continue after the last batch.
            return RecordSet(batches, batches[-1].next_offset if batches else None)
        base_offset, length = _LENGTH.unpack_from(view, position)
        end = position + LOG_OVERHEAD + length
        if end > total:
            return RecordSet(batches, base_offset, LOG_OVERHEAD + length)
        batches.append(RecordBatch(view[position:end]))
        position = end
    return RecordSet(batches)


def producer_parts(
    batch: RecordBatch, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool = False
) -> tuple[bytes, memoryview]:
    """``batch`` as the target producer sends it, in two pieces sent back to back: a new 61-byte header (base
    offset 0, the producer's own id, epoch and sequence, a new CRC) and the rest of the batch as it came.

    The rest is a view, not a copy: a forwarded batch is a megabyte or so, and the request that carries it
    copies it once anyway. The CRC covers both pieces; it is computed over the new header's part and then
    continued over the rest (CRC-32C runs incrementally), which is the same work as over one buffer.

    The source producer's id means nothing on the target (a real broker would check its sequence against
    an unknown producer), and the transactional bit is only valid inside the target producer's own
    transaction, so it is cleared unless ``transactional``. Pass -1/-1/-1 for a non-idempotent produce.
    """
    head = bytearray(batch.buffer[:HEADER_SIZE])
    # A producer's batches start at offset 0 (the broker assigns offsets); Kafka 4 refuses any other
    # baseOffset with INVALID_RECORD. Outside the CRC, so changing it costs nothing.
    _BASE_OFFSET.pack_into(head, 0, 0)
    attributes = (batch.attributes & ~TRANSACTIONAL_FLAG) | (TRANSACTIONAL_FLAG if transactional else 0)
    _ATTRIBUTES.pack_into(head, _ATTRIBUTES_OFFSET, attributes)
    _PRODUCER.pack_into(head, _PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
    rest = batch.buffer[HEADER_SIZE:]
    _CRC.pack_into(head, _CRC_OFFSET, crc32c(rest, crc32c(memoryview(head)[_ATTRIBUTES_OFFSET:])))
    return bytes(head), rest


def set_crc(batch: bytearray) -> bytearray:
    """Recompute the CRC of a batch whose bytes from ``attributes`` on were written or changed."""
    _CRC.pack_into(batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))
    return batch

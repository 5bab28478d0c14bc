"""The records inside a v2 batch: decode them (decompressing), and encode a new batch from records.

Why: most batches are forwarded as they are (:mod:`mm2py.wire.batches`), but some must be rebuilt —
the batch that straddles the start of a range (only the records from the first wanted offset are copied),
a compacted batch whose offsets have holes (a real broker refuses a batch whose offset range and record
count disagree), and a LogAppendTime batch (a broker refuses a produced batch of that type). A rebuilt
batch holds its records at offset deltas 0..n-1, so record i lands at the target's base offset + i and the
upstream->downstream mapping stays exact record by record.

A rebuilt batch is compressed with its source batch's codec (:mod:`mm2py.wire.compression`).

Record layout: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, key (varint
length, -1 = null), value (same), header count varint, then per header: key (varint length, UTF-8) and
value (varint length, -1 = null). Varints are zigzag-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from mm2py.wire.batches import (
    CODEC_MASK,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_APPEND_TIME_FLAG,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    Codec,
    RecordBatch,
    RecordBatchError,
    set_crc,
)
from mm2py.wire.compression import DecompressedTooLarge, compress, decompress

Header = tuple[str, "bytes | None"]

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True)
class Record:
    """One record with absolute offset and timestamp (what a consumer sees)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


# --- varints -----------------------------------------------------------------------------------------------
def _read_varint(buf: bytes, position: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if position >= len(buf):
            raise RecordBatchError("record data ends inside a varint")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise RecordBatchError("varint longer than 10 bytes")


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag (64-bit, so varlongs and varints alike)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_bytes(buf: bytes, position: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(buf, position)
    if length < 0:
        return None, position
    if position + length > len(buf):
        raise RecordBatchError("record data ends inside a key, value or header")
    return buf[position : position + length], position + length


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


# --- decoding ----------------------------------------------------------------------------------------------
def _record_bounds(batch: RecordBatch, data: bytes, position: int) -> tuple[int, int]:
    """Where the record at ``position`` of ``batch``'s decompressed ``data`` ends, and where its fields start."""
    length, position = _read_varint(data, position)
    end = position + length
    if length < 0 or end > len(data):
        raise RecordBatchError(f"record of batch {batch.base_offset} runs past the batch's data")
    return end, position


def _records_data(batch: RecordBatch) -> bytes:
    """The batch's records, decompressed (within compression.MAX_DECOMPRESSED_BYTES, the error naming the batch)."""
    try:
        return decompress(batch.codec, batch.buffer[HEADER_SIZE:])
    except DecompressedTooLarge as exc:
        raise DecompressedTooLarge(exc.codec, exc.limit, batch.base_offset) from None
    except RecordBatchError as exc:
        raise RecordBatchError(f"batch at offset {batch.base_offset}: {exc}") from None


def decode_records(batch: RecordBatch) -> list[Record]:
    """Every record of a batch with absolute offsets and timestamps (LogAppendTime: the batch's max)."""
    data = _records_data(batch)
    log_append = batch.max_timestamp if batch.is_log_append_time else None
    records: list[Record] = []
    position = 0
    for _ in range(batch.record_count):
        end, position = _record_bounds(batch, data, position)
        position += 1  # record attributes: unused
        timestamp_delta, position = _read_varint(data, position)
        offset_delta, position = _read_varint(data, position)
        key, position = _read_bytes(data, position)
        value, position = _read_bytes(data, position)
        count, position = _read_varint(data, position)
        headers: list[Header] = []
        for _h in range(count):
            name, position = _read_bytes(data, position)
            header_value, position = _read_bytes(data, position)
            if name is None:
                raise RecordBatchError(f"null header key in batch {batch.base_offset}")
            headers.append((name.decode("utf-8"), header_value))
        if position != end:
            raise RecordBatchError(f"record length of batch {batch.base_offset} disagrees with its fields")
        timestamp = log_append if log_append is not None else batch.base_timestamp + timestamp_delta
        records.append(Record(batch.base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    return records


# --- encoding ----------------------------------------------------------------------------------------------
def encode_batch(
    records: Sequence[Record],
    *,
    codec: Codec = Codec.NONE,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytearray:
    """A CreateTime batch holding ``records`` at offset deltas 0..n-1, whatever their own offsets were.

    Timestamps are kept record by record (base = the first record's, as the Java producer writes it).
    """
    if not records:
        raise RecordBatchError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    body = bytearray()
    for delta, record in enumerate(records):
        fields = bytearray(b"\x00")  # attributes
        _write_varint(fields, record.timestamp - base_timestamp)
        _write_varint(fields, delta)
        _write_bytes(fields, record.key)
        _write_bytes(fields, record.value)
        _write_varint(fields, len(record.headers))
        for name, value in record.headers:
            _write_bytes(fields, name.encode("utf-8"))
            _write_bytes(fields, value)
        _write_varint(body, len(fields))
        body += fields
    return _framed(
        compress(codec, bytes(body)),
        int(codec) | (TRANSACTIONAL_FLAG if transactional else 0),
        len(records),
        base_timestamp,
        max(record.timestamp for record in records),
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def _framed(
    payload: bytes,
    attributes: int,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
) -> bytearray:
    """A v2 batch header (CRC included) in front of ``payload``, the records as they go on the wire."""
    out = bytearray(HEADER_SIZE)
    _BATCH_HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out += payload
    return set_crc(out)


def needs_rebuild(batch: RecordBatch, first_wanted: int, end: int | None = None) -> bool:
    """Whether ``batch`` cannot be forwarded as it is: it starts before ``first_wanted`` or reaches ``end``
    (a range copies exactly its offsets), its offsets have holes (compaction), its timestamps are
    LogAppendTime (a producer may not send that type), or the log cleaner marked it with a delete horizon
    (which would mean nothing, or the wrong thing, on the target)."""
    return (
        batch.base_offset < first_wanted
        or (end is not None and batch.last_offset >= end)
        or not batch.is_contiguous
        or bool(batch.attributes & (LOG_APPEND_TIME_FLAG | DELETE_HORIZON_FLAG))
    )


def rebuild(batch: RecordBatch, first_wanted: int, end: int | None = None) -> tuple[bytearray | None, list[int]]:
    """The batch to send in place of ``batch``, and the source offset of each of its records, in order.

    Keeps the records from ``first_wanted`` up to (not including) ``end``, re-encoded contiguously with
    the source codec. ``(None, [])`` when no record is left to copy.
    """
    kept = [
        record
        for record in decode_records(batch)
        if record.offset >= first_wanted and (end is None or record.offset < end)
    ]
    if not kept:
        return None, []
    return encode_batch(kept, codec=Codec(batch.attributes & CODEC_MASK)), [record.offset for record in kept]


def merge(batches: Sequence[RecordBatch]) -> bytearray:
    """One batch holding every record of ``batches`` (contiguous CreateTime batches of one codec), in order.

    Why: a broker takes one batch per partition per Produce request, so a source written in tiny batches (a
    producer with a short linger over many partitions: one or two records each) would be forwarded a handful
    of batches per round trip and fall behind; merged, a request carries what is waiting. Only each record's
    timestamp and offset deltas are rewritten; its key, value and headers are copied as bytes.
    """
    base_timestamp = batches[0].base_timestamp
    body = bytearray()
    count = 0
    for batch in batches:
        data = _records_data(batch)
        shift = batch.base_timestamp - base_timestamp
        position = 0
        for _ in range(batch.record_count):
            end, position = _record_bounds(batch, data, position)
            timestamp_delta, rest = _read_varint(data, position + 1)  # after the (unused) attributes byte
            _offset_delta, rest = _read_varint(data, rest)
            fields = bytearray(b"\x00")
            _write_varint(fields, timestamp_delta + shift)
            _write_varint(fields, count)
            fields += data[rest:end]
            _write_varint(body, len(fields))
            body += fields
            position = end
            count += 1
    codec = batches[0].codec
    return _framed(
        compress(codec, bytes(body)), int(codec), count, base_timestamp, max(b.max_timestamp for b in batches)
    )


class RecordTooLarge(RecordBatchError):
    """One record is larger than a batch may be: no split helps, the limit must be raised."""

    def __init__(self, record: Record, size: int, limit: int) -> None:
        self.record, self.size, self.limit = record, size, limit
        super().__init__(f"the record at offset {record.offset} is {size} bytes as a batch, above {limit}")


def split_to_limit(
    batch: RecordBatch,
    first_wanted: int,
    end: int | None,
    limit: int,
) -> list[tuple[bytearray, list[int]]]:
    """``batch``'s records from ``first_wanted`` to ``end`` as batches of at most ``limit`` bytes each.

    Why: a producer refuses to send more than its ``message.max.bytes`` at once, and the record path (a
    librdkafka producer) re-batches records to fit; a forwarded batch above the limit is re-batched the
    same way, so the batch path copies what the record path copies. Raises RecordTooLarge for a record
    that alone exceeds the limit (as the record path fails on it)."""
    codec = Codec(batch.attributes & CODEC_MASK)
    budget = int(limit * 0.95) - HEADER_SIZE  # room for a codec's framing, which can outgrow its input a little
    groups: list[list[Record]] = [[]]
    used = 0
    for record in decode_records(batch):
        if record.offset < first_wanted or (end is not None and record.offset >= end):
            continue
        size = _estimate(record)
        if groups[-1] and used + size > budget:
            groups.append([])
            used = 0
        groups[-1].append(record)
        used += size
    out: list[tuple[bytearray, list[int]]] = []
    while groups:
        group = groups.pop(0)
        if not group:
            continue
        encoded = encode_batch(group, codec=codec)
        if len(encoded) <= limit:
            out.append((encoded, [r.offset for r in group]))
        elif len(group) == 1:
            raise RecordTooLarge(group[0], len(encoded), limit)
        else:  # the estimate was short (a codec that grew the data): halve and try again
            half = len(group) // 2
            groups[:0] = [group[:half], group[half:]]
    return out


def _estimate(record: Record) -> int:
    """A record's encoded size, uncompressed, give or take its varints (counted at their largest)."""
    return (
        len(record.key or b"")
        + len(record.value or b"")
        + 40
        + sum(len(name) + len(value or b"") + 10 for name, value in record.headers)
    )

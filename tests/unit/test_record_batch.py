"""Record batches as bytes: splitting, headers, producer rewrite + CRC, codecs, rebuilds, read_committed."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from mm2py.wire import batch_codec as br
from mm2py.wire.batch_codec import (
    Record,
    decode_records,
    encode_batch,
    needs_rebuild,
    rebuild,
)
from mm2py.wire.batches import (
    Codec,
    RecordBatch,
    RecordBatchError,
    producer_parts,
    set_crc,
    split_batches,
)
from mm2py.wire.compression import compress, decompress
from mm2py.wire.read_committed import ControlType, control_type, data_batches

T0 = 1_700_000_000_000


def records(n: int, first: int = 0, step: int = 1) -> list[Record]:
    return [
        Record(
            first + i * step,
            T0 + 7 * i,
            f"k{i}".encode() if i % 5 else None,
            None if i % 7 == 6 else f"value-{i}".encode() * 3,
            (("h", b"x"), ("h", None), ("ü", str(i).encode())) if i % 2 else (),
        )
        for i in range(n)
    ]


def batch_of(data: bytes | bytearray) -> RecordBatch:
    return RecordBatch(memoryview(bytes(data)))


def at(data: bytearray, base_offset: int) -> bytearray:
    struct.pack_into(">q", data, 0, base_offset)  # what the broker does on append; the CRC does not cover it
    return data


def control_batch(producer_id: int, offset: int, kind: ControlType) -> bytearray:
    key = struct.pack(">hh", 0, int(kind))
    raw = encode_batch(
        [Record(offset, T0, key, struct.pack(">hi", 0, 0))],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=-1,
        transactional=True,
    )
    raw[22] |= 0x20  # control bit
    return set_crc(raw)


def txn_batch(producer_id: int, offset: int, n: int = 2) -> bytearray:
    return encode_batch(
        records(n, offset),
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )


def test_crc32c_is_the_castagnoli_polynomial() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C


def test_hand_built_header_is_read_field_by_field() -> None:
    body = b"\x00" * 5
    header = struct.pack(">qiibIhiqqqhii", 42, 49 + len(body), 7, 2, 0, 0x10 | 3, 9, T0, T0 + 5, 1234, 3, 77, 10)
    raw = bytearray(header + body)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    batch = batch_of(raw)
    assert (batch.base_offset, batch.last_offset, batch.next_offset, batch.record_count) == (42, 51, 52, 10)
    assert (batch.codec, batch.is_transactional, batch.is_control, batch.is_log_append_time) == (
        Codec.LZ4,
        True,
        False,
        False,
    )
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 3, 77)
    assert (batch.base_timestamp, batch.max_timestamp, batch.partition_leader_epoch) == (T0, T0 + 5, 7)
    assert batch.crc_ok() and batch.is_contiguous and batch.size == len(raw)


@pytest.mark.parametrize("codec", list(Codec))
def test_encode_then_decode_round_trips_every_field_with_every_codec(codec: Codec) -> None:
    original = records(50, first=100)
    raw = encode_batch(original, codec=codec, base_offset=100)
    batch = batch_of(raw)
    assert batch.crc_ok() and batch.codec is codec and batch.record_count == 50 and batch.is_contiguous
    assert decode_records(batch) == original
    # byte-exact: decoding and encoding again gives the same bytes
    assert encode_batch(decode_records(batch), codec=codec, base_offset=100) == raw


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_codecs_round_trip_large_payloads(codec: Codec) -> None:
    data = bytes(range(256)) * 2000 + b"tail"
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_reads_raw_and_xerial_framing_and_writes_xerial() -> None:
    import cramjam

    data = b"abcdefgh" * 20_000  # more than one 32 KiB xerial block
    framed = compress(Codec.SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(Codec.SNAPPY, framed) == data
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_frames_have_independent_blocks_as_the_java_reader_requires() -> None:
    frame = compress(Codec.LZ4, b"z" * 300_000)
    assert frame[:4] == b"\x04\x22\x4d\x18" and frame[4] & 0x20 and frame[4] >> 6 == 1


def test_split_finds_every_batch_without_copying_and_reports_a_truncated_tail() -> None:
    first, second, third = (at(encode_batch(records(n, o)), o) for n, o in ((3, 0), (4, 3), (5, 7)))
    data = bytes(first + second + third)
    whole = split_batches(data)
    assert [(b.base_offset, b.record_count) for b in whole.batches] == [(0, 3), (3, 4), (7, 5)]
    assert whole.truncated_at is None
    assert whole.batches[1].buffer.obj is data  # a view into the response, not a copy
    cut = split_batches(data[:-10])
    assert [b.base_offset for b in cut.batches] == [0, 3] and cut.truncated_at == 7
    assert cut.truncated_size == len(third)
    tiny = split_batches(data[: len(first) + 5])  # not even the next batch's length
    assert [b.base_offset for b in tiny.batches] == [0] and tiny.truncated_at == 3
    assert split_batches(data[:20]).batches == [] and split_batches(data[:20]).truncated_at == 0


def test_older_message_formats_are_refused() -> None:
    raw = bytearray(encode_batch(records(1)))
    raw[16] = 1
    with pytest.raises(RecordBatchError, match="v1"):
        split_batches(bytes(raw))


def with_producer(batch: RecordBatch, *ids: int, transactional: bool = False) -> bytes:
    """The bytes the batch path sends for ``batch``: producer_parts joined, as the Produce request joins them."""
    return b"".join(producer_parts(batch, *ids, transactional=transactional))


def test_with_producer_rewrites_base_offset_producer_fields_and_transactional_bit_and_crc_only() -> None:
    source = txn_batch(producer_id=999, offset=40, n=6)
    batch = batch_of(source)
    out = with_producer(batch, 5, 2, 300)
    rewritten = batch_of(out)
    assert (rewritten.producer_id, rewritten.producer_epoch, rewritten.base_sequence) == (5, 2, 300)
    assert not rewritten.is_transactional and rewritten.crc_ok() and rewritten.crc != batch.crc
    assert rewritten.base_offset == 0  # as a producer writes it: Kafka 4 refuses any other with INVALID_RECORD
    assert [(r.offset - 0, r.key, r.value, r.headers, r.timestamp) for r in decode_records(rewritten)] == [
        (r.offset - 40, r.key, r.value, r.headers, r.timestamp) for r in decode_records(batch)
    ]
    changed = [i for i, (a, b) in enumerate(zip(source, out, strict=True)) if a != b]
    assert all(i < 8 or 17 <= i < 21 or i in (21, 22) or 43 <= i < 57 for i in changed)
    assert batch_of(with_producer(rewritten, -1, -1, -1, transactional=True)).is_transactional


def test_producer_parts_are_a_new_header_and_a_view_of_the_rest_with_the_crc_of_both() -> None:
    source = bytes(txn_batch(producer_id=999, offset=40, n=6))
    batch = batch_of(source)
    head, rest = producer_parts(batch, 5, 2, 300)
    assert len(head) == 61 and rest.obj is source  # the records are not copied
    joined = batch_of(head + bytes(rest))
    assert joined.crc_ok() and bytes(rest) == source[61:]
    assert (joined.producer_id, joined.producer_epoch, joined.base_sequence) == (5, 2, 300)


def test_contiguous_batches_from_the_wanted_offset_on_are_forwarded_as_they_are() -> None:
    batch = batch_of(at(encode_batch(records(5, 10)), 10))
    assert not needs_rebuild(batch, 10) and not needs_rebuild(batch, 3)
    assert list(batch.upstream_offsets()) == [10, 11, 12, 13, 14]


@pytest.mark.parametrize("codec", list(Codec))
def test_a_batch_straddling_the_start_keeps_records_from_the_first_wanted_offset(codec: Codec) -> None:
    batch = batch_of(at(encode_batch(records(10, 20), codec=codec), 20))
    assert needs_rebuild(batch, 24)
    raw, upstream = rebuild(batch, 24)
    assert raw is not None and upstream == [24, 25, 26, 27, 28, 29]
    rebuilt = batch_of(raw)
    assert rebuilt.codec is codec and rebuilt.is_contiguous and rebuilt.crc_ok()
    kept = decode_records(rebuilt)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in kept] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records(10, 20)[4:]
    ]
    assert rebuild(batch, 30) == (None, [])


def compacted_batch(codec: Codec = Codec.NONE) -> RecordBatch:
    """What the log cleaner leaves: offsets 50, 53, 54, 58 survive and lastOffsetDelta keeps the original 9."""
    survivors = [r for r in records(10, 50) if r.offset in (50, 53, 54, 58)]
    body = bytearray()
    for record in survivors:
        fields = bytearray(b"\x00")
        br._write_varint(fields, record.timestamp - survivors[0].timestamp)
        br._write_varint(fields, record.offset - 50)
        br._write_bytes(fields, record.key)
        br._write_bytes(fields, record.value)
        br._write_varint(fields, len(record.headers))
        for name, value in record.headers:
            br._write_bytes(fields, name.encode())
            br._write_bytes(fields, value)
        br._write_varint(body, len(fields))
        body += fields
    payload = compress(codec, bytes(body))
    raw = bytearray(
        struct.pack(
            ">qiibIhiqqqhii",
            50,
            49 + len(payload),
            0,
            2,
            0,
            int(codec),
            9,
            survivors[0].timestamp,
            survivors[-1].timestamp,
            -1,
            -1,
            -1,
            len(survivors),
        )
    )
    raw += payload
    return batch_of(set_crc(raw))


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD])
def test_a_batch_with_offset_holes_is_rebuilt_and_keeps_each_records_source_offset(codec: Codec) -> None:
    batch = compacted_batch(codec)
    assert not batch.is_contiguous and needs_rebuild(batch, 0)
    assert [r.offset for r in decode_records(batch)] == [50, 53, 54, 58]
    raw, upstream = rebuild(batch, 0)
    assert raw is not None and upstream == [50, 53, 54, 58]
    rebuilt = batch_of(raw)
    assert rebuilt.is_contiguous and rebuilt.last_offset_delta == 3
    assert [r.value for r in decode_records(rebuilt)] == [r.value for r in decode_records(batch)]
    assert batch.next_offset == 60  # the reader continues after the original last offset


def test_log_append_time_batches_are_rebuilt_with_the_times_a_consumer_saw() -> None:
    raw = encode_batch(records(3))
    raw[22] |= 0x08
    struct.pack_into(">q", raw, 35, T0 + 999)
    batch = batch_of(set_crc(raw))
    assert batch.is_log_append_time and needs_rebuild(batch, 0)
    assert {r.timestamp for r in decode_records(batch)} == {T0 + 999}
    rebuilt, _ = rebuild(batch, 0)
    assert rebuilt is not None
    assert not batch_of(rebuilt).is_log_append_time
    assert {r.timestamp for r in decode_records(batch_of(rebuilt))} == {T0 + 999}


def test_control_batches_are_never_data() -> None:
    commit = batch_of(control_batch(7, 12, ControlType.COMMIT))
    assert commit.is_control and control_type(commit) is ControlType.COMMIT
    assert control_type(batch_of(control_batch(7, 12, ControlType.ABORT))) is ControlType.ABORT
    data = batch_of(txn_batch(7, 10))
    assert control_type(data) is None
    assert list(data_batches([data, commit], None)) == [data]
    assert list(data_batches([data, commit], [])) == [data]


def test_read_committed_drops_aborted_transactions_until_their_abort_marker() -> None:
    # offsets: p7 data 0-1, p8 data 2-3, p7 abort 4, p8 commit 5, p7 data 6-7 (new txn), p9 data 8-9 aborted
    # but listed first at 8, p9 abort 10, plain data 11-12
    plain = at(encode_batch(records(2, 11)), 11)
    batches = [
        batch_of(b)
        for b in (
            txn_batch(7, 0),
            txn_batch(8, 2),
            control_batch(7, 4, ControlType.ABORT),
            control_batch(8, 5, ControlType.COMMIT),
            txn_batch(7, 6),
            txn_batch(9, 8),
            control_batch(9, 10, ControlType.ABORT),
            plain,
        )
    ]
    kept = list(data_batches(batches, [(7, 0), (9, 8)]))
    assert [b.base_offset for b in kept] == [2, 6, 11]
    # read_uncommitted: everything but the markers
    assert [b.base_offset for b in data_batches(batches, None)] == [0, 2, 6, 8, 11]


def test_an_aborted_transaction_that_starts_after_a_batch_does_not_drop_it() -> None:
    batches = [
        batch_of(txn_batch(7, 0)),
        batch_of(control_batch(7, 2, ControlType.COMMIT)),
        batch_of(txn_batch(7, 3)),
        batch_of(control_batch(7, 5, ControlType.ABORT)),
    ]
    assert [b.base_offset for b in data_batches(batches, [(7, 3)])] == [0]

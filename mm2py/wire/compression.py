"""The four Kafka compression codecs of v2 record batches, for the batches the batch path must rebuild.

Compression comes from ``cramjam`` (Rust, maintained, one wheel for all four; no system libraries):
gzip; snappy both raw and in the xerial framing the Java producer writes (``\\x82SNAPPY\\x00``, then
length-prefixed raw blocks); lz4 frames with independent blocks (Java's reader refuses linked blocks);
zstd.

Decompression stops at ``MAX_DECOMPRESSED_BYTES``: a batch of a few kilobytes can hold a gigabyte of zeros, and
a worker that inflated it whole would die of it (or take its executor down). So each codec is read through its
library's own bounded API, never past the limit: zlib's ``max_length`` (gzip), lz4's frame decompressor with
``max_length``, zstandard's stream reader read in bounded pieces, and for snappy each block's declared length
(``decompress_raw_len``) checked before the block is inflated.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from mm2py.wire.batches import Codec, RecordBatchError

# The largest a batch may decompress to. A producer with default settings writes far smaller batches
# (librdkafka: batch.size 1,000,000 bytes before compression; Java: batch.size 16 KiB of estimated compressed
# size), and a batch is read into memory whole: 128 MiB is over a hundred times a default librdkafka batch and
# still something a Python worker holds without risk.
MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024
_PIECE = 1024 * 1024  # how much is inflated per step while the limit is watched


class DecompressedTooLarge(RecordBatchError):
    """A batch decompresses to more than the limit: it is not read further (a compression bomb, or a producer
    whose batches are far beyond any default)."""

    def __init__(self, codec: Codec, limit: int, base_offset: int | None = None) -> None:
        self.codec = codec
        self.limit = limit
        where = f"the batch at offset {base_offset}" if base_offset is not None else "a batch"
        super().__init__(
            f"{where} ({codec.name.lower()}) decompresses to more than {limit} bytes, mm2py's limit for one batch; "
            "it was not copied"
        )


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024  # the Java client's block size
_INT32 = struct.Struct(">i")


def decompress(codec: Codec, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """``data`` decompressed; raises DecompressedTooLarge beyond ``limit`` bytes, RecordBatchError when the
    data is not valid for its codec."""
    if codec is Codec.NONE:
        return bytes(data)
    try:
        if codec is Codec.GZIP:
            return _gzip_decompress(bytes(data), limit)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(bytes(data), limit)
        if codec is Codec.LZ4:
            return _lz4_decompress(bytes(data), limit)
        if codec is Codec.ZSTD:
            return _zstd_decompress(bytes(data), limit)
    except _TooLarge:
        raise DecompressedTooLarge(codec, limit) from None
    except (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise RecordBatchError(f"{codec.name.lower()} data cannot be decompressed: {exc}") from None
    raise RecordBatchError(f"unknown compression codec {codec}")


class _TooLarge(Exception):
    pass


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    """gzip members one after the other (as Java's GZIPInputStream reads them), through zlib's max_length."""
    out = bytearray()
    inflater = zlib.decompressobj(wbits=31)
    rest = data
    while True:
        out += inflater.decompress(rest, min(_PIECE, limit + 1 - len(out)))
        if len(out) > limit:
            raise _TooLarge
        if inflater.eof:
            rest = inflater.unused_data
            if not rest:
                return bytes(out)
            inflater = zlib.decompressobj(wbits=31)
        else:
            rest = inflater.unconsumed_tail
            if not rest and not inflater.eof:
                # All input taken: what zlib holds back comes with flush(), itself bounded.
                out += inflater.flush(limit + 1 - len(out))
                if len(out) > limit:
                    raise _TooLarge
                if not inflater.eof:
                    raise RecordBatchError("gzip data ends before its stream does")
                return bytes(out)


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    """lz4 frames one after the other, through the frame decompressor's max_length."""
    out = bytearray()
    inflater = lz4.frame.LZ4FrameDecompressor()
    rest = data
    while True:
        out += inflater.decompress(rest, max_length=min(_PIECE, limit + 1 - len(out)))
        if len(out) > limit:
            raise _TooLarge
        rest = b""
        if inflater.eof:
            rest = inflater.unused_data or b""
            if not rest:
                return bytes(out)
            inflater = lz4.frame.LZ4FrameDecompressor()
        elif inflater.needs_input:
            raise RecordBatchError("lz4 data ends before its frame does")


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    """zstd frames one after the other, read from zstandard's stream reader a bounded piece at a time."""
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while True:
            piece = reader.read(min(_PIECE, limit + 1 - len(out)))
            if not piece:
                return bytes(out)
            out += piece
            if len(out) > limit:
                raise _TooLarge


def compress(codec: Codec, data: bytes) -> bytes:
    if codec is Codec.NONE:
        return data
    if codec is Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Codec.SNAPPY:
        return _snappy_compress_xerial(data)
    if codec is Codec.LZ4:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec is Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise RecordBatchError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    """Raw snappy, or xerial's blocks; each block's length (in its header) is checked before it is inflated."""
    if not data.startswith(_XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > limit:
            raise _TooLarge
        return bytes(cramjam.snappy.decompress_raw(data))
    position, parts, total = 16, [], 0  # magic (8), version (4), compatible version (4)
    while position < len(data):
        if position + 4 > len(data):
            raise RecordBatchError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise RecordBatchError("truncated xerial snappy block")
        block = data[position : position + length]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > limit:
            raise _TooLarge
        parts.append(bytes(cramjam.snappy.decompress_raw(block)))
        position += length
    return b"".join(parts)


def _snappy_compress_xerial(data: bytes) -> bytes:
    parts = [_XERIAL_MAGIC, _INT32.pack(1), _INT32.pack(1)]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts += [_INT32.pack(len(block)), block]
    return b"".join(parts)

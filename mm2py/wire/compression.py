"""The four Kafka compression codecs of v2 record batches, for the batches the batch path must rebuild.

Codecs come from ``cramjam`` (Rust, maintained, one wheel for all four; no system libraries):
gzip; snappy both raw and in the xerial framing the Java producer writes (``\\x82SNAPPY\\x00``, then
length-prefixed raw blocks); lz4 frames with independent blocks (Java's reader refuses linked blocks);
zstd.
"""

from __future__ import annotations

import struct

import cramjam

from mm2py.wire.batches import Codec, RecordBatchError

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024  # the Java client's block size
_INT32 = struct.Struct(">i")


def decompress(codec: Codec, data: bytes | memoryview) -> bytes:
    if codec is Codec.NONE:
        return bytes(data)
    if codec is Codec.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec is Codec.SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec is Codec.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec is Codec.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise RecordBatchError(f"unknown compression codec {codec}")


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


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    position, parts = 16, []  # magic (8), version (4), compatible version (4)
    while position < len(data):
        if position + 4 > len(data):
            raise RecordBatchError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise RecordBatchError("truncated xerial snappy block")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[position : position + length])))
        position += length
    return b"".join(parts)


def _snappy_compress_xerial(data: bytes) -> bytes:
    parts = [_XERIAL_MAGIC, _INT32.pack(1), _INT32.pack(1)]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts += [_INT32.pack(len(block)), block]
    return b"".join(parts)

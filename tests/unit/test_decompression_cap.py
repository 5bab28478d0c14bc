"""Decompression on the batch path stops at a bound (no JVM, no broker): real compressed payloads of 1 GiB of
zeros (a few kilobytes to a few megabytes each, built streaming, never held decompressed) are refused by every
codec's bounded reader with memory to spare, the refusal names the batch's base offset, and the forwarding
path turns it into the partition's failure (which the task reports with flow, topic and partition)."""

from __future__ import annotations

import time
import tracemalloc
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard

from mm2py.wire.batch_codec import _framed  # _framed: a v2 header around any payload
from mm2py.wire.batches import Codec, RecordBatchError
from mm2py.wire.compression import MAX_DECOMPRESSED_BYTES, DecompressedTooLarge, compress, decompress
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.forwarding import ForwardingError, batches_to_send

GIB = 1024**3
MIB = 1024**2
ZEROS = bytes(MIB)


def _gzip(total: int) -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [deflater.compress(ZEROS) for _ in range(total // MIB)]
    return b"".join([*parts, deflater.flush()])


def _zstd(total: int) -> bytes:
    writer = zstandard.ZstdCompressor().compressobj()
    parts = [writer.compress(ZEROS) for _ in range(total // MIB)]
    return b"".join([*parts, writer.flush()])


def _lz4(total: int) -> bytes:
    with lz4.frame.LZ4FrameCompressor(block_linked=False) as writer:
        parts = [writer.begin()] + [writer.compress(ZEROS) for _ in range(total // MIB)]
        return b"".join([*parts, writer.flush()])


def _snappy(total: int) -> bytes:
    """xerial framing, as the Java producer writes it (snappy's own ratio caps a bomb near 21:1)."""
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    framed = len(block).to_bytes(4, "big") + block
    return b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") * 2 + framed * (total // (32 * 1024))


BOMBS: dict[Codec, tuple[Callable[[int], bytes], int]] = {
    Codec.GZIP: (_gzip, GIB),
    Codec.ZSTD: (_zstd, GIB),
    Codec.LZ4: (_lz4, GIB),
    Codec.SNAPPY: (_snappy, 256 * MIB),
}
_built: dict[Codec, bytes] = {}


def bomb(codec: Codec) -> bytes:
    if codec not in _built:
        build, total = BOMBS[codec]
        _built[codec] = build(total)
    return _built[codec]


@pytest.mark.parametrize("codec", list(BOMBS), ids=lambda codec: codec.name.lower())
def test_a_bomb_stops_at_the_limit_with_bounded_memory(codec: Codec) -> None:
    data = bomb(codec)
    limit = 8 * MIB
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(DecompressedTooLarge, match=f"decompresses to more than {limit} bytes"):
            decompress(codec, data, limit)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.monotonic() - started
    # The input (a codec may keep a copy of what it has not consumed), the output up to the limit and one piece
    # beyond it; never the gigabyte.
    assert peak < 2 * len(data) + limit + 4 * MIB, peak
    print(f"FIGURES {codec.name}: {len(data)} B refused in {took * 1000:.0f} ms, peak {peak / MIB:.1f} MiB")


def test_the_default_limit_stops_a_gib_of_zeros() -> None:
    data = bomb(Codec.ZSTD)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedTooLarge):
            decompress(Codec.ZSTD, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The limit (with a growing buffer's slack), and not the gigabyte.
    assert MAX_DECOMPRESSED_BYTES < peak < MAX_DECOMPRESSED_BYTES * 1.25 + 8 * MIB, peak
    print(f"FIGURES default limit {MAX_DECOMPRESSED_BYTES} B: {len(data)} B of zstd refused, peak {peak / MIB:.0f} MiB")


@pytest.mark.parametrize("codec", list(BOMBS), ids=lambda codec: codec.name.lower())
def test_data_at_the_limit_is_read_whole_and_concatenated_frames_too(codec: Codec) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, not all zeros
    once = compress(codec, payload)
    assert decompress(codec, once, len(payload)) == payload  # exactly at the limit: fine
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, once, len(payload) - 1)
    if codec is not Codec.SNAPPY:  # gzip members, lz4 and zstd frames one after the other
        assert decompress(codec, once + once) == payload * 2


@pytest.mark.parametrize("codec", list(BOMBS), ids=lambda codec: codec.name.lower())
def test_data_that_is_not_its_codec_is_a_batch_error_not_a_crash(codec: Codec) -> None:
    with pytest.raises(RecordBatchError):
        decompress(codec, b"\x82SNAPPY\x00 certainly not compressed data" if codec is Codec.SNAPPY else b"junk" * 9)


def test_a_bomb_batch_the_forwarding_must_rebuild_fails_its_partition_naming_the_base_offset() -> None:
    """A gzip batch of 1 GiB of zeros at offset 1000 whose range starts inside it (so it must be rebuilt to keep
    only the wanted records): the partition stops there with an error naming the batch, nothing sent."""
    payload = bomb(Codec.GZIP)
    batch = _framed(payload, int(Codec.GZIP), 100, 0, 0, base_offset=1000)
    state = FetchPartition("orders", 3, position=1050, end=2**63 - 1)
    with pytest.raises(ForwardingError) as caught:
        batches_to_send(state, memoryview(batch), None, 1 << 30, "target")
    message = str(caught.value.error)
    assert "the batch at offset 1000 (gzip) decompresses to more than" in message, message
    assert not caught.value.error.retriable
    assert state.position == 1050  # not moved past the batch


def test_a_bomb_batch_forwarded_as_it_came_is_not_decompressed_at_all() -> None:
    """A batch that needs no rebuild goes to the target as the source holds it (the target broker validates it):
    mm2py never inflates it, so the limit costs nothing on the common path."""
    data = bomb(Codec.ZSTD)
    batch = _framed(data, int(Codec.ZSTD), 5, 0, 0, base_offset=0)
    state = FetchPartition("orders", 0, position=0, end=2**63 - 1)
    tracemalloc.start()
    try:
        sent = batches_to_send(state, memoryview(batch), None, 1 << 30, "target")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sent is not None and [bytes(item.batch.buffer) for item in sent] == [bytes(batch)]
    assert state.position == 5 and peak < 4 * len(batch) + MIB, peak

"""Small batches are merged into one (:func:`mm2py.wire.batch_codec.merge`): every record exact (key, value,
headers, timestamp, order). How the sender uses it is in test_sender.py."""

from __future__ import annotations

import pytest

from mm2py.wire.batch_codec import Record, decode_records, encode_batch, merge
from mm2py.wire.batches import Codec, RecordBatch


def tiny_batches(codec: Codec) -> list[RecordBatch]:
    """Three batches of one to three records: null keys and values, headers, timestamps going back and forth."""
    groups = [
        [Record(0, 5_000, b"k0", b"v0", (("h", b"1"), ("empty", None)))],
        [Record(1, 4_990, None, b"v1"), Record(2, 5_100, b"k2", None, (("h", b"2"),))],
        [Record(3, 6_000, b"k3", b"v3" * 50), Record(4, 5_999, b"k4", b""), Record(5, 7_000, b"", b"v5")],
    ]
    return [RecordBatch(memoryview(encode_batch(g, codec=codec, base_offset=g[0].offset))) for g in groups]


@pytest.mark.parametrize("codec", list(Codec))
def test_merged_batches_hold_every_record_exactly_with_its_own_timestamp(codec: Codec) -> None:
    parts = tiny_batches(codec)
    merged = RecordBatch(memoryview(merge(parts)))
    assert merged.crc_ok() and merged.codec is codec and merged.record_count == 6
    expected = [r for part in parts for r in decode_records(part)]
    assert decode_records(merged) == expected  # offsets 0..5 here, as the source's
    assert merged.max_timestamp == 7_000 and merged.base_timestamp == 5_000

"""Small batches waiting in one partition are merged before they are produced: every record exact (key,
value, headers, timestamp, order), each record's source offset kept, a resent batch never merged."""

from __future__ import annotations

import pytest
from test_batch_produce import SPEC, FakeBroker, batches

from mm2py.wire.batch_codec import Record, decode_records, encode_batch, merge
from mm2py.wire.batches import Codec, RecordBatch
from mm2py.wire.sender import Lane, Outgoing, PipelinedProducer


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


def test_a_lane_of_small_batches_goes_in_fewer_requests_with_every_offset_mapped() -> None:
    broker = FakeBroker()
    lane = Lane("t", 0, "partition=0")
    lane.pending.extend(batches(40))  # 40 batches of 10 records
    producer = PipelinedProducer(SPEC, broker, [lane], 7, 0, merge_below=16 * 1024, merge_up_to=4 * 1024)  # type: ignore[arg-type]
    while producer.busy():
        producer.step()
    assert broker.requests < 10  # 40 without merging: one batch per partition per request
    assert (lane.records, lane.last_upstream) == (400, 399) and lane.runs == [(0, 0, 400)]
    assert sum(n for _seq, n, _base in broker.logs[("t", 0)]) == 400


def test_a_batch_already_sent_keeps_its_bytes_and_is_not_merged() -> None:
    broker = FakeBroker()
    lane = Lane("t", 0, "partition=0")
    first, *rest = batches(5)
    producer = PipelinedProducer(SPEC, broker, [lane], 7, 0, merge_below=16 * 1024, merge_up_to=64 * 1024)  # type: ignore[arg-type]
    wire = producer._wire(lane, first)  # sent once already (its answer was lost), so it is resent as it was
    lane.pending.extend([first, *rest])
    producer._merge_head(lane)
    assert lane.pending[0] is first and lane.pending[0].wire == wire and len(lane.pending) == 5
    lane.pending.popleft()
    producer._merge_head(lane)
    assert len(lane.pending) == 1 and isinstance(lane.pending[0], Outgoing)
    assert list(lane.pending[0].upstream) == list(range(10, 50))

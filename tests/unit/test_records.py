"""MM2's record formats, checked byte for byte against known vectors (docs/mm2-semantics.md, *Record formats*).

The vectors were produced by Kafka's own Heartbeat/Checkpoint/OffsetSync classes; H1, C2 and O1 are the values
of MM2's HeartbeatTest, CheckpointTest and OffsetSyncTest.
"""

from __future__ import annotations

import json
import random

import pytest

from mm2py.errors import Mm2pyError
from mm2py.mirror.record_formats import (
    Checkpoint,
    Heartbeat,
    OffsetSync,
    RecordFormatError,
    checkpoint_offset_key,
    format_checkpoint,
    format_heartbeat,
    format_offset_sync,
    heartbeat_offset_key,
    parse_source_offset_key,
    parse_source_offset_value,
    source_offset_key,
    source_offset_value,
)


def h(text: str) -> bytes:
    """Hex as the reference prints it: fields separated by `|` and spaces."""
    return bytes.fromhex(text.replace("|", "").replace(" ", ""))


HEARTBEATS = [
    pytest.param(
        Heartbeat("source-1", "target-2", 1234567890),
        "0008 736f757263652d31 | 0008 7461726765742d32",
        "0000 | 00000000499602d2",
        id="H1",
    ),
    pytest.param(Heartbeat("A", "B", 0), "0001 41 | 0001 42", "0000 | 0000000000000000", id="H2"),
    pytest.param(
        Heartbeat("us-west", "us-east", 1700000000000),
        "0007 75732d77657374 | 0007 75732d65617374",
        "0000 | 0000018bcfe56800",
        id="H3",
    ),
    pytest.param(
        Heartbeat("primary", "backup", -1),
        "0007 7072696d617279 | 0006 6261636b7570",
        "0000 | ffffffffffffffff",
        id="H4",
    ),
]

CHECKPOINTS = [
    pytest.param(
        Checkpoint("g1", "orders", 0, 100, 90, ""),
        "0002 6731 | 0006 6f7264657273 | 00000000",
        "0000 | 0000000000000064 | 000000000000005a | 0000",
        id="C1",
    ),
    pytest.param(
        Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6"),
        "0007 67726f75702d31 | 0007 746f7069632d32 | 00000003",
        "0000 | 0000000000000004 | 0000000000000005 | 000a 6d657461646174612d36",
        id="C2",
    ),
    pytest.param(
        Checkpoint("consumer-group-1", "primary.test-topic-1", 9, 1234567, 1234500, ""),
        "0010 636f6e73756d65722d67726f75702d31 | 0014 7072696d6172792e746573742d746f7069632d31 | 00000009",
        "0000 | 000000000012d687 | 000000000012d644 | 0000",
        id="C3",
    ),
    pytest.param(
        Checkpoint("g", "t", 2147483647, 0, 1, "é"),
        "0001 67 | 0001 74 | 7fffffff",
        "0000 | 0000000000000000 | 0000000000000001 | 0002 c3a9",
        id="C4",
    ),
]

OFFSET_SYNCS = [
    pytest.param(
        OffsetSync("topic-1", 2, 3, 4),
        "0007 746f7069632d31 | 00000002",
        "0000000000000003 | 0000000000000004",
        id="O1",
    ),
    pytest.param(
        OffsetSync("orders", 0, 100, 90),
        "0006 6f7264657273 | 00000000",
        "0000000000000064 | 000000000000005a",
        id="O2",
    ),
    pytest.param(
        OffsetSync("test-topic-1", 7, 4294967296, -1),
        "000c 746573742d746f7069632d31 | 00000007",
        "0000000100000000 | ffffffffffffffff",
        id="O3",
    ),
    pytest.param(OffsetSync("t", 0, 0, 0), "0001 74 | 00000000", "0000000000000000 | 0000000000000000", id="O4"),
]

ALL_VECTORS = HEARTBEATS + CHECKPOINTS + OFFSET_SYNCS
Record = Heartbeat | Checkpoint | OffsetSync
RecordType = type[Heartbeat] | type[Checkpoint] | type[OffsetSync]


@pytest.mark.parametrize(("record", "key_hex", "value_hex"), ALL_VECTORS)
def test_encoding_matches_mm2_bytes(record: Record, key_hex: str, value_hex: str) -> None:
    assert record.record_key().hex() == h(key_hex).hex()
    assert record.record_value().hex() == h(value_hex).hex()


@pytest.mark.parametrize(("record", "key_hex", "value_hex"), ALL_VECTORS)
def test_decoding_mm2_bytes_gives_back_the_record(record: Record, key_hex: str, value_hex: str) -> None:
    assert type(record).from_record(h(key_hex), h(value_hex)) == record


def test_vector_sizes_match_the_reference() -> None:
    assert len(Heartbeat("source-1", "target-2", 1234567890).record_key()) == 20
    assert len(Heartbeat("source-1", "target-2", 1234567890).record_value()) == 10
    assert len(Checkpoint("consumer-group-1", "primary.test-topic-1", 9, 1, 2).record_key()) == 44
    assert len(Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6").record_value()) == 30
    assert len(OffsetSync("topic-1", 2, 3, 4).record_value()) == 16


# --- decode behaviour ------------------------------------------------------------------------------------

VALID: dict[type, Record] = {
    Heartbeat: Heartbeat("A", "B", 7),
    Checkpoint: Checkpoint("g1", "orders", 0, 100, 90, "m"),
    OffsetSync: OffsetSync("orders", 0, 100, 90),
}


@pytest.mark.parametrize("cls", [Heartbeat, Checkpoint, OffsetSync])
@pytest.mark.parametrize("part", ["key", "value"])
def test_empty_key_or_value_is_rejected(cls: RecordType, part: str) -> None:
    record = VALID[cls]
    key, value = record.record_key(), record.record_value()
    with pytest.raises(RecordFormatError, match=rf"{cls.__name__} {part} is empty"):
        cls.from_record(b"" if part == "key" else key, b"" if part == "value" else value)


@pytest.mark.parametrize("cls", [Heartbeat, Checkpoint, OffsetSync])
@pytest.mark.parametrize("part", ["key", "value"])
def test_null_key_or_value_is_rejected(cls: RecordType, part: str) -> None:
    record = VALID[cls]
    key, value = record.record_key(), record.record_value()
    with pytest.raises(RecordFormatError, match=rf"{cls.__name__} {part} is null"):
        cls.from_record(None if part == "key" else key, None if part == "value" else value)


@pytest.mark.parametrize("cls", [Heartbeat, Checkpoint, OffsetSync])
def test_every_truncation_of_key_or_value_is_rejected(cls: RecordType) -> None:
    record = VALID[cls]
    key, value = record.record_key(), record.record_value()
    for cut in range(1, len(key)):
        with pytest.raises(RecordFormatError, match=rf"{cls.__name__} key is truncated"):
            cls.from_record(key[:cut], value)
    for cut in range(1, len(value)):
        with pytest.raises(RecordFormatError, match=rf"{cls.__name__} value is truncated"):
            cls.from_record(key, value[:cut])


def test_truncation_error_names_the_field() -> None:
    key = Checkpoint("g1", "orders", 0, 1, 2).record_key()
    with pytest.raises(RecordFormatError, match=r"field partition needs 4 bytes"):
        Checkpoint.from_record(key[:-1], Checkpoint("g1", "orders", 0, 1, 2).record_value())


def test_negative_string_length_is_rejected() -> None:
    with pytest.raises(RecordFormatError, match=r"negative string length -1"):
        OffsetSync.from_record(h("ffff 74 | 00000000"), h("0000000000000000 | 0000000000000000"))


def test_decode_errors_are_value_errors_and_mm2py_errors() -> None:
    with pytest.raises(ValueError):
        OffsetSync.from_record(b"", b"")
    assert issubclass(RecordFormatError, Mm2pyError)


@pytest.mark.parametrize("cls", [Heartbeat, Checkpoint, OffsetSync])
def test_trailing_bytes_after_the_last_field_are_ignored(cls: RecordType) -> None:
    record = VALID[cls]
    assert cls.from_record(record.record_key() + b"\x00junk", record.record_value() + b"\xff\xff") == record


@pytest.mark.parametrize("cls", [Heartbeat, Checkpoint])
def test_version_is_read_but_not_enforced(cls: RecordType) -> None:
    record = VALID[cls]
    value = record.record_value()
    for version in (b"\x00\x01", b"\x7f\xff", b"\xff\xff"):
        assert cls.from_record(record.record_key(), version + value[2:]) == record


def test_offset_sync_has_no_version_header() -> None:
    assert OffsetSync("t", 0, 1, 2).record_value()[:8] == (1).to_bytes(8, "big")


def test_invalid_utf8_decodes_with_replacement_like_java() -> None:
    decoded = OffsetSync.from_record(h("0002 ff74 | 00000000"), h("0000000000000000 | 0000000000000000"))
    assert decoded.topic == "\ufffdt"


def test_lone_surrogate_encodes_as_question_mark_like_java() -> None:
    assert OffsetSync("a\udc80", 0, 0, 0).record_key() == h("0002 613f | 00000000")


# --- encode validation ------------------------------------------------------------------------------------


def test_string_of_32767_utf8_bytes_is_accepted_and_32768_rejected() -> None:
    assert len(OffsetSync("x" * 32767, 0, 0, 0).record_key()) == 2 + 32767 + 4
    with pytest.raises(RecordFormatError, match=r"OffsetSync topic is 32768 bytes in UTF-8"):
        OffsetSync("x" * 32768, 0, 0, 0).record_key()


def test_string_limit_counts_utf8_bytes_not_characters() -> None:
    with pytest.raises(RecordFormatError, match=r"metadata is 32768 bytes"):
        Checkpoint("g", "t", 0, 0, 0, "é" * 16384).record_value()


def test_none_metadata_is_rejected() -> None:
    checkpoint = Checkpoint("g", "t", 0, 0, 0, None)  # type: ignore[arg-type]
    with pytest.raises(RecordFormatError, match=r"Checkpoint metadata is None"):
        checkpoint.record_value()


@pytest.mark.parametrize("partition", [-(2**31) - 1, 2**31])
def test_partition_outside_int32_is_rejected(partition: int) -> None:
    with pytest.raises(RecordFormatError, match=r"partition=.* is out of INT32 range"):
        OffsetSync("t", partition, 0, 0).record_key()
    with pytest.raises(RecordFormatError, match=r"partition=.* is out of INT32 range"):
        Checkpoint("g", "t", partition, 0, 0).record_key()


@pytest.mark.parametrize("offset", [-(2**63) - 1, 2**63])
def test_offsets_outside_int64_are_rejected(offset: int) -> None:
    with pytest.raises(RecordFormatError, match=r"upstreamOffset=.* is out of INT64 range"):
        OffsetSync("t", 0, offset, 0).record_value()
    with pytest.raises(RecordFormatError, match=r"Checkpoint offset=.* is out of INT64 range"):
        Checkpoint("g", "t", 0, 0, offset).record_value()
    with pytest.raises(RecordFormatError, match=r"timestamp=.* is out of INT64 range"):
        Heartbeat("a", "b", offset).record_value()


def test_int64_extremes_round_trip() -> None:
    sync = OffsetSync("t", -(2**31), -(2**63), 2**63 - 1)
    assert OffsetSync.from_record(sync.record_key(), sync.record_value()) == sync


def test_non_integer_offset_is_rejected() -> None:
    with pytest.raises(RecordFormatError, match=r"must be an integer"):
        OffsetSync("t", 0, 1.5, 0).record_value()  # type: ignore[arg-type]


# --- property: round trip over generated values -----------------------------------------------------------

_ALPHABET = "abcXYZ019._-é漢\U0001f600 \x00"


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 40)))


def _int64(rng: random.Random) -> int:
    return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**63), 2**63), rng.randrange(0, 10**6)])


def test_every_generated_record_round_trips() -> None:
    rng = random.Random(20241025)
    for _ in range(2000):
        partition = rng.choice([0, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)])
        records: list[Record] = [
            Heartbeat(_text(rng), _text(rng), _int64(rng)),
            Checkpoint(_text(rng), _text(rng), partition, _int64(rng), _int64(rng), _text(rng)),
            OffsetSync(_text(rng), partition, _int64(rng), _int64(rng)),
        ]
        for record in records:
            assert type(record).from_record(record.record_key(), record.record_value()) == record


# --- console formatter strings ----------------------------------------------------------------------------


def test_heartbeat_formats_like_mm2_heartbeat_formatter() -> None:
    hb = Heartbeat("A", "B", 1700000000000)
    assert format_heartbeat(hb) == "Heartbeat{sourceClusterAlias=A, targetClusterAlias=B, timestamp=1700000000000}"
    assert str(hb) == format_heartbeat(hb)


def test_checkpoint_formats_topic_partition_as_topic_dash_partition() -> None:
    cp = Checkpoint("g1", "A.orders", 3, 100, 90, "m")
    assert format_checkpoint(cp) == (
        "Checkpoint{consumerGroupId=g1, topicPartition=A.orders-3, upstreamOffset=100, downstreamOffset=90, metadata=m}"
    )
    assert str(cp) == format_checkpoint(cp)


def test_offset_sync_formats_like_mm2_offset_sync_formatter() -> None:
    sync = OffsetSync("orders", 0, 100, 90)
    assert format_offset_sync(sync) == "OffsetSync{topicPartition=orders-0, upstreamOffset=100, downstreamOffset=90}"
    assert str(sync) == format_offset_sync(sync)


# --- Connect offsets (progress records) -------------------------------------------------------------------


def test_source_offset_key_matches_mm2_bytes() -> None:
    assert source_offset_key("A", "orders", 0) == (
        b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]'
    )


def test_checkpoint_offset_key_matches_mm2_bytes() -> None:
    assert checkpoint_offset_key("g1", "A.orders", 0) == (
        b'["MirrorCheckpointConnector",{"partition":0,"topic":"A.orders","group":"g1"}]'
    )


def test_heartbeat_offset_key_matches_mm2_bytes() -> None:
    assert heartbeat_offset_key("A", "B") == (
        b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    )


def test_connector_name_is_the_first_element() -> None:
    assert source_offset_key("A", "t", 1, connector_name="mm2-a-b").startswith(b'["mm2-a-b",{')
    assert checkpoint_offset_key("g", "t", 1, connector_name="cp").startswith(b'["cp",{')
    assert heartbeat_offset_key("A", "B", connector_name="hb").startswith(b'["hb",{')


def test_connect_partitions_keep_mm2_key_order() -> None:
    assert list(Heartbeat("A", "B", 0).connect_partition().items()) == [
        ("sourceClusterAlias", "A"),
        ("targetClusterAlias", "B"),
    ]
    assert list(Checkpoint("g1", "A.orders", 2, 0, 0).connect_partition().items()) == [
        ("partition", 2),
        ("topic", "A.orders"),
        ("group", "g1"),
    ]


def test_source_offset_value_is_compact_json() -> None:
    assert source_offset_value(99) == b'{"offset":99}'
    assert source_offset_value(0) == b'{"offset":0}'
    assert source_offset_value(-1) == b'{"offset":-1}'


def test_source_offset_value_rejects_out_of_range() -> None:
    with pytest.raises(RecordFormatError, match=r"INT64"):
        source_offset_value(2**63)


def test_json_strings_are_escaped_like_jackson() -> None:
    # Jackson: short escapes for \b\t\n\f\r, other controls as upper-case \u00XX, BMP non-ASCII as raw
    # UTF-8, characters outside the BMP as an escaped UTF-16 surrogate pair.
    key = checkpoint_offset_key('q"\\\b\t\n\f\r\x01\x1f\x7fé漢\U0001f600', "t", 0)
    group = key.split(b'"group":', 1)[1][:-2]
    expected = '"q\\"\\\\\\b\\t\\n\\f\\r\\u0001\\u001F\x7fé漢\\uD83D\\uDE00"'.encode()
    assert group == expected
    assert json.loads(key)[1]["group"] == 'q"\\\b\t\n\f\r\x01\x1f\x7fé漢\U0001f600'


def test_parse_source_offset_key_reads_mm2_bytes() -> None:
    key = b'["MirrorSourceConnector",{"cluster":"A","partition":7,"topic":"orders"}]'
    assert parse_source_offset_key(key) == ("MirrorSourceConnector", "A", "orders", 7)


def test_parse_source_offset_key_round_trips_awkward_names() -> None:
    key = source_offset_key("dc\U0001f600", "t\n", 2**31 - 1, connector_name="my mirror")
    assert parse_source_offset_key(key) == ("my mirror", "dc\U0001f600", "t\n", 2**31 - 1)


@pytest.mark.parametrize(
    "key",
    [
        checkpoint_offset_key("g1", "A.orders", 0),
        heartbeat_offset_key("A", "B"),
        b'["other-connector",{"file":"/tmp/x"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":0}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t","extra":1}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":"0","topic":"t"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":-1,"topic":"t"}]',
        b'["MirrorSourceConnector",{"cluster":"A","partition":true,"topic":"t"}]',
        b'["MirrorSourceConnector",{"cluster":1,"partition":0,"topic":"t"}]',
        b'[1,{"cluster":"A","partition":0,"topic":"t"}]',
        b'{"cluster":"A","partition":0,"topic":"t"}',
        b'["MirrorSourceConnector"]',
        b"null",
        b"not json",
        b"\xff\xfe",
        b"",
    ],
)
def test_parse_source_offset_key_answers_none_for_anything_else(key: bytes) -> None:
    assert parse_source_offset_key(key) is None


def test_parse_source_offset_value() -> None:
    assert parse_source_offset_value(b'{"offset":99}') == 99
    assert parse_source_offset_value(source_offset_value(2**63 - 1)) == 2**63 - 1
    assert parse_source_offset_value(b'{"offset":-1}') == -1


@pytest.mark.parametrize("value", [None, b"{}", b'{"offset":null}'])
def test_parse_source_offset_value_without_an_offset_is_none(value: bytes | None) -> None:
    assert parse_source_offset_value(value) is None


@pytest.mark.parametrize("value", [b"", b"garbage", b"[1]", b'{"offset":"1"}', b'{"offset":1.5}', b'{"offset":true}'])
def test_parse_source_offset_value_rejects_malformed_values(value: bytes) -> None:
    with pytest.raises(RecordFormatError, match=r"^source offset value"):
        parse_source_offset_value(value)


@pytest.mark.parametrize("value", [b"garbage", b"\xff{}"])
def test_a_source_offset_value_that_is_not_json_says_so(value: bytes) -> None:
    with pytest.raises(RecordFormatError, match=r"^source offset value .* is not JSON"):
        parse_source_offset_value(value)

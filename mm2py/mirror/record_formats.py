"""MM2's internal record formats, byte for byte: Heartbeat, Checkpoint, OffsetSync and the Connect offsets.

mm2py shares its internal topics with real MM2 (``heartbeats``, ``A.checkpoints.internal``,
``mm2-offset-syncs.B.internal``, ``mm2-offsets.A.internal``), so a record written here must be readable by
``RemoteClusterUtils`` and a record written by MM2 must be readable here. The three record types use the
Kafka protocol's non-flexible ``Struct`` encoding: fields back to back, big-endian two's-complement integers,
``STRING`` = INT16 byte length + UTF-8. Heartbeat and Checkpoint values start with an INT16 version (0);
OffsetSync has none. The Connect offsets are compact JSON whose key *bytes* are compared by Connect, so the
map key order (Java ``HashMap`` iteration order) and Jackson's escaping are reproduced exactly. Pure: no Kafka
client, no pyspark, so the CLI and the unit tests load it instantly.
"""

from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass
from typing import Any

from mm2py.errors import Mm2pyError

VERSION = 0
"""The only value layout MM2 knows; written in front of Heartbeat and Checkpoint values."""

_MAX_STRING_BYTES = 32767  # Short.MAX_VALUE: the INT16 length prefix cannot express more
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_RANGES = {_INT16: (-(2**15), 2**15 - 1), _INT32: (-(2**31), 2**31 - 1), _INT64: (-(2**63), 2**63 - 1)}
_TYPE_NAMES = {_INT16: "INT16", _INT32: "INT32", _INT64: "INT64"}


class RecordFormatError(Mm2pyError, ValueError):
    """Bytes that are not a valid MM2 record, or field values that cannot be encoded as one.

    A ValueError, because the problem is always the data; an Mm2pyError, so the CLI reports it cleanly. The
    message names the record type, the part (key/value) and the field, since a reader usually skips the
    record and logs it (as MM2's ``CheckpointStore`` and ``MirrorClient`` do).
    """


# --------------------------------------------------------------------------------------------------------
# Kafka protocol primitives
# --------------------------------------------------------------------------------------------------------


def _int(record: str, name: str, value: int, fmt: struct.Struct) -> bytes:
    lo, hi = _RANGES[fmt]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordFormatError(f"{record} {name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise RecordFormatError(f"{record} {name}={value} is out of {_TYPE_NAMES[fmt]} range [{lo}, {hi}]")
    return fmt.pack(value)


def _string(record: str, name: str, value: str) -> bytes:
    if value is None:
        raise RecordFormatError(f"{record} {name} is None; MM2's STRING type is not nullable")
    if not isinstance(value, str):
        raise RecordFormatError(f"{record} {name} must be a str, got {value!r}")
    # "replace" turns a lone surrogate into b"?", as Java's String.getBytes(UTF_8) does.
    data = value.encode("utf-8", errors="replace")
    if len(data) > _MAX_STRING_BYTES:
        raise RecordFormatError(
            f"{record} {name} is {len(data)} bytes in UTF-8; the maximum string length is {_MAX_STRING_BYTES}"
        )
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads one key or value front to back; trailing bytes after the last field are ignored, as in Java."""

    def __init__(self, record: str, part: str, data: bytes | None) -> None:
        self._where = f"{record} {part}"
        if data is None:
            raise RecordFormatError(f"{self._where} is null")
        if len(data) == 0:
            raise RecordFormatError(f"{self._where} is empty (0 bytes)")
        self._data = memoryview(data)
        self._pos = 0

    def _take(self, name: str, size: int) -> memoryview:
        available = len(self._data) - self._pos
        if size > available:
            raise RecordFormatError(
                f"{self._where} is truncated: field {name} needs {size} bytes at offset {self._pos}, "
                f"only {available} available"
            )
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self, name: str) -> int:
        return int(_INT16.unpack(self._take(name, 2))[0])

    def int32(self, name: str) -> int:
        return int(_INT32.unpack(self._take(name, 4))[0])

    def int64(self, name: str) -> int:
        return int(_INT64.unpack(self._take(name, 8))[0])

    def string(self, name: str) -> str:
        length = self.int16(name)
        if length < 0:
            raise RecordFormatError(f"{self._where}: field {name} has negative string length {length}")
        # "replace" mirrors Java's new String(bytes, UTF_8), which never fails on malformed input.
        return bytes(self._take(name, length)).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heartbeat:
    """Emitted by the heartbeat connector into ``heartbeats`` on the target; its replicas (``A.heartbeats``)
    are how MirrorClient discovers upstream clusters. Compacted by (source, target)."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def record_key(self) -> bytes:
        return _string("Heartbeat", "sourceClusterAlias", self.source_cluster_alias) + _string(
            "Heartbeat", "targetClusterAlias", self.target_cluster_alias
        )

    def record_value(self) -> bytes:
        return _int("Heartbeat", "version", VERSION, _INT16) + _int("Heartbeat", "timestamp", self.timestamp, _INT64)

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        v = _Reader("Heartbeat", "value", value)
        v.int16("version")  # read, not enforced: MM2 decodes every version with the v0 layout
        timestamp = v.int64("timestamp")
        k = _Reader("Heartbeat", "key", key)
        return cls(k.string("sourceClusterAlias"), k.string("targetClusterAlias"), timestamp)

    def connect_partition(self) -> dict[str, str]:
        """The heartbeat connector's Connect source partition, in MM2's (HashMap) key order."""
        return _heartbeat_partition(self.source_cluster_alias, self.target_cluster_alias)

    def __str__(self) -> str:
        return format_heartbeat(self)


@dataclass(frozen=True)
class Checkpoint:
    """A consumer group's position translated to the target, in ``<source>.checkpoints.internal``.

    ``topic`` is the **downstream** (renamed) topic. ``metadata`` is the upstream commit metadata; it may be
    empty but not None (MM2 cannot encode a null STRING; Kafka consumers normalise missing metadata to "").
    """

    consumer_group_id: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def record_key(self) -> bytes:
        return (
            _string("Checkpoint", "group", self.consumer_group_id)
            + _string("Checkpoint", "topic", self.topic)
            + _int("Checkpoint", "partition", self.partition, _INT32)
        )

    def record_value(self) -> bytes:
        return (
            _int("Checkpoint", "version", VERSION, _INT16)
            + _int("Checkpoint", "upstreamOffset", self.upstream_offset, _INT64)
            + _int("Checkpoint", "offset", self.downstream_offset, _INT64)
            + _string("Checkpoint", "metadata", self.metadata)
        )

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        v = _Reader("Checkpoint", "value", value)
        v.int16("version")  # read, not enforced (see Heartbeat.from_record)
        upstream_offset = v.int64("upstreamOffset")
        downstream_offset = v.int64("offset")
        metadata = v.string("metadata")
        k = _Reader("Checkpoint", "key", key)
        group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
        return cls(group, topic, partition, upstream_offset, downstream_offset, metadata)

    def connect_partition(self) -> dict[str, str | int]:
        """The checkpoint connector's Connect source partition, in MM2's (HashMap) key order."""
        return _checkpoint_partition(self.consumer_group_id, self.topic, self.partition)

    def __str__(self) -> str:
        return format_checkpoint(self)


@dataclass(frozen=True)
class OffsetSync:
    """One (upstream offset, downstream offset) pair for an **upstream** topic-partition, in the
    offset-syncs topic; the raw material of offset translation. No version header, unlike the others."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _string("OffsetSync", "topic", self.topic) + _int("OffsetSync", "partition", self.partition, _INT32)

    def record_value(self) -> bytes:
        return _int("OffsetSync", "upstreamOffset", self.upstream_offset, _INT64) + _int(
            "OffsetSync", "offset", self.downstream_offset, _INT64
        )

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        v = _Reader("OffsetSync", "value", value)
        upstream_offset, downstream_offset = v.int64("upstreamOffset"), v.int64("offset")
        k = _Reader("OffsetSync", "key", key)
        topic, partition = k.string("topic"), k.int32("partition")
        return cls(topic, partition, upstream_offset, downstream_offset)

    def __str__(self) -> str:
        return format_offset_sync(self)


# --------------------------------------------------------------------------------------------------------
# Console formatter strings (kafka-console-consumer --formatter ...mirror.formatters.XFormatter)
# --------------------------------------------------------------------------------------------------------


def format_heartbeat(hb: Heartbeat) -> str:
    return (
        f"Heartbeat{{sourceClusterAlias={hb.source_cluster_alias}, "
        f"targetClusterAlias={hb.target_cluster_alias}, timestamp={hb.timestamp}}}"
    )


def format_checkpoint(cp: Checkpoint) -> str:
    return (
        f"Checkpoint{{consumerGroupId={cp.consumer_group_id}, topicPartition={cp.topic}-{cp.partition}, "
        f"upstreamOffset={cp.upstream_offset}, downstreamOffset={cp.downstream_offset}, "
        f"metadata={cp.metadata}}}"
    )


def format_offset_sync(os: OffsetSync) -> str:
    return (
        f"OffsetSync{{topicPartition={os.topic}-{os.partition}, "
        f"upstreamOffset={os.upstream_offset}, downstreamOffset={os.downstream_offset}}}"
    )


# --------------------------------------------------------------------------------------------------------
# Connect offsets in mm2-offsets.<source>.internal
# --------------------------------------------------------------------------------------------------------

# Jackson 2.x (UTF8JsonGenerator, default ObjectMapper as used by Connect's JsonSerializer) escapes `"`, `\`
# and the C0 controls (short forms \b \t \n \f \r, else \u00XX with UPPER-case hex), writes other BMP
# characters as raw UTF-8, and writes every UTF-16 surrogate unit as its own \uXXXX escape - so a
# character outside the BMP becomes an escaped surrogate pair, not 4 UTF-8 bytes. Python's json module
# differs (lower-case hex; ensure_ascii=True escapes all non-ASCII, False writes 4-byte UTF-8), hence
# this small writer instead of json.dumps.
_JSON_ESCAPES: dict[int, str] = {c: f"\\u{c:04X}" for c in range(0x20)}
_JSON_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _json_string(value: str) -> str:
    out: list[str] = []
    for ch in value.translate(_JSON_ESCAPES):
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json(value: object) -> str:
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool) or not isinstance(value, (int, list, dict)):
        raise RecordFormatError(f"Connect offsets hold only strings and integers here, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return "{" + ",".join(f"{_json_string(k)}:{_json(v)}" for k, v in value.items()) + "}"


def _connect_key(connector_name: str, partition: dict[str, Any]) -> bytes:
    """Connect's offset key: JSON array [connector name, source partition], compact, schemas disabled."""
    return _json([connector_name, partition]).encode("utf-8")


def _source_partition(source_cluster_alias: str, topic: str, partition: int) -> dict[str, str | int]:
    _int("source offset key", "partition", partition, _INT32)
    return {"cluster": source_cluster_alias, "partition": partition, "topic": topic}


def _checkpoint_partition(group: str, topic: str, partition: int) -> dict[str, str | int]:
    _int("checkpoint offset key", "partition", partition, _INT32)
    return {"partition": partition, "topic": topic, "group": group}


def _heartbeat_partition(source_cluster_alias: str, target_cluster_alias: str) -> dict[str, str]:
    return {"sourceClusterAlias": source_cluster_alias, "targetClusterAlias": target_cluster_alias}


@functools.lru_cache(maxsize=1 << 16)
def source_offset_key(
    source_cluster_alias: str, topic: str, partition: int, connector_name: str = "MirrorSourceConnector"
) -> bytes:
    """Key under which MirrorSourceTask's position for one upstream partition is stored.

    ``connector_name``: the class simple name in dedicated mode, the user's name on a Connect cluster. Cached: a
    task records the same partitions' progress every second."""
    return _connect_key(connector_name, _source_partition(source_cluster_alias, topic, partition))


def source_offset_value(offset: int) -> bytes:
    """``{"offset":N}``: N is the offset of the last *replicated* record; MM2 resumes at N + 1."""
    _int("source offset value", "offset", offset, _INT64)
    return b'{"offset":%d}' % offset  # what _json({"offset": offset}) writes, without walking the dict


def checkpoint_offset_key(
    group: str, topic: str, partition: int, connector_name: str = "MirrorCheckpointConnector"
) -> bytes:
    """Key the checkpoint connector stores (value always ``{"offset":0}``); ``topic`` is downstream."""
    return _connect_key(connector_name, _checkpoint_partition(group, topic, partition))


def heartbeat_offset_key(
    source_cluster_alias: str, target_cluster_alias: str, connector_name: str = "MirrorHeartbeatConnector"
) -> bytes:
    """Key the heartbeat connector stores (value always ``{"offset":0}``)."""
    return _connect_key(connector_name, _heartbeat_partition(source_cluster_alias, target_cluster_alias))


def parse_source_offset_key(key: bytes) -> tuple[str, str, str, int] | None:
    """``(connector, cluster, topic, partition)`` for a source-connector key, else None.

    The offsets topic also holds the checkpoint and heartbeat connectors' keys and possibly other
    connectors' keys, so anything that is not shaped like MirrorSourceTask's partition - including
    non-JSON bytes - is answered with None rather than an error. Key order is not checked here (Connect
    would not find a reordered key, but it is still recognisably a source key).
    """
    try:
        parsed = json.loads(bytes(key).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, TypeError):
        return None
    if not (isinstance(parsed, list) and len(parsed) == 2):
        return None
    connector, partition_map = parsed
    if not isinstance(connector, str) or not isinstance(partition_map, dict):
        return None
    if set(partition_map) != {"cluster", "topic", "partition"}:
        return None
    cluster, topic, partition = partition_map["cluster"], partition_map["topic"], partition_map["partition"]
    if not (isinstance(cluster, str) and isinstance(topic, str)):
        return None
    # MM2's own validation (MirrorUtils.validateSourcePartitionPartition): a non-negative 32-bit integer.
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= 2**31 - 1:
        return None
    return connector, cluster, topic, partition


def parse_source_offset_value(value: bytes | None) -> int | None:
    """The stored offset, or None when there is none.

    None for a tombstone and - like MM2's ``MirrorUtils.unwrapOffset``, which answers -1 for both - for an
    object without an ``"offset"`` or with ``"offset":null``. Anything else that is not ``{"offset":<int>}``
    raises RecordFormatError. Negative values are returned as stored; MM2 treats them as "no position".
    """
    if value is None:
        return None
    parsed = parse_json_value(value, "source offset value")
    if not isinstance(parsed, dict):
        raise RecordFormatError(f"source offset value {bytes(value)!r} is not a JSON object")
    offset = parsed.get("offset")
    if offset is None:
        return None
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise RecordFormatError(f"source offset value {bytes(value)!r}: offset must be an integer")
    return offset


def parse_json_value(value: bytes, what: str) -> Any:
    """A record value in JSON (Connect's offsets, mm2py's loss records), or a RecordFormatError naming ``what``
    and the bytes, so a foreign record on an internal topic is reported rather than misread."""
    try:
        return json.loads(bytes(value).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordFormatError(f"{what} {bytes(value)!r} is not JSON: {exc}") from None

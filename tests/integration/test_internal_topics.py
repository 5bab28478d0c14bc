"""What `run --once` leaves in MM2's internal topics: progress, offset syncs and heartbeats, in MM2's bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.harness.kafka_harness import ClusterFactory, create_topic, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def test_progress_offset_syncs_and_heartbeats_use_mm2s_formats(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 2)
    records = make_records(450, partitions=2, seed=7)
    produce(brokers["dc1"].bootstrap, "orders", records)
    config = write_config(tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = orders\n")
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr

    # Progress: Connect's JSON, byte for byte, last replicated offset per source partition.
    progress = read_all(brokers["target"].bootstrap, "mm2-offsets.dc1.internal")
    latest = {r.key: r.value for r in progress}
    for p in range(2):
        key = f'["MirrorSourceConnector",{{"cluster":"dc1","partition":{p},"topic":"orders"}}]'.encode()
        assert latest[key] == b'{"offset":224}'

    # Offset syncs live on the source (offset-syncs.topic.location = source), named after the target.
    syncs = read_all(brokers["dc1"].bootstrap, "mm2-offset-syncs.target.internal")
    assert syncs and all(r.partition == 0 for r in syncs)
    source = {(r.partition, r.offset): r.value for r in read_all(brokers["dc1"].bootstrap, "orders")}
    target = {(r.partition, r.offset): r.value for r in read_all(brokers["target"].bootstrap, "dc1.orders")}
    decoded = []
    for r in syncs:  # decoded here by hand, independently of mm2py.mirror.record_formats
        assert r.key is not None and r.value is not None
        topic, pos = _string(r.key, 0)
        (partition,) = struct.unpack_from(">i", r.key, pos)
        upstream, downstream = struct.unpack(">qq", r.value[:16])
        decoded.append((topic, partition, upstream, downstream))
        assert source[(partition, upstream)] == target[(partition, downstream)]
    assert {(t, p, u) for t, p, u, _ in decoded} >= {("orders", 0, 0), ("orders", 0, 224), ("orders", 1, 224)}

    # Heartbeats: Heartbeat(dc1, target) on the target's heartbeats topic, partition 0.
    beats = read_all(brokers["target"].bootstrap, "heartbeats")
    assert beats
    key, value = beats[-1].key, beats[-1].value
    assert key is not None and value is not None
    src, pos = _string(key, 0)
    tgt, _ = _string(key, pos)
    version, timestamp = struct.unpack(">hq", value)
    assert (src, tgt, version) == ("dc1", "target", 0)
    assert timestamp == beats[-1].timestamp
    assert json.loads(b'{"offset":224}') == {"offset": 224}

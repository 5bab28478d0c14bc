"""Offset translation onto a merged target topic: exact for lagging groups, checkpoints agree, --execute."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from mm2py.mirror.record_formats import Checkpoint
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    commit_group,
    consumer_config,
    create_topic,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def assert_exact(source: list[Record], target: list[Record], partition: int, g: int, d: int) -> None:
    """From target offset d on, this source's records are exactly its records from upstream offset g on."""
    ours = {r.value: r.offset for r in source if r.partition == partition}
    expected = [r.value for r in source if r.partition == partition and r.offset >= g]
    resumed = [r.value for r in target if r.partition == partition and r.offset >= d and r.value in ours]
    assert resumed == expected, f"partition {partition}: from {d} got {len(resumed)}, expected {len(expected)}"


@pytest.fixture
def merged(kafka_cluster: ClusterFactory, tmp_path: Path) -> tuple[dict[str, TansuBroker], Path]:
    brokers = kafka_cluster("dc1", "dc2", "target")
    for seed, dc in enumerate(("dc1", "dc2")):
        create_topic(brokers[dc].bootstrap, "orders", 2)
        produce(brokers[dc].bootstrap, "orders", make_records(600, partitions=2, seed=seed + 1, with_headers=False))
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
            f"replication.policy.class = {IDENTITY}\n"
            # small batches so both flows' writes interleave in the merged partitions
            "mm2py.range.max.records = 40\n"
        ),
    )
    return brokers, config


def test_translation_is_exact_for_a_group_at_the_end_and_one_far_behind(
    merged: tuple[dict[str, TansuBroker], Path],
) -> None:
    brokers, config = merged
    # dc2's records land first, then both flows run together: dc1's records sit behind and between dc2's.
    assert mm2py("run", str(config), "--once", "--flows", "dc2->target").returncode == 0
    produce(brokers["dc2"].bootstrap, "orders", make_records(200, partitions=2, seed=9, with_headers=False))
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 300, 1: 17})  # 300 = end of partition 0
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr

    out = mm2py(
        "translate-offsets", str(config), "--group", "billing", "--source", "dc1", "--target", "target", "--json"
    )
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    assert [(r["topic"], r["partition"], r["upstream_offset"], r["method"]) for r in rows] == [
        ("orders", 0, 300, "exact"),
        ("orders", 1, 17, "exact"),
    ]
    source = read_all(brokers["dc1"].bootstrap, "orders")
    target = read_all(brokers["target"].bootstrap, "orders")
    foreign = {r.value for r in read_all(brokers["dc2"].bootstrap, "orders")}
    assert any(r.value in foreign for r in target if r.partition == 1 and r.offset < rows[1]["offset"]), (
        "the test needs dc2 records interleaved before the translated offset"
    )
    for row in rows:
        assert_exact(source, target, row["partition"], row["upstream_offset"], row["offset"])

    # The checkpoints run --once wrote agree with the command (decoded here by hand, independently of mm2py).
    latest = {}
    for r in read_all(brokers["target"].bootstrap, "dc1.checkpoints.internal"):
        assert r.key is not None and r.value is not None
        group, pos = _string(r.key, 0)
        topic, pos = _string(r.key, pos)
        (partition,) = struct.unpack_from(">i", r.key, pos)
        version, upstream, downstream = struct.unpack_from(">hqq", r.value, 0)
        metadata, _ = _string(r.value, 18)
        assert (version, metadata) == (0, "")
        latest[(group, topic, partition)] = (upstream, downstream)
        assert Checkpoint.from_record(r.key, r.value).downstream_offset == downstream
    for row in rows:
        assert latest[("billing", "orders", row["partition"])] == (row["upstream_offset"], row["offset"])

    csv = mm2py(
        "translate-offsets", str(config), "--group", "billing", "--source", "dc1", "--target", "target", "--csv"
    )
    assert csv.stdout.splitlines() == [f"orders,{r['partition']},{r['offset']}" for r in rows]


def test_execute_refuses_an_active_group_and_commits_to_an_idle_one(
    merged: tuple[dict[str, TansuBroker], Path],
) -> None:
    brokers, config = merged
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 120, 1: 17})
    assert mm2py("run", str(config), "--once").returncode == 0
    args = ("translate-offsets", str(config), "--group", "billing", "--source", "dc1", "--target", "target")

    member = Consumer(consumer_config(brokers["target"].bootstrap, **{"group.id": "billing"}))
    try:
        member.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not member.assignment():  # joined: the group is active on the target
            member.poll(0.2)
            assert time.monotonic() < deadline, "consumer never joined"
        refused = mm2py(*args, "--execute")
        assert refused.returncode == 1
        assert "billing is STABLE" in refused.stderr or "billing is" in refused.stderr
    finally:
        member.close()

    done = mm2py(*args, "--execute", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["partition"]: r for r in json.loads(done.stdout)}
    consumer = Consumer(consumer_config(brokers["target"].bootstrap, **{"group.id": "billing"}))
    try:
        committed = {
            tp.partition: tp.offset
            for tp in consumer.committed([TopicPartition("orders", p) for p in (0, 1)], timeout=10)
        }
        assert committed == {p: rows[p]["offset"] for p in (0, 1)}
        consumer.assign([TopicPartition("orders", 1, committed[1])])
        source = {r.value: r.offset for r in read_all(brokers["dc1"].bootstrap, "orders") if r.partition == 1}
        first_of_dc1 = None
        deadline = time.monotonic() + 20
        while first_of_dc1 is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value() in source:
                first_of_dc1 = source[msg.value()]
        assert first_of_dc1 == 17  # resumes at the right record of dc1
    finally:
        consumer.close()

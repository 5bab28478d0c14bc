"""`mm2py run --once` on Spark (local mode): three DCs into one target, merged or prefixed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    create_topic,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
FLOWS = "dc1->target.enabled = true\ndc2->target.enabled = true\ndc3->target.enabled = true\ntopics = orders\n"
PARTITIONS = {"dc1": 4, "dc2": 4, "dc3": 2}


def fields(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, tuple(r.headers), r.timestamp, r.partition)


def load_dcs(brokers: dict[str, TansuBroker], count: int, seed_offset: int = 0) -> dict[str, list[Record]]:
    """``count`` records per DC; each DC's timestamps lie in their own range, so every record is unique."""
    data = {}
    now = int(time.time() * 1000)
    for i, (dc, partitions) in enumerate(PARTITIONS.items()):
        records = make_records(
            count,
            partitions=partitions,
            seed=10 * (i + 1) + seed_offset,
            tombstone_every=17,
            null_key_every=13,
            base_timestamp=now - (i + 1) * 10_000_000 + seed_offset * 1000,
        )
        produce(brokers[dc].bootstrap, "orders", records)
        data[dc] = records
    return data


def assert_each_source_copied_exactly_once_in_order(brokers: dict[str, TansuBroker], remote: dict[str, str]) -> None:
    """Every source partition's records appear exactly once, in order, in the same partition downstream."""
    for dc, topic in remote.items():
        source = read_all(brokers[dc].bootstrap, "orders")
        target = read_all(brokers["target"].bootstrap, topic)
        ours = {fields(r) for r in source}
        mine = [r for r in target if fields(r) in ours]
        for p in range(PARTITIONS[dc]):
            expected = [fields(r) for r in source if r.partition == p]
            got = [fields(r) for r in mine if r.partition == p]
            assert got == expected, f"{dc} partition {p}: {len(got)} copied, {len(expected)} expected"


@pytest.fixture
def dcs(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    brokers = kafka_cluster("dc1", "dc2", "dc3", "target")
    for dc, partitions in PARTITIONS.items():
        create_topic(brokers[dc].bootstrap, "orders", partitions)
    return brokers


def test_identity_merges_three_dcs_exactly_once_and_a_second_once_copies_only_new(
    dcs: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = write_config(tmp_path / "mm2.properties", dcs, FLOWS + f"replication.policy.class = {IDENTITY}\n")
    first = load_dcs(dcs, 300)
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    target = read_all(dcs["target"].bootstrap, "orders")
    assert len(target) == sum(len(r) for r in first.values())
    assert_each_source_copied_exactly_once_in_order(dcs, {"dc1": "orders", "dc2": "orders", "dc3": "orders"})

    load_dcs(dcs, 40, seed_offset=100)  # more data in every DC
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    target = read_all(dcs["target"].bootstrap, "orders")
    assert len(target) == 3 * (300 + 40)
    assert_each_source_copied_exactly_once_in_order(dcs, {"dc1": "orders", "dc2": "orders", "dc3": "orders"})


def test_default_policy_prefixes_and_plan_agrees_with_what_run_did(dcs: dict[str, TansuBroker], tmp_path: Path) -> None:
    config = write_config(tmp_path / "mm2.properties", dcs, FLOWS)
    load_dcs(dcs, 100)
    before = json.loads(mm2py("plan", str(config), "--json").stdout)
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert_each_source_copied_exactly_once_in_order(dcs, {dc: f"{dc}.orders" for dc in PARTITIONS})
    after = json.loads(mm2py("plan", str(config), "--json").stdout)
    planned = {
        (f["source"], t["remote_topic"], t["partitions"], t["action"]) for f in before["flows"] for t in f["topics"]
    }
    assert planned == {(dc, f"{dc}.orders", n, "create") for dc, n in PARTITIONS.items()}
    done = {(f["source"], t["remote_topic"], t["partitions"], t["action"]) for f in after["flows"] for t in f["topics"]}
    # The run also wrote MM2's reverse-herder heartbeats (target->dcN) into each DC's `heartbeats` before it read
    # the end offsets, and replicated them as `dcN.heartbeats`, as MM2 does.
    assert done == (
        {(dc, f"{dc}.orders", n, "up to date") for dc, n in PARTITIONS.items()}
        | {(dc, f"{dc}.heartbeats", 1, "up to date") for dc in PARTITIONS}
    )

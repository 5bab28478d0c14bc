"""Group offset sync (`sync.group.offsets.enabled`) and provenance headers with IdentityReplicationPolicy."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.kafka_harness import (
    ClusterFactory,
    commit_group,
    committed_group,
    create_topic,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"


def test_merged_group_sync_commits_an_offset_that_loses_nothing_of_either_source(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    for seed, dc in enumerate(("dc1", "dc2")):
        create_topic(brokers[dc].bootstrap, "orders", 1)
        produce(brokers[dc].bootstrap, "orders", make_records(300, partitions=1, seed=seed + 1, with_headers=False))
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 250})
    commit_group(brokers["dc2"].bootstrap, "billing", "orders", {0: 40})
    settings = "topics = orders\n" + IDENTITY + "sync.group.offsets.enabled = true\nmm2py.range.max.records = 50\n"
    # dc2 is copied first, on its own, so every dc2 record sits before every dc1 record in the merged topic
    # whatever order the two flows' tasks would run in: dc2's translation is then the smaller one.
    dc2_only = write_config(tmp_path / "dc2.properties", brokers, "dc2->target.enabled = true\n" + settings)
    result = mm2py("run", str(dc2_only), "--once")
    assert result.returncode == 0, result.stderr
    both = "dc1->target.enabled = true\ndc2->target.enabled = true\n" + settings
    result = mm2py("run", str(write_config(tmp_path / "mm2.properties", brokers, both)), "--once")
    assert result.returncode == 0, result.stderr

    offset = committed_group(brokers["target"].bootstrap, "billing", "orders", 1)[0]
    target = read_all(brokers["target"].bootstrap, "orders")
    for dc, position in (("dc1", 250), ("dc2", 40)):
        source = read_all(brokers[dc].bootstrap, "orders")
        unread = {r.value for r in source if r.offset >= position}
        resumed = {r.value for r in target if r.offset >= offset}
        assert unread <= resumed, f"{dc}: records the group had not read are before the synced offset"
    # The cost of merging: the smaller translation (dc2's) wins, so every record dc1's group had read is read again.
    dc1_done = {r.value for r in read_all(brokers["dc1"].bootstrap, "orders") if r.offset < 250}
    rereads = sum(1 for r in target if r.offset >= offset and r.value in dc1_done)
    assert rereads == len(dc1_done)


def test_sync_never_rewinds_a_target_group_and_skips_active_ones(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 1)
    produce(brokers["dc1"].bootstrap, "orders", make_records(100, partitions=1, seed=3, with_headers=False))
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 30})
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        ("dc1->target.enabled = true\ntopics = orders\n" + IDENTITY + "sync.group.offsets.enabled = true\n"),
    )
    create_topic(brokers["target"].bootstrap, "orders", 1)
    commit_group(brokers["target"].bootstrap, "billing", "orders", {0: 80})  # already further on the target
    assert mm2py("run", str(config), "--once").returncode == 0
    assert committed_group(brokers["target"].bootstrap, "billing", "orders", 1) == {0: 80}


def test_identity_active_active_with_provenance_does_not_loop(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("east", "west")
    for broker in brokers.values():
        create_topic(broker.bootstrap, "orders", 2)
    produce(brokers["east"].bootstrap, "orders", make_records(50, partitions=2, seed=4))
    produce(brokers["west"].bootstrap, "orders", make_records(30, partitions=2, seed=5))
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "east->west.enabled = true\nwest->east.enabled = true\ntopics = orders\n"
            + IDENTITY
            + "mm2py.provenance.header.enabled = true\n"
        ),
    )
    for _ in range(3):  # each pass would copy the other side's copies back if cycles were not detected
        result = mm2py("run", str(config), "--once")
        assert result.returncode == 0, result.stderr
    for side in ("east", "west"):
        records = read_all(brokers[side].bootstrap, "orders")
        assert len(records) == 80, side
        stamped = [r for r in records if any(k == "mm2py.provenance" for k, _ in r.headers)]
        assert len(stamped) == (30 if side == "east" else 50)
        origin = dict(stamped[0].headers)["mm2py.provenance"]
        assert origin is not None and origin.startswith(b"west:orders:" if side == "east" else b"east:orders:")

"""Exact translation survives the log cleaner: every compacted topic rewritten as Kafka's cleaner leaves it.

tansu never compacts, so the test does what the cleaner would do to every compacted topic of every cluster (keep
the newest record per key, in order) and asks again. mm2py's dense offset syncs live in a delete-policy topic, so
a lagging group on a merged topic must still translate exactly. The same promise is tested on real Kafka's cleaner
in tests/realkafka.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from mm2py.mirror.record_formats import Checkpoint
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    commit_group,
    create_topic,
    delete_topic,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = 3
PER_PARTITION = 3_000
FIRST_RUN = 600  # records per partition


def compacted_topics(broker: TansuBroker) -> list[str]:
    """Topics created with cleanup.policy=compact (tansu echoes the configs it was given)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = sorted(list_topics(broker.bootstrap))
    futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in names])
    compacted = []
    for resource, future in futures.items():
        entry = future.result(timeout=30).get("cleanup.policy")
        if entry is not None and "compact" in (entry.value or ""):
            compacted.append(resource.name)
    return compacted


def compact_as_the_cleaner_would(broker: TansuBroker, topic: str) -> tuple[int, int]:
    """Rewrite ``topic`` to its newest record per key in each partition, in offset order; (before, after)."""
    records = read_all(broker.bootstrap, topic)
    partitions = list_topics(broker.bootstrap)[topic]
    newest: dict[tuple[int, bytes | None], Record] = {}
    for r in records:
        newest[(r.partition, r.key)] = r
    survivors = sorted(newest.values(), key=lambda r: (r.partition, r.offset))
    delete_topic(broker.bootstrap, topic)
    create_topic(broker.bootstrap, topic, partitions, {"cleanup.policy": "compact"})
    produce(broker.bootstrap, topic, survivors)
    return len(records), len(survivors)


def translate(config: Path) -> list[dict[str, Any]]:
    out = mm2py(
        "translate-offsets", str(config), "--group", "billing", "--source", "dc1", "--target", "target", "--json"
    )
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def assert_exact(source: list[Record], target: list[Record], partition: int, g: int, d: int) -> None:
    """From target offset d on, this source's records are exactly its records from upstream offset g on."""
    ours = {r.value for r in source if r.partition == partition}
    expected = [r.value for r in source if r.partition == partition and r.offset >= g]
    resumed = [r.value for r in target if r.partition == partition and r.offset >= d and r.value in ours]
    assert resumed == expected, f"partition {partition}: from {d} got {len(resumed)}, expected {len(expected)}"


def test_lagging_group_on_a_merged_topic_translates_exactly_after_compaction_and_checkpoints_agree(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    # A first run copies the first FIRST_RUN records of each partition of both sources, so dc2's are on the target
    # before the offsets the group has committed on dc1 (1234, 2999) whatever order the two flows run in; the
    # second run copies the rest, its rounds of the two flows interleaving as they may.
    later: dict[str, list[Record]] = {}
    for seed, dc in enumerate(("dc1", "dc2")):
        create_topic(brokers[dc].bootstrap, "orders", PARTITIONS)
        records = make_records(PARTITIONS * PER_PARTITION, partitions=PARTITIONS, seed=seed + 20, with_headers=False)
        produce(brokers[dc].bootstrap, "orders", records[: PARTITIONS * FIRST_RUN])  # record i: partition i % 3
        later[dc] = records[PARTITIONS * FIRST_RUN :]
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
            f"replication.policy.class = {IDENTITY}\n"
            "mm2py.range.max.records = 700\n"
        ),
    )  # several rounds per flow, so dc1 and dc2 interleave
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 1234, 1: 2999, 2: 17})
    assert mm2py("run", str(config), "--once").returncode == 0
    for dc, records in later.items():
        produce(brokers[dc].bootstrap, "orders", records)
    assert mm2py("run", str(config), "--once").returncode == 0
    before = translate(config)
    assert [r["method"] for r in before] == ["exact"] * PARTITIONS

    shrunk = {}
    for name, broker in brokers.items():
        for topic in compacted_topics(broker):
            shrunk[f"{name}:{topic}"] = compact_as_the_cleaner_would(broker, topic)
    syncs_before, syncs_after = shrunk["dc1:mm2-offset-syncs.target.internal"]
    # The cleaner left one MM2 sync per partition: orders' and the replicated heartbeats topic's one.
    assert syncs_after == PARTITIONS + 1 < syncs_before

    after = translate(config)
    assert [(r["partition"], r["upstream_offset"], r["method"]) for r in after] == [
        (0, 1234, "exact"),
        (1, 2999, "exact"),
        (2, 17, "exact"),
    ]
    assert [r["offset"] for r in after] == [r["offset"] for r in before]
    source = read_all(brokers["dc1"].bootstrap, "orders")
    target = read_all(brokers["target"].bootstrap, "orders")
    foreign = {r.value for r in read_all(brokers["dc2"].bootstrap, "orders")}
    assert any(r.value in foreign for r in target if r.partition == 0 and r.offset < after[0]["offset"]), (
        "the test needs dc2 records interleaved before the translated offset"
    )
    for row in after:
        assert_exact(source, target, row["partition"], row["upstream_offset"], row["offset"])

    # A later run (more data, the group moved on) checkpoints what translate-offsets says, on compacted history.
    for seed, dc in enumerate(("dc1", "dc2")):
        produce(
            brokers[dc].bootstrap,
            "orders",
            make_records(300, partitions=PARTITIONS, seed=seed + 40, with_headers=False),
        )
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 1500, 1: 3050, 2: 17})
    assert mm2py("run", str(config), "--once").returncode == 0
    rows = translate(config)
    assert [r["method"] for r in rows] == ["exact"] * PARTITIONS
    latest = {}
    for r in read_all(brokers["target"].bootstrap, "dc1.checkpoints.internal"):
        cp = Checkpoint.from_record(r.key, r.value)
        latest[(cp.consumer_group_id, cp.topic, cp.partition)] = (cp.upstream_offset, cp.downstream_offset)
    for row in rows:
        assert latest[("billing", "orders", row["partition"])] == (row["upstream_offset"], row["offset"])

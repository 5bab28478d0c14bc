"""Data centres whose `orders` topics have different partition counts, merged into one topic (Identity).

The remote topic must get the widest source's count whatever the order of `clusters` (which is the order the
flows start in), and every source partition p must land, complete and in order, in remote partition p.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    create_topic,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = {"dc1": 2, "dc2": 4, "dc3": 3}


def fields(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, tuple(r.headers), r.timestamp, r.partition)


@pytest.mark.parametrize("order", [["dc1", "dc2", "dc3"], ["dc3", "dc2", "dc1"]], ids=["narrow-first", "wide-last"])
def test_sources_of_2_4_and_3_partitions_merge_into_4_partitions_exactly_once_in_order(
    kafka_cluster: ClusterFactory, tmp_path: Path, order: list[str]
) -> None:
    brokers = kafka_cluster(*order, "target")
    now = int(time.time() * 1000)
    sources: dict[str, list[Record]] = {}
    for i, (dc, partitions) in enumerate(PARTITIONS.items()):
        create_topic(brokers[dc].bootstrap, "orders", partitions)
        records = make_records(
            150 * partitions, partitions=partitions, seed=7 * (i + 1), base_timestamp=now - (i + 1) * 1_000_000
        )
        produce(brokers[dc].bootstrap, "orders", records)
        sources[dc] = records
    flows = "".join(f"{dc}->target.enabled = true\n" for dc in order)
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        flows + f"topics = orders\nreplication.policy.class = {IDENTITY}\n",
        clusters=[*order, "target"],
    )

    plan = json.loads(mm2py("plan", str(config), "--json").stdout)
    assert {t["target_partitions"] for f in plan["flows"] for t in f["topics"]} == {4}

    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert list_topics(brokers["target"].bootstrap)["orders"] == 4

    target = read_all(brokers["target"].bootstrap, "orders")
    assert len(target) == sum(len(r) for r in sources.values())
    for dc, records in sources.items():
        ours = {fields(r) for r in records}
        for p in range(4):
            expected = [fields(r) for r in records if r.partition == p]
            got = [fields(r) for r in target if r.partition == p and fields(r) in ours]
            assert got == expected, f"{dc} partition {p}: {len(got)} arrived, {len(expected)} expected"

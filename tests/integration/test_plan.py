"""`mm2py plan --json` against three tansu "data centres" and a target: names, partitions, actions."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.kafka_harness import ClusterFactory, TansuBroker, create_topic, free_port
from tests.harness.mm2py_cli import mm2py

pytestmark = pytest.mark.integration


def write_config(path: Path, brokers: dict[str, TansuBroker], body: str) -> Path:
    lines = [f"clusters = {', '.join(brokers)}"]
    lines += [f"{alias}.bootstrap.servers = {b.bootstrap}" for alias, b in brokers.items()]
    path.write_text("\n".join(lines) + "\n" + body)
    return path


def plan_json(config: Path) -> dict[str, Any]:
    result = mm2py("plan", str(config), "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def topics_by_flow(plan: dict[str, Any]) -> dict[str, list[tuple[str, str, int, str]]]:
    return {
        f"{f['source']}->{f['target']}": [
            (t["topic"], t["remote_topic"], t["partitions"], t["action"]) for t in f["topics"]
        ]
        for f in plan["flows"]
    }


FLOWS = "dc1->target.enabled = true\ndc2->target.enabled = true\ndc3->target.enabled = true\n"


@pytest.fixture
def four_clusters(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    brokers = kafka_cluster("dc1", "dc2", "dc3", "target")
    for alias, partitions in (("dc1", 6), ("dc2", 6), ("dc3", 3)):
        create_topic(brokers[alias].bootstrap, "orders", partitions)
        create_topic(brokers[alias].bootstrap, "orders.scratch", 2)
        create_topic(brokers[alias].bootstrap, "payments", 2)
    return brokers


def test_identity_policy_merges_orders_into_one_remote_topic(
    four_clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "mm2.properties",
        four_clusters,
        FLOWS
        + (
            "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
            "topics = orders.*\n"
            "topics.exclude = .*\\\\.scratch\n"
            "dc3->target.topics = orders, payments\n"
        ),
    )
    create_topic(four_clusters["target"].bootstrap, "payments", 1)  # exists with fewer partitions -> grow
    plan = plan_json(config)
    assert topics_by_flow(plan) == {
        "dc1->target": [("orders", "orders", 6, "create")],
        "dc2->target": [("orders", "orders", 6, "create")],
        "dc3->target": [("orders", "orders", 3, "create"), ("payments", "payments", 2, "grow")],
    }
    merge = plan["merges"][0]
    assert merge == {
        "target": "target",
        "remote_topic": "orders",
        "sources": {"dc1": 6, "dc2": 6, "dc3": 3},
        "partition_conflict": True,
    }
    dc3_orders = plan["flows"][2]["topics"][0]
    assert dc3_orders["target_partitions"] == 6 and dc3_orders["merged_from"] == ["dc1", "dc2", "dc3"]


def test_default_policy_keeps_sources_apart(four_clusters: dict[str, TansuBroker], tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mm2.properties", four_clusters, FLOWS + ("topics = orders.*\ntopics.exclude = .*\\\\.scratch\n")
    )
    create_topic(four_clusters["target"].bootstrap, "dc2.orders", 6)  # already replicated
    plan = plan_json(config)
    assert topics_by_flow(plan) == {
        "dc1->target": [("orders", "dc1.orders", 6, "create")],
        "dc2->target": [("orders", "dc2.orders", 6, "up to date")],
        "dc3->target": [("orders", "dc3.orders", 3, "create")],
    }
    assert plan["merges"] == []


def test_default_policy_never_replicates_a_topic_back_to_where_it_came_from(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("east", "west")
    create_topic(brokers["east"].bootstrap, "orders", 2)
    create_topic(brokers["east"].bootstrap, "west.orders", 2)  # came from west: a cycle
    config = write_config(tmp_path / "mm2.properties", brokers, "east->west.enabled = true\n")
    assert topics_by_flow(plan_json(config)) == {"east->west": [("orders", "east.orders", 2, "create")]}


def test_unreachable_cluster_is_named_within_30_seconds_with_exit_3(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1")
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = dc1, target\ndc1.bootstrap.servers = {brokers['dc1'].bootstrap}\n"
        f"target.bootstrap.servers = 127.0.0.1:{free_port()}\ndc1->target.enabled = true\n"
    )
    started = time.monotonic()
    result = mm2py("plan", str(config), timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 3, result.stderr
    assert "target" in result.stderr and "listing topics" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert elapsed < 30

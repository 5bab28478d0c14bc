"""Merged remote topics (N->1, IdentityReplicationPolicy) get the partitions of their widest source.

A fake admin stands in for the clusters, so the planning and topic-creation rules are checked without a broker,
in every order of ``clusters`` and of flow start-up.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest
from confluent_kafka.admin import NewTopic

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.admin_pool import AdminPool
from mm2py.control.plan import build_plan
from mm2py.control.topics import ensure_remote_topics
from mm2py.librdkafka.admin import ClusterAdmin, TopicConfigValue, TopicInfo

SOURCES = {"dc1": 2, "dc2": 4, "dc3": 3}


class FakeAdmin:
    """The admin calls planning and topic creation make, over an in-memory cluster."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.created: list[tuple[str, int]] = []
        self.grown: dict[str, int] = {}

    def list_topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(name, n) for name, n in self.topics.items()}

    def describe_topic_configs(self, topics: list[str]) -> dict[str, dict[str, TopicConfigValue]]:
        return {t: {} for t in topics}

    def create_topics(self, new: list[NewTopic]) -> dict[str, str | None]:
        for topic in new:
            self.topics.setdefault(topic.topic, topic.num_partitions)  # "already exists" leaves it as it is
            self.created.append((topic.topic, topic.num_partitions))
        return {t.topic: None for t in new}

    def create_partitions(self, counts: Mapping[str, int]) -> dict[str, str | None]:
        for name, n in counts.items():
            assert n > self.topics[name], "a topic is never shrunk"
            self.topics[name] = n
            self.grown[name] = n
        return {name: None for name in counts}


def config(order: list[str]) -> MirrorMakerConfig:
    lines = [
        f"clusters = {', '.join([*order, 'target'])}",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "topics = orders",
        "target.bootstrap.servers = t:1",
    ]
    for alias in order:
        lines += [f"{alias}.bootstrap.servers = {alias}:1", f"{alias}->target.enabled = true"]
    return MirrorMakerConfig(parse_properties("\n".join(lines) + "\n", "merge.properties"), {})


def flows(order: list[str]) -> list[FlowConfig]:
    mm = config(order)
    return [build_flow_config(mm, Flow(alias, "target")) for alias in order]


def pool_for(clusters: dict[str, FakeAdmin]) -> AdminPool:
    def factory(alias: str, _flow: FlowConfig, _side: str) -> ClusterAdmin:
        return clusters[alias]  # type: ignore[return-value]

    return AdminPool(factory)


@pytest.mark.parametrize("order", [list(p) for p in itertools.permutations(SOURCES)])
def test_merged_topic_is_created_with_the_widest_source_whichever_flow_starts_first(order: list[str]) -> None:
    clusters = {alias: FakeAdmin({"orders": n}) for alias, n in SOURCES.items()}
    clusters["target"] = FakeAdmin({})
    selected = flows(order)
    pool = pool_for(clusters)
    plan = build_plan(selected, pool)
    assert {t.target_partitions for f in plan.flows for t in f.topics} == {4}
    # Flows start up in the order of `clusters`; the first one creates the topic for all of them.
    for flow, flow_plan in zip(selected, plan.flows, strict=True):
        ensure_remote_topics(flow, flow_plan, clusters[flow.source], clusters["target"])
    assert clusters["target"].topics == {"orders": 4}
    assert clusters["target"].created[0] == ("orders", 4)
    assert plan.merges[0].source_partitions == SOURCES


def test_a_flow_planned_alone_grows_a_remote_topic_another_source_created_narrower() -> None:
    """Two hosts each running one flow (`--flows`): dc1 (2 partitions) created `orders`, then dc2 (4) starts."""
    clusters = {alias: FakeAdmin({"orders": n}) for alias, n in SOURCES.items()}
    clusters["target"] = FakeAdmin({"orders": 2})
    dc2 = flows(["dc1", "dc2", "dc3"])[1]
    plan = build_plan([dc2], pool_for(clusters))
    (topic,) = plan.flows[0].topics
    assert (topic.action, topic.target_partitions) == ("grow", 4)
    ensure_remote_topics(dc2, plan.flows[0], clusters["dc2"], clusters["target"])
    assert clusters["target"].grown == {"orders": 4}


def test_a_narrower_source_never_shrinks_or_regrows_a_wider_remote_topic() -> None:
    clusters = {alias: FakeAdmin({"orders": n}) for alias, n in SOURCES.items()}
    clusters["target"] = FakeAdmin({"orders": 4})
    dc1 = flows(["dc1", "dc2", "dc3"])[0]
    plan = build_plan([dc1], pool_for(clusters))
    (topic,) = plan.flows[0].topics
    assert (topic.action, topic.target_partitions) == ("up to date", 4)
    ensure_remote_topics(dc1, plan.flows[0], clusters["dc1"], clusters["target"])
    assert clusters["target"].grown == {} and clusters["target"].created == []


def test_a_concurrent_narrower_creation_is_grown_to_the_planned_count() -> None:
    """Another host created `orders` with 2 partitions between this host's plan and its CreateTopics."""
    clusters = {alias: FakeAdmin({"orders": n}) for alias, n in SOURCES.items()}
    clusters["target"] = FakeAdmin({})
    selected = flows(["dc1", "dc2", "dc3"])
    plan = build_plan(selected, pool_for(clusters))
    clusters["target"].topics["orders"] = 2  # the other host won the race
    ensure_remote_topics(selected[1], plan.flows[1], clusters["dc2"], clusters["target"])
    assert clusters["target"].topics == {"orders": 4}

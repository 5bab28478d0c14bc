"""Topic-config sync as KIP-894's use.incremental.alter.configs defines it, against a fake target admin."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigResource

from mm2py.control.config_sync import TopicConfigSync
from mm2py.control.plan import FlowPlan, TopicPlan
from mm2py.control.topics import left_out_configs, with_configs_not_synced
from mm2py.errors import ReplicationError
from mm2py.executor.contract import CopyPath
from mm2py.librdkafka.admin import TopicConfigValue, UnsupportedByBrokerError
from tests.unit.test_topics import flow

TIERED = {
    "retention.ms": TopicConfigValue("86400000", is_default=False),
    "remote.storage.enable": TopicConfigValue("true", is_default=False),
    "local.retention.ms": TopicConfigValue("3600000", is_default=False),
    "remote.log.copy.disable": TopicConfigValue("false", is_default=True),
    "segment.bytes": TopicConfigValue("1073741824", is_default=True),
}
PLAN = FlowPlan("a", "b", (TopicPlan("orders", "a.orders", 1, "up to date", 1),), CopyPath("batch"))


class Source:
    def describe_topic_configs(self, topics: list[str]) -> dict[str, dict[str, TopicConfigValue]]:
        return {t: TIERED for t in topics}


class Target:
    """Records what it is asked; ``incremental`` False answers IncrementalAlterConfigs as an old broker does."""

    def __init__(self, incremental: bool = True) -> None:
        self.has_incremental = incremental
        self.calls: list[tuple[str, list[ConfigResource]]] = []

    def incremental_alter_configs(self, resources: list[ConfigResource]) -> int:
        self.calls.append(("incremental", resources))
        if not self.has_incremental:
            raise UnsupportedByBrokerError(
                "b", "altering configs of a.orders incrementally", "Broker: Unsupported version"
            )
        return len(resources)

    def alter_configs(self, resources: list[ConfigResource]) -> int:
        self.calls.append(("replace", resources))
        return len(resources)


def sync(target: Target, extra: str = "") -> TopicConfigSync:
    config_sync = TopicConfigSync(flow(extra))
    config_sync.sync(PLAN, Source(), target)  # type: ignore[arg-type]
    return config_sync


def incremental_ops(resource: ConfigResource) -> dict[str, Any]:
    return {e.name: (e.incremental_operation, e.value) for e in resource.incremental_configs}


def test_requested_alters_incrementally_and_never_touches_tiered_storage_configs() -> None:
    target = Target()
    sync(target)
    [(api, [resource])] = target.calls
    assert api == "incremental" and resource.name == "a.orders"
    assert incremental_ops(resource) == {
        "retention.ms": (AlterConfigOpType.SET, "86400000"),
        "segment.bytes": (AlterConfigOpType.DELETE, ""),  # a source default: the target's own applies
    }


def test_requested_falls_back_to_alter_configs_for_the_rest_of_the_run_on_an_old_broker() -> None:
    target = Target(incremental=False)
    config_sync = sync(target)
    config_sync.sync(PLAN, Source(), target)  # type: ignore[arg-type]
    assert [api for api, _ in target.calls] == ["incremental", "replace", "replace"]
    assert target.calls[1][1][0].set_config_dict == {"retention.ms": "86400000"}


def test_required_stops_the_run_on_an_old_broker_naming_the_key() -> None:
    with pytest.raises(ReplicationError, match=r"use\.incremental\.alter\.configs = required") as raised:
        sync(Target(incremental=False), "use.incremental.alter.configs = required\n")
    assert not raised.value.retriable


def test_never_replaces_the_whole_dynamic_config_with_what_mm2_copies() -> None:
    target = Target()
    sync(target, "use.incremental.alter.configs = never\na->b.use.defaults.from = source\n")
    [(api, [resource])] = target.calls
    assert api == "replace"
    assert resource.set_config_dict == {"retention.ms": "86400000", "segment.bytes": "1073741824"}


def test_a_config_properties_exclude_of_ones_own_lets_tiered_configs_through() -> None:
    target = Target()
    sync(target, "config.properties.exclude = min\\\\.insync\\\\.replicas\n")
    assert incremental_ops(target.calls[0][1][0])["remote.storage.enable"] == (AlterConfigOpType.SET, "true")


def test_plan_names_the_source_set_configs_that_are_not_synced() -> None:
    assert left_out_configs(flow(), TIERED) == {"local.retention.ms": "3600000", "remote.storage.enable": "true"}

    class Pool:
        def admin(self, _alias: str, _flow: Any) -> Source:
            return Source()

    from mm2py.control.plan import ReplicationPlan

    plan = with_configs_not_synced([flow()], ReplicationPlan((PLAN,)), Pool())  # type: ignore[arg-type]
    topic = plan.flows[0].topics[0]
    assert topic.configs_not_synced == (("local.retention.ms", "3600000"), ("remote.storage.enable", "true"))
    assert topic.to_json()["configs_not_synced"] == {"local.retention.ms": "3600000", "remote.storage.enable": "true"}

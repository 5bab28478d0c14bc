"""Which source topic configs reach remote topics (MM2's targetConfig rules: docs/mm2-semantics.md, *Remote topics*)."""

from __future__ import annotations

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.topics import internal_topics, offset_syncs_topic, remote_topic_configs
from mm2py.librdkafka.admin import TopicConfigValue

BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"


def flow(extra: str = "") -> FlowConfig:
    mm = MirrorMakerConfig(parse_properties(BASE + extra, "t.properties"), {})
    return build_flow_config(mm, Flow("a", "b"))


SOURCE = {
    "retention.ms": TopicConfigValue("86400000", is_default=False),
    "cleanup.policy": TopicConfigValue("compact", is_default=False),
    "min.insync.replicas": TopicConfigValue("2", is_default=False),  # excluded by default
    "message.timestamp.type": TopicConfigValue("LogAppendTime", is_default=False),  # excluded by default
    "segment.bytes": TopicConfigValue("1073741824", is_default=True),  # a broker default
}


def test_non_default_configs_are_copied_except_mm2s_default_exclusions() -> None:
    assert remote_topic_configs(flow(), SOURCE) == {"retention.ms": "86400000", "cleanup.policy": "compact"}


def test_source_defaults_are_copied_only_with_use_defaults_from_source() -> None:
    copied = remote_topic_configs(flow("a->b.use.defaults.from = source\n"), SOURCE)
    assert copied["segment.bytes"] == "1073741824"


def test_config_properties_exclude_is_honoured() -> None:
    copied = remote_topic_configs(flow("config.properties.exclude = retention\\\\..*\n"), SOURCE)
    assert "retention.ms" not in copied and copied["min.insync.replicas"] == "2"


def test_internal_topic_names_and_homes_follow_mm2() -> None:
    default = {(t.cluster, t.name, t.partitions) for t in internal_topics(flow())}
    assert default == {
        ("b", "mm2-offsets.a.internal", 25),
        ("b", "heartbeats", 1),
        ("a", "mm2-offset-syncs.b.internal", 1),
        ("b", "a.checkpoints.internal", 1),
        ("b", "mm2py-leases.internal", 1),
        ("a", "mm2py-offset-syncs.b.internal", 1),
    }
    configs = {t.name: dict(t.config) for t in internal_topics(flow("mm2py.offset-syncs.dense.retention.ms = 1000\n"))}
    assert configs["mm2py-offset-syncs.b.internal"] == {"cleanup.policy": "delete", "retention.ms": "1000"}
    assert configs["mm2-offset-syncs.b.internal"] == {"cleanup.policy": "compact"}
    assert offset_syncs_topic(flow("offset-syncs.topic.location = target\n")) == "mm2-offset-syncs.a.internal"
    custom = {t.name for t in internal_topics(flow("replication.policy.separator = __\n"))}
    assert {"a__checkpoints__internal", "mm2-offset-syncs__b__internal", "mm2-offsets.a.internal"} <= custom


def test_config_sync_sets_copied_properties_and_deletes_source_defaults_from_the_remote_topic() -> None:
    from mm2py.control.config_sync import config_sync_ops

    ops = config_sync_ops(flow(), SOURCE)
    assert ops == {"retention.ms": "86400000", "cleanup.policy": "compact", "segment.bytes": None}
    # With use.defaults.from = source the source's default is copied instead of deleted.
    assert config_sync_ops(flow("a->b.use.defaults.from = source\n"), SOURCE)["segment.bytes"] == "1073741824"

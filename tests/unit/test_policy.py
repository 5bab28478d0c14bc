"""Replication policies: MM2's naming rules, ported from ReplicationPolicyTest, MirrorClientTest and the
behaviour table of MM2's own classes (docs/mm2-semantics.md, *Replication policies*), plus the plugin loader."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mm2py.mirror.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    PluginError,
    ReplicationPolicy,
    load_plugin,
    load_replication_policy,
)


def separator_policy(separator: str, internal_enabled: str | None = None) -> DefaultReplicationPolicy:
    config = {"replication.policy.separator": separator}
    if internal_enabled is not None:
        config["replication.policy.internal.topic.separator.enabled"] = internal_enabled
    policy = DefaultReplicationPolicy()
    policy.configure(config)
    return policy


def identity_policy(alias: str | None) -> IdentityReplicationPolicy:
    policy = IdentityReplicationPolicy()
    policy.configure({} if alias is None else {"source.cluster.alias": alias})
    return policy


class MyPolicy(ReplicationPolicy):
    """A user policy loaded by its Python path: remote topics are ``<topic>@<alias>``."""

    def __init__(self) -> None:
        self.config: Mapping[str, str] = {}

    def configure(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{topic}@{source_cluster_alias}"

    def topic_source(self, topic: str) -> str | None:
        return topic.rsplit("@", 1)[1] if "@" in topic else None

    def upstream_topic(self, topic: str) -> str | None:
        return topic.rsplit("@", 1)[0] if "@" in topic else None


class LoopingPolicy(MyPolicy):
    """A broken policy whose upstream chain never ends."""

    def upstream_topic(self, topic: str) -> str | None:
        return "b" if topic == "a" else "a"


NotAPolicy = dict


# (policy, topic, topicSource, upstreamTopic, originalTopic, isInternal, isHeartbeats, isCheckpoints)
VERIFIED_TABLE = [
    (".", "topic1", None, None, "topic1", False, False, False),
    (".", "A.topic1", "A", "topic1", "topic1", False, False, False),
    (".", "B.A.topic1", "B", "A.topic1", "topic1", False, False, False),
    (".", "heartbeats", None, None, "heartbeats", False, True, False),
    (".", "B.A.heartbeats", "B", "A.heartbeats", "heartbeats", False, True, False),
    (".", "A.checkpoints.internal", "A", "checkpoints.internal", "internal", True, False, True),
    (".", "a.", None, None, "a.", False, False, False),
    (".", ".a", "", "a", "a", True, False, False),
    (".", "a..b", "a", ".b", "b", False, False, False),
    (".", "A.b.", "A", "b.", "b.", False, False, False),
    (".", "...", None, None, "...", True, False, False),
    (".", ".", None, None, ".", True, False, False),
    (".", "", None, None, "", False, False, False),
    (".", "mm2-configs-A-internal", None, None, "mm2-configs-A-internal", True, False, False),
    ("__", "A__B__t", "A", "B__t", "t", False, False, False),
    ("__", "A.topic1", None, None, "A.topic1", False, False, False),
    ("__", "A__checkpoints__internal", "A", "checkpoints__internal", "internal", True, False, True),
    ("__", "A.checkpoints.internal", None, None, "A.checkpoints.internal", True, False, False),
    ("identity:A", "topic1", "A", "topic1", "topic1", False, False, False),
    ("identity:A", "A.topic1", "A", "A.topic1", "A.topic1", False, False, False),
    ("identity:A", "B.A.heartbeats", "B", "A.heartbeats", "heartbeats", False, True, False),
    ("identity:A", "B.myheartbeats", "B", "myheartbeats", "myheartbeats", False, False, False),
    ("identity", "topic1", None, "topic1", "topic1", False, False, False),
]


def make_policy(kind: str) -> ReplicationPolicy:
    if kind == "identity":
        return identity_policy(None)
    if kind.startswith("identity:"):
        return identity_policy(kind.split(":", 1)[1])
    return separator_policy(kind) if kind != "." else DefaultReplicationPolicy()


@pytest.mark.parametrize(
    ("kind", "topic", "source", "upstream", "original", "internal", "heartbeats", "checkpoints"),
    VERIFIED_TABLE,
    ids=[f"{row[0]}-{row[1]!r}" for row in VERIFIED_TABLE],
)
def test_policies_match_the_verified_mm2_table(
    kind: str,
    topic: str,
    source: str | None,
    upstream: str | None,
    original: str,
    internal: bool,
    heartbeats: bool,
    checkpoints: bool,
) -> None:
    policy = make_policy(kind)
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream
    assert policy.original_topic(topic) == original
    assert policy.is_internal_topic(topic) is internal
    assert policy.is_heartbeats_topic(topic) is heartbeats
    assert policy.is_checkpoints_topic(topic) is checkpoints


def test_default_policy_prefixes_the_source_alias_with_the_separator() -> None:
    assert DefaultReplicationPolicy().format_remote_topic("us-west", "orders") == "us-west.orders"
    assert separator_policy("__").format_remote_topic("us-west", "orders") == "us-west__orders"


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        (".hiddentopic", True),
        ("mm2-offsets.CLUSTER.internal", True),
        ("mm2-offsets-CLUSTER-internal", True),
        ("mm2-offsets_CLUSTER_internal", False),
    ],
)
def test_internal_topics_are_recognised_like_mm2(topic: str, internal: bool) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic) is internal


def test_internal_topic_names_use_the_custom_separator_unless_disabled() -> None:
    enabled = separator_policy("__", "true")
    disabled = separator_policy("__", "false")
    assert enabled.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    assert enabled.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert disabled.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert disabled.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"


def test_internal_separator_is_enabled_by_default_with_a_custom_separator() -> None:
    assert separator_policy("__").checkpoints_topic("A") == "A__checkpoints__internal"


def test_heartbeats_topic_never_uses_the_separator() -> None:
    assert separator_policy("__", "true").heartbeats_topic() == "heartbeats"
    assert separator_policy("__", "false").heartbeats_topic() == "heartbeats"


def test_internal_separator_flag_is_read_like_java_parse_boolean() -> None:
    # Boolean.parseBoolean: only "true" in any case counts; anything else (even "true ") disables.
    assert separator_policy("__", "TRUE").checkpoints_topic("A") == "A__checkpoints__internal"
    assert separator_policy("__", "true ").checkpoints_topic("A") == "A.checkpoints.internal"


def test_separator_is_taken_raw_without_trimming() -> None:
    policy = separator_policy("_ ")
    assert policy.format_remote_topic("A", "t") == "A_ t"
    assert policy.topic_source("A_ t") == "A"
    assert policy.topic_source("A_t") is None


def test_empty_separator_splits_between_characters_like_java() -> None:
    policy = separator_policy("")
    assert policy.format_remote_topic("A", "bc") == "Abc"
    assert policy.topic_source("Abc") == "A"
    assert policy.upstream_topic("Abc") == "bc"
    assert policy.topic_source("a") is None


def test_reconfiguring_without_a_separator_restores_the_default() -> None:
    policy = separator_policy("__")
    policy.configure({})
    assert policy.format_remote_topic("A", "t") == "A.t"


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("heartbeats", True),
        ("source1.heartbeats", True),
        ("source2.source1.heartbeats", True),
        ("heartbeats!", False),
        ("!heartbeats", False),
        ("source1heartbeats", False),
        ("source1-heartbeats", False),
    ],
)
def test_heartbeat_topics_are_detected_at_any_hop(topic: str, expected: bool) -> None:
    assert DefaultReplicationPolicy().is_heartbeats_topic(topic) is expected


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("source1.checkpoints.internal", True),
        ("source2.source1.checkpoints.internal", True),
        ("checkpoints.internal", False),
        ("checkpoints-internal", False),
        ("checkpoints.internal!", False),
        ("!checkpoints.internal", False),
        ("source1checkpointsinternal", False),
    ],
)
def test_checkpoint_topics_need_a_source_alias(topic: str, expected: bool) -> None:
    assert DefaultReplicationPolicy().is_checkpoints_topic(topic) is expected


def remote_topics(policy: ReplicationPolicy, topics: list[str]) -> set[str]:
    """MirrorClient.remoteTopics: not internal and with a source."""
    return {t for t in topics if not policy.is_internal_topic(t) and policy.topic_source(t) is not None}


def test_remote_topics_are_those_with_a_source_alias() -> None:
    topics = [
        "topic1",
        "topic2",
        "topic3",
        "source1.topic4",
        "source1.source2.topic5",
        "source3.source4.source5.topic6",
    ]
    assert remote_topics(DefaultReplicationPolicy(), topics) == {
        "source1.topic4",
        "source1.source2.topic5",
        "source3.source4.source5.topic6",
    }


def test_remote_topics_follow_a_custom_separator() -> None:
    topics = [
        "topic1",
        "topic2",
        "topic3",
        "source1__topic4",
        "source1__source2__topic5",
        "source3__source4__source5__topic6",
    ]
    assert remote_topics(separator_policy("__"), topics) == {
        "source1__topic4",
        "source1__source2__topic5",
        "source3__source4__source5__topic6",
    }


def test_identity_policy_considers_every_topic_but_local_heartbeats_remote() -> None:
    topics = ["topic1", "topic2", "topic3", "heartbeats", "backup.heartbeats"]
    assert remote_topics(identity_policy("source"), topics) == {"topic1", "topic2", "topic3", "backup.heartbeats"}


def test_identity_policy_keeps_names_but_prefixes_heartbeats() -> None:
    policy = identity_policy("primary")
    assert policy.format_remote_topic("primary", "topic1") == "topic1"
    assert policy.topic_source("topic1") == "primary"
    assert policy.format_remote_topic("backup", "heartbeats") == "backup.heartbeats"
    assert policy.topic_source("backup.heartbeats") == "backup"
    assert policy.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"


def test_upstream_clusters_are_found_through_heartbeats_with_either_policy() -> None:
    topics = [
        "topic1",
        "topic2",
        "heartbeats",
        "source1.heartbeats",
        "source1.source2.heartbeats",
        "source3.source4.source5.heartbeats",
    ]
    for policy in (DefaultReplicationPolicy(), identity_policy("source")):
        sources: set[str] = set()
        for topic in filter(policy.is_heartbeats_topic, topics):
            current: str | None = topic
            while current is not None and (source := policy.topic_source(current)) is not None:
                sources.add(source)
                current = policy.upstream_topic(current)
        assert sources == {"source1", "source2", "source3", "source4", "source5"}


@pytest.mark.parametrize(
    "class_name",
    [
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "DefaultReplicationPolicy",
        " DefaultReplicationPolicy ",
        "mm2py.mirror.policy:DefaultReplicationPolicy",
        "mm2py.mirror.policy.DefaultReplicationPolicy",
    ],
)
def test_default_policy_loads_by_java_or_python_name(class_name: str) -> None:
    policy = load_replication_policy(class_name, {"replication.policy.separator": "-"})
    assert type(policy) is DefaultReplicationPolicy
    assert policy.format_remote_topic("A", "t") == "A-t"


def test_identity_policy_loads_with_the_flow_source_alias() -> None:
    policy = load_replication_policy(
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy", {"source.cluster.alias": "dc1"}
    )
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.topic_source("orders") == "dc1"


def test_custom_policy_loads_by_its_python_path_and_sees_the_whole_config() -> None:
    config = {"source.cluster.alias": "dc1", "my.policy.setting": "x"}
    policy = load_replication_policy(f"{__name__}:MyPolicy", config)
    assert isinstance(policy, MyPolicy)
    assert policy.config == config
    assert policy.format_remote_topic("dc1", "orders") == "orders@dc1"
    assert policy.original_topic("orders@dc1@dc2") == "orders"
    assert load_replication_policy(f"{__name__}.MyPolicy", {}).format_remote_topic("a", "t") == "t@a"


@pytest.mark.parametrize(
    ("class_name", "reason"),
    [
        ("org.apache.kafka.connect.mirror.MyCustomPolicy", "unknown MM2 class"),
        ("com.example.MyPolicy", "cannot import 'com.example'"),
        ("NoSuchPolicy", "unknown ReplicationPolicy"),
        ("mm2py.mirror.policy:NoSuchPolicy", "has no 'NoSuchPolicy'"),
        (f"{__name__}:NotAPolicy", "is not a ReplicationPolicy subclass"),
        ("mm2py.mirror.policy:ReplicationPolicy", "cannot create"),
    ],
)
def test_bad_policy_names_say_what_is_allowed(class_name: str, reason: str) -> None:
    with pytest.raises(PluginError) as caught:
        load_replication_policy(class_name, {})
    message = str(caught.value)
    assert reason in message
    assert "org.apache.kafka.connect.mirror.DefaultReplicationPolicy" in message
    assert "org.apache.kafka.connect.mirror.IdentityReplicationPolicy" in message
    assert "package.module:ClassName" in message


def test_plugin_error_is_a_value_error_for_the_config_layer() -> None:
    with pytest.raises(ValueError):
        load_plugin("Nope", ReplicationPolicy, {}, {})


def test_a_policy_whose_upstream_chain_loops_is_reported_not_followed_forever() -> None:
    with pytest.raises(PluginError, match="LoopingPolicy"):
        LoopingPolicy().original_topic("a")

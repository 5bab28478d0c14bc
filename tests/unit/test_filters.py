"""Topic, group and config-property filters, pattern lists and MM2's topic selection rule.

Cases ported from MirrorSourceConnectorTest, MirrorSourceConfigTest and MirrorCheckpointConfigTest, plus
the behaviours users trip on (docs/mm2-semantics.md, *Which topics a flow replicates*)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from mm2py.mirror.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    PatternError,
    TopicFilter,
    compile_pattern_list,
    is_cycle,
    load_config_property_filter,
    load_group_filter,
    load_topic_filter,
    parse_list,
    should_replicate_topic,
)
from mm2py.mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, PluginError, ReplicationPolicy

Loader = Callable[[str, Mapping[str, str]], object]


class AcceptAll(TopicFilter):
    def should_replicate_topic(self, topic: str) -> bool:
        return True


class RejectAll(TopicFilter):
    def should_replicate_topic(self, topic: str) -> bool:
        return False


class PrefixTopicFilter(TopicFilter):
    """A user filter loaded by its Python path; reads its own key from the connector config."""

    def configure(self, config: Mapping[str, str]) -> None:
        self.prefix = config["my.prefix"]

    def should_replicate_topic(self, topic: str) -> bool:
        return topic.startswith(self.prefix)


class NoUpstreamPolicy(DefaultReplicationPolicy):
    def upstream_topic(self, topic: str) -> str | None:
        return None


def topic_filter(**config: str) -> DefaultTopicFilter:
    f = DefaultTopicFilter()
    f.configure({key.replace("_", "."): value for key, value in config.items()})
    return f


def replicates(
    topic: str, *, policy: ReplicationPolicy | None = None, accept: TopicFilter | None = None, heartbeats: bool = True
) -> bool:
    return should_replicate_topic(
        topic,
        topic_filter=accept or DefaultTopicFilter(),
        policy=policy or DefaultReplicationPolicy(),
        target_cluster_alias="target",
        heartbeats_replication_enabled=heartbeats,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", []),
        ("   ", []),
        ("topic1", ["topic1"]),
        (" topic1, topic2 ", ["topic1", "topic2"]),
        ("a ,\tb", ["a", "b"]),
        ("a,", ["a", ""]),
        (r"min\.insync\.replicas,exclude_param.*", [r"min\.insync\.replicas", "exclude_param.*"]),
        ("a{1,3}", ["a{1", "3}"]),
    ],
)
def test_lists_split_like_kafka_config_def(value: str, expected: list[str]) -> None:
    assert parse_list(value) == expected


def test_topic_filter_defaults_replicate_everything_but_internal_looking_topics() -> None:
    f = DefaultTopicFilter()
    for topic in ["orders", "orders-replica", "internal", "a_internal"]:
        assert f.should_replicate_topic(topic), topic
    for topic in ["orders.internal", "orders-internal", "orders.replica", "__consumer_offsets"]:
        assert not f.should_replicate_topic(topic), topic


def test_topics_list_selects_only_the_named_topics() -> None:
    assert topic_filter(topics="topic1").should_replicate_topic("topic1")
    assert not topic_filter(topics="topic1").should_replicate_topic("topic2")
    both = topic_filter(topics="topic1, topic2")
    assert both.should_replicate_topic("topic1") and both.should_replicate_topic("topic2")
    assert not both.should_replicate_topic("topic3")
    assert topic_filter(topics=".*").should_replicate_topic("topic2")


def test_empty_topics_list_matches_nothing() -> None:
    f = topic_filter(topics="")
    assert not f.should_replicate_topic("topic1")
    assert not f.should_replicate_topic("")


def test_empty_exclude_list_excludes_nothing() -> None:
    assert topic_filter(topics_exclude=" ").should_replicate_topic("__consumer_offsets")


def test_topic_names_are_matched_whole() -> None:
    f = topic_filter(topics="orders")
    assert not f.should_replicate_topic("orders2")
    assert not f.should_replicate_topic("my-orders")
    assert topic_filter(topics="a|b, c").should_replicate_topic("b")


def test_literal_dots_are_wildcards() -> None:
    assert topic_filter(topics="my.topic").should_replicate_topic("myXtopic")
    assert not topic_filter(topics=r"my\.topic").should_replicate_topic("myXtopic")


def test_exclude_wins_over_include() -> None:
    f = topic_filter(topics="orders.*", topics_exclude=r".*\.scratch")
    assert not f.should_replicate_topic("orders.scratch")
    assert f.should_replicate_topic("orders-scratch")


def test_trailing_comma_adds_a_pattern_that_matches_the_empty_name() -> None:
    assert topic_filter(topics="a,").should_replicate_topic("")


def test_group_filter_defaults_skip_console_connect_and_internal_groups() -> None:
    f = DefaultGroupFilter()
    assert f.should_replicate_group("billing")
    for group in ["console-consumer-12345", "connect-mm2", "__internal"]:
        assert not f.should_replicate_group(group), group


def test_groups_list_selects_only_the_named_groups() -> None:
    f = DefaultGroupFilter()
    f.configure({"groups": "group1"})
    assert f.should_replicate_group("group1")
    assert not f.should_replicate_group("group2")


def test_default_config_property_filter_excludes_mm2_defaults_and_tiered_storage_configs() -> None:
    f = DefaultConfigPropertyFilter()
    assert f.should_replicate_config_property("name-1")
    assert f.should_replicate_config_property("retention.ms")
    assert f.should_replicate_config_property("message.timestamp.before.max.ms")
    assert f.should_replicate_config_property("message.timestamp.after.max.ms")
    for prop in parse_list(DEFAULT_CONFIG_PROPERTIES_EXCLUDE):
        name = prop.replace("\\", "")
        assert not f.should_replicate_config_property(name), name
    assert "min.insync.replicas" in DEFAULT_CONFIG_PROPERTIES_EXCLUDE.replace("\\", "")
    for tiered in ("remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable"):
        assert not f.should_replicate_config_property(tiered), tiered
    for tiered in ("local.retention.ms", "local.retention.bytes"):
        assert not f.should_replicate_config_property(tiered), tiered
    assert f.should_replicate_config_property("retention.bytes")  # only the local (tiered) retention is left out


def test_config_properties_exclude_replaces_the_default_list() -> None:
    f = DefaultConfigPropertyFilter()
    f.configure({"config.properties.exclude": "prop2"})
    assert f.should_replicate_config_property("prop1")
    assert not f.should_replicate_config_property("prop2")
    assert f.should_replicate_config_property("min.insync.replicas")
    assert f.should_replicate_config_property("remote.storage.enable")  # a tiered target can ask for them


def test_custom_config_property_excludes_are_regexes() -> None:
    f = DefaultConfigPropertyFilter()
    f.configure({"config.properties.exclude": r"min\.insync\.replicas,exclude_param.*"})
    assert f.should_replicate_config_property("name-1")
    assert not f.should_replicate_config_property("min.insync.replicas")
    assert not f.should_replicate_config_property("exclude_param.param1")


@pytest.mark.parametrize(
    ("use_defaults_from", "copies_source_default"),
    [(None, False), ("target", False), ("source", True), (" source ", True), ("Source", False), ("x", False)],
)
def test_only_use_defaults_from_source_copies_source_defaults(
    use_defaults_from: str | None, copies_source_default: bool
) -> None:
    f = DefaultConfigPropertyFilter()
    f.configure({} if use_defaults_from is None else {"use.defaults.from": use_defaults_from})
    assert f.should_replicate_source_default("name-2") is copies_source_default


def test_config_property_filter_interface_keeps_target_defaults_by_default() -> None:
    class OnlyRetention(ConfigPropertyFilter):
        def should_replicate_config_property(self, prop: str) -> bool:
            return prop == "retention.ms"

    assert OnlyRetention().should_replicate_source_default("retention.ms") is False


def test_inline_flag_in_a_later_list_entry_applies_to_the_rest_like_java() -> None:
    pattern = compile_pattern_list(parse_list("orders, (?i)payments, refunds"))
    assert pattern is not None
    assert pattern.fullmatch("PAYMENTS") and pattern.fullmatch("REFUNDS")
    assert not pattern.fullmatch("ORDERS")


def test_entries_are_joined_before_compiling_like_mm2() -> None:
    pattern = compile_pattern_list(parse_list("(orders, payments)"))
    assert pattern is not None and pattern.fullmatch("payments")


def test_empty_pattern_list_compiles_to_nothing() -> None:
    assert compile_pattern_list([]) is None


@pytest.mark.parametrize(("java", "named"), [(r"\p{L}+", r"\p{L}"), ("orders(", "invalid regex")])
def test_pattern_lists_python_cannot_honour_are_refused_by_name(java: str, named: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern_list([java])
    assert named in str(caught.value)
    assert caught.value.pattern == java


def test_bad_filter_regex_names_its_config_key() -> None:
    with pytest.raises(PatternError) as caught:
        DefaultGroupFilter().configure({"groups.exclude": "connect-(.*"})
    assert caught.value.key == "groups.exclude"
    assert isinstance(caught.value, ValueError)


def test_filters_survive_pickling_for_shipping() -> None:
    import pickle

    f = pickle.loads(pickle.dumps(topic_filter(topics="orders.*")))
    assert f.should_replicate_topic("orders.eu") and not f.should_replicate_topic("payments")


@pytest.mark.parametrize(
    ("loader", "class_name", "expected"),
    [
        (load_topic_filter, "org.apache.kafka.connect.mirror.DefaultTopicFilter", DefaultTopicFilter),
        (load_topic_filter, "DefaultTopicFilter", DefaultTopicFilter),
        (load_group_filter, "org.apache.kafka.connect.mirror.DefaultGroupFilter", DefaultGroupFilter),
        (load_group_filter, "mm2py.mirror.filters:DefaultGroupFilter", DefaultGroupFilter),
        (
            load_config_property_filter,
            "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
            DefaultConfigPropertyFilter,
        ),
        (load_config_property_filter, "mm2py.mirror.filters.DefaultConfigPropertyFilter", DefaultConfigPropertyFilter),
    ],
)
def test_default_filters_load_by_java_or_python_name(loader: Loader, class_name: str, expected: type) -> None:
    assert type(loader(class_name, {})) is expected


def test_loaded_default_filter_is_configured_with_the_connector_config() -> None:
    f = load_topic_filter("DefaultTopicFilter", {"topics": "orders", "groups": "ignored"})
    assert f.should_replicate_topic("orders") and not f.should_replicate_topic("payments")


def test_custom_topic_filter_loads_by_python_path_and_reads_its_own_keys() -> None:
    f = load_topic_filter(f"{__name__}:PrefixTopicFilter", {"my.prefix": "eu-", "topics": "x"})
    assert f.should_replicate_topic("eu-orders") and not f.should_replicate_topic("us-orders")


@pytest.mark.parametrize(
    ("loader", "class_name", "allowed"),
    [
        (load_topic_filter, "org.apache.kafka.connect.mirror.MyTopicFilter", "DefaultTopicFilter"),
        (load_group_filter, f"{__name__}:PrefixTopicFilter", "DefaultGroupFilter"),
        (load_config_property_filter, "nosuchmodule.Filter", "DefaultConfigPropertyFilter"),
    ],
)
def test_bad_filter_names_say_what_is_allowed(loader: Loader, class_name: str, allowed: str) -> None:
    with pytest.raises(PluginError) as caught:
        loader(class_name, {})
    assert f"org.apache.kafka.connect.mirror.{allowed}" in str(caught.value)
    assert "package.module:ClassName" in str(caught.value)


def test_heartbeats_are_replicated_by_default() -> None:
    assert replicates("heartbeats")
    assert replicates("us-west.heartbeats")


def test_heartbeats_are_replicated_even_when_the_filter_rejects_them() -> None:
    assert replicates("heartbeats", accept=RejectAll())
    assert replicates("us-west.heartbeats", accept=RejectAll())
    underscore = DefaultReplicationPolicy()
    underscore.configure({"replication.policy.separator": "_"})
    assert replicates("heartbeats", accept=RejectAll(), policy=underscore)
    assert not replicates("us-west.heartbeats", accept=RejectAll(), policy=underscore)


def test_heartbeats_follow_the_filter_when_heartbeat_replication_is_disabled() -> None:
    assert not replicates("heartbeats", accept=RejectAll(), heartbeats=False)
    assert not replicates("us-west.heartbeats", accept=RejectAll(), heartbeats=False)
    assert replicates("heartbeats", accept=AcceptAll(), heartbeats=False)
    assert replicates("us-west.heartbeats", accept=AcceptAll(), heartbeats=False)


def test_empty_topics_still_replicates_heartbeats_only() -> None:
    assert replicates("heartbeats", accept=topic_filter(topics=""))
    assert not replicates("orders", accept=topic_filter(topics=""))


def test_internal_topics_are_never_replicated_whatever_the_filter() -> None:
    for topic in ["__consumer_offsets", "mm2-offsets.A.internal", "A.checkpoints.internal", ".hidden"]:
        assert not replicates(topic, accept=AcceptAll()), topic


@pytest.mark.parametrize(
    "topic",
    [
        "target.topic1",
        "target.source.topic1",
        "source.target.topic1",
        "target.source.target.topic1",
        "source.target.source.topic1",
    ],
)
def test_topics_that_came_from_the_target_are_not_replicated_back(topic: str) -> None:
    assert not replicates(topic, accept=AcceptAll())
    assert is_cycle(DefaultReplicationPolicy(), topic, "target")


@pytest.mark.parametrize("topic", ["topic1", "source.topic1"])
def test_other_topics_are_not_cycles(topic: str) -> None:
    assert replicates(topic, accept=AcceptAll())
    assert not is_cycle(DefaultReplicationPolicy(), topic, "target")


@pytest.mark.parametrize("alias", [None, "source"])
def test_identity_policy_cannot_detect_cycles_except_for_heartbeats(alias: str | None) -> None:
    policy = IdentityReplicationPolicy()
    policy.configure({} if alias is None else {"source.cluster.alias": alias})
    for topic in [
        "target.topic1",
        "target.source.topic1",
        "source.target.topic1",
        "target.source.target.topic1",
        "source.target.source.topic1",
        "topic1",
        "othersource.topic1",
        "heartbeats",
        "othersource.heartbeats",
    ]:
        assert replicates(topic, accept=AcceptAll(), policy=policy), topic
    for topic in [
        "target.heartbeats",
        "target.source.heartbeats",
        "source.target.heartbeats",
        "target.source.target.heartbeats",
        "source.target.source.heartbeats",
    ]:
        assert not replicates(topic, accept=AcceptAll(), policy=policy), topic


def test_cycle_check_tolerates_a_policy_without_upstream_topics() -> None:
    assert is_cycle(NoUpstreamPolicy(), ".b", "target") is False

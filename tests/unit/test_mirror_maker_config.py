"""MirrorMakerConfig layering, ported case by case from MM2's own config tests.

Sources: MirrorMakerConfigTest, MirrorConnectorConfigTest, MirrorSourceConfigTest and
MirrorCheckpointConfigTest (Kafka's connect/mirror tests; there is no MirrorHeartbeatConfigTest). Each
test names the Java case it follows. Inputs are properties files, as users write them; expectations are
MM2's results, checked on our flattened maps (``cluster_props``, ``connector_props``, ``worker_props``),
on ``client_props`` (MM2's client layering) and on the typed FlowConfig. Where mm2py deliberately
differs, the test asserts mm2py's documented behaviour and says why.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from mm2py.config.flow import ClientConfig, FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow, MirrorMakerConfig, Props, client_props, worker_producer_props
from mm2py.config.properties import parse_properties
from mm2py.config.validate import validate
from mm2py.config.values import Setting
from mm2py.errors import ConfigError
from mm2py.mirror.filters import load_group_filter, load_topic_filter

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
AB = Flow("a", "b")


def mm2(text: str, environ: Mapping[str, str] | None = None) -> MirrorMakerConfig:
    return MirrorMakerConfig(
        parse_properties(textwrap.dedent(text), "test.properties"), environ={} if environ is None else environ
    )


def plain(props: Props) -> dict[str, str]:
    return {key: setting.value for key, setting in props.items()}


def connector_map(pairs: Mapping[str, str]) -> Props:
    """A connector config as MM2's connector tests build one: flow aliases source1->target2."""
    base = {
        "name": "ConnectorName",
        "connector.class": "ConnectorClass",
        "source.cluster.alias": "source1",
        "target.cluster.alias": "target2",
        **pairs,
    }
    return {key: Setting(value, key) for key, value in base.items()}


def java(client: ClientConfig | None) -> dict[str, str]:
    assert client is not None
    return dict(client.java)


def without_client_id(client: ClientConfig | None) -> dict[str, str]:
    settings = java(client)
    settings.pop("client.id")
    return settings


def pairs(config: MirrorMakerConfig) -> set[str]:
    return {str(flow) for flow in config.cluster_pairs()}


# -- which herders (cluster pairs) and which replicating flows exist -------------------------------


def test_every_ordered_pair_has_a_herder_with_default_heartbeats() -> None:
    # testClusterPairsWithDefaultSettings
    config = mm2("clusters = a, b, c")
    assert pairs(config) == {"a->b", "a->c", "b->a", "b->c", "c->a", "c->b"}
    assert config.enabled_flows() == []  # herders exist, but their connectors are disabled


def test_globally_disabled_heartbeats_leave_no_herders() -> None:
    # testEmptyClusterPairsWithGloballyDisabledHeartbeats
    config = mm2("""
        clusters = a, b, c
        emit.heartbeats.enabled = false
    """)
    assert config.cluster_pairs() == []


def test_flow_level_heartbeats_off_removes_only_those_pairs() -> None:
    # testClusterPairsWithTwoDisabledHeartbeats
    config = mm2("""
        clusters = a, b, c
        a->b.emit.heartbeats.enabled = false
        a->c.emit.heartbeats.enabled = false
    """)
    assert pairs(config) == {"b->a", "b->c", "c->a", "c->b"}


def test_with_heartbeats_off_only_enabled_flows_have_herders() -> None:
    # testClusterPairsWithGloballyDisabledHeartbeats
    config = mm2("""
        clusters = a, b, c, d, e, f
        emit.heartbeats.enabled = false
        a->b.enabled = true
        a->c.enabled = true
        a->d.enabled = true
        a->e.enabled = false
        a->f.enabled = false
    """)
    assert pairs(config) == {"a->b", "a->c", "a->d"}
    assert Flow("b", "a") not in config.cluster_pairs()
    assert [str(f) for f in config.enabled_flows()] == ["a->b", "a->c", "a->d"]


def test_flow_level_heartbeats_on_beats_global_heartbeats_off() -> None:
    # testClusterPairsWithGloballyDisabledHeartbeatsCentralLocal
    config = mm2("""
        clusters = central, local_one, local_two, beats_emitter
        emit.heartbeats.enabled = false
        central->local_one.enabled = true
        central->local_two.enabled = true
        beats_emitter->central.emit.heartbeats.enabled = true
    """)
    assert pairs(config) == {"central->local_one", "central->local_two", "beats_emitter->central"}
    assert {str(f) for f in config.enabled_flows()} == {"central->local_one", "central->local_two"}


def test_top_level_enabled_enables_every_flow_that_has_a_herder() -> None:
    # MirrorMakerConfig.clusterPairs + connectorBaseConfig: `enabled` is a connector ConfigDef name.
    config = mm2("""
        clusters = a, b
        enabled = true
    """)
    assert {str(f) for f in config.enabled_flows()} == {"a->b", "b->a"}


def test_top_level_enabled_creates_no_herder_when_heartbeats_are_off() -> None:
    # MirrorMakerConfig.clusterPairs reads only `A->B.enabled`: without heartbeats a top-level
    # `enabled = true` leaves MM2 with no herder, hence nothing to replicate.
    config = mm2("""
        clusters = a, b
        enabled = true
        emit.heartbeats.enabled = false
    """)
    assert config.cluster_pairs() == []
    assert config.enabled_flows() == []


def test_flow_enabled_flag_is_case_insensitive() -> None:
    # Boolean.parseBoolean (clusterPairs) and ConfigDef BOOLEAN (connector) both accept any case.
    config = mm2("""
        clusters = a, b
        emit.heartbeats.enabled = false
        a->b.enabled = TRUE
    """)
    assert config.cluster_pairs() == [AB]
    assert config.enabled_flows() == [AB]


def test_trailing_space_after_true_still_enables_a_flow_that_has_a_herder() -> None:
    # The connector trims its ConfigDef boolean, so with default heartbeats the flow replicates ...
    config = mm2("clusters = a, b\n" + "a->b.enabled = true \n")
    assert config.get("a->b.enabled") == "true "
    assert config.enabled_flows() == [AB]


def test_trailing_space_after_true_creates_no_herder_when_heartbeats_are_off() -> None:
    # ... but clusterPairs uses Boolean.parseBoolean on the untrimmed value, so without heartbeats there is
    # no herder for it.
    config = mm2("clusters = a, b\nemit.heartbeats.enabled = false\n" + "a->b.enabled = true \n")
    assert config.cluster_pairs() == []
    assert config.enabled_flows() == []


def test_an_alias_listed_twice_yields_each_flow_once() -> None:
    # MirrorMakerConfig.clusters() is a Set.
    config = mm2("""
        clusters = a, b, a
        a->b.enabled = true
    """)
    assert config.clusters == ("a", "b")
    assert sorted(map(str, config.cluster_pairs())) == ["a->b", "b->a"]
    assert config.enabled_flows() == [AB]


def test_cluster_list_is_trimmed_and_split_on_commas() -> None:
    # "clusters", "a, b, c" in every MirrorMakerConfigTest case: a ConfigDef LIST.
    assert mm2("clusters =  a ,b,   c  ").clusters == ("a", "b", "c")


# -- connector config: top level vs cluster level vs flow level ------------------------------------


def test_cluster_bootstrap_reaches_the_connector_and_top_level_security_passes_through() -> None:
    # testClusterConfigProperties
    props = plain(
        mm2("""
        clusters = a, b
        a.bootstrap.servers = servers-one
        b.bootstrap.servers = servers-two
        security.protocol = SSL
        replication.factor = 4
    """).connector_props(AB)
    )
    assert props["source.cluster.bootstrap.servers"] == "servers-one"
    assert props["target.cluster.bootstrap.servers"] == "servers-two"
    assert props["security.protocol"] == "SSL"
    assert props["replication.factor"] == "4"


def test_flow_level_key_reaches_the_connector() -> None:
    # testReplicationConfigProperties
    config = mm2("""
        clusters = a, b
        a->b.tasks.max = 123
    """)
    assert config.connector_props(AB)["tasks.max"] == Setting("123", "a->b.tasks.max")
    assert build_flow_config(config, AB).tasks_max == 123


def test_top_level_connector_keys_reach_every_connector_and_unknown_keys_are_dropped() -> None:
    # testIncludesConnectorConfigProperties (the flow need not be listed in clusters, as in the Java case)
    config = mm2("""
        clusters = a, b
        tasks.max = 100
        topics = topic-1
        groups = group-2
        replication.policy.separator = __
        config.properties.exclude = property-3
        metric.reporters = FakeMetricsReporter
        topic.filter.class = org.apache.kafka.connect.mirror.DefaultTopicFilter
        xxx = yyy
    """)
    flow = Flow("source", "target")
    props = plain(config.connector_props(flow))
    assert props["metric.reporters"] == "FakeMetricsReporter"
    assert props["replication.policy.separator"] == "__"
    assert "xxx" not in props
    typed = build_flow_config(config, flow)
    assert typed.tasks_max == 100
    assert typed.topics == ("topic-1",)
    assert typed.config_properties_exclude == ("property-3",)
    assert typed.topic_filter_class == "org.apache.kafka.connect.mirror.DefaultTopicFilter"
    assert typed.groups == ("group-2",)  # the checkpoint connector reads the same map


def test_top_level_names_of_all_three_connectors_are_accepted() -> None:
    # testAllConfigNames: source (topics), checkpoint (groups) and heartbeat (emit.heartbeats.enabled) names.
    props = plain(
        mm2("""
        clusters = a, b
        topics = t.*
        groups = g.*
        emit.heartbeats.enabled = false
    """).connector_props(AB)
    )
    assert (props["topics"], props["groups"], props["emit.heartbeats.enabled"]) == ("t.*", "g.*", "false")


@pytest.mark.parametrize(
    "key",
    [
        "xxx",
        "transforms.t1.type",
        "use.defaults.from",  # read only by DefaultConfigPropertyFilter, not a ConfigDef name
        "exactly.once.support",  # a Connect source-connector key, not in MM2's ConfigDefs
        "consumer.isolation.level",
        "bootstrap.servers",  # not a connector ConfigDef name; reaches clients through the cluster props only
    ],
)
def test_top_level_keys_that_no_connector_defines_are_dropped(key: str) -> None:
    # connectorBaseConfig: retainAll(allConfigNames())
    config = mm2(f"""
        clusters = a, b
        {key} = source
    """)
    assert key not in config.connector_props(AB)


def test_top_level_bootstrap_servers_is_still_every_cluster_default() -> None:
    # clusterProps: top-level client keys fill in for clusters that do not set them.
    config = mm2("""
        clusters = a, b
        bootstrap.servers = shared:9092
        b.bootstrap.servers = b:9092
    """)
    props = plain(config.connector_props(AB))
    assert props["source.cluster.bootstrap.servers"] == "shared:9092"
    assert props["target.cluster.bootstrap.servers"] == "b:9092"
    typed = build_flow_config(config, AB)
    assert java(typed.source_consumer)["bootstrap.servers"] == "shared:9092"
    assert java(typed.target_admin)["bootstrap.servers"] == "b:9092"


def test_keys_only_plugins_read_work_at_flow_level() -> None:
    # connectorBaseConfig copies every `A->B.*` key verbatim, ConfigDef name or not.
    config = mm2("""
        clusters = a, b
        a->b.use.defaults.from = source
        a->b.my.filter.pattern = x.*
    """)
    props = plain(config.connector_props(AB))
    assert props["use.defaults.from"] == "source"
    assert props["my.filter.pattern"] == "x.*"
    assert build_flow_config(config, AB).use_defaults_from == "source"


def test_cluster_level_behaviour_keys_are_ignored() -> None:
    # clusterConfigsWithPrefix: `a.topics` only becomes `source.cluster.topics`, which no connector reads.
    config = mm2("""
        clusters = a, b
        a.topics = only-this
        b.sync.group.offsets.enabled = true
        b.forwarding.admin.class = com.example.FakeForwardingAdmin
    """)
    props = plain(config.connector_props(AB))
    assert props["source.cluster.topics"] == "only-this"
    assert props["target.cluster.sync.group.offsets.enabled"] == "true"
    assert props["target.cluster.forwarding.admin.class"] == "com.example.FakeForwardingAdmin"
    assert "topics" not in props and "forwarding.admin.class" not in props
    typed = build_flow_config(config, AB)
    assert typed.topics == (".*",)
    assert typed.sync_group_offsets_enabled is False


def test_flow_level_beats_top_level() -> None:
    config = mm2("""
        clusters = a, b
        topics = everything.*
        a->b.topics = just-this
        replication.factor = 3
        a->b.replication.factor = 1
    """)
    typed = build_flow_config(config, AB)
    assert (typed.topics, typed.replication_factor) == (("just-this",), 1)
    other = build_flow_config(config, Flow("b", "a"))
    assert (other.topics, other.replication_factor) == (("everything.*",), 3)


def test_flow_level_topic_lists_reach_the_topic_filter() -> None:
    # testIncludesTopicFilterProperties
    config = mm2("""
        clusters = a, b
        source->target.topics = topic1, topic2
        source->target.topics.exclude = topic3
    """)
    typed = build_flow_config(config, Flow("source", "target"))
    assert typed.topics == ("topic1", "topic2")
    assert typed.topics_exclude == ("topic3",)
    topic_filter = load_topic_filter(typed.topic_filter_class, typed.plugin_config())
    assert [topic_filter.should_replicate_topic(t) for t in ("topic1", "topic2", "topic3")] == [True, True, False]


def test_the_names_kafka_4_removed_are_read_as_their_new_names_which_win_when_both_are_set() -> None:
    # Kafka 3.x's translateDeprecatedConfigs: topics.blacklist excluded topics until 4.0; a 3.x file keeps
    # excluding what it excluded (the validator warns), and topics.exclude wins where both are set.
    config = mm2("""
        clusters = a, b
        topics.blacklist = secret.*
        groups.blacklist = batch-.*
        config.properties.blacklist = retention.ms
        b->a.topics.blacklist = only-b.*
        b->a.groups.exclude = kept-.*
        b->a.groups.blacklist = ignored-.*
    """)
    ab, ba = build_flow_config(config, AB), build_flow_config(config, Flow("b", "a"))
    assert (ab.topics_exclude, ab.groups_exclude, ab.config_properties_exclude) == (
        ("secret.*",),
        ("batch-.*",),
        ("retention.ms",),
    )
    assert (ba.topics_exclude, ba.groups_exclude) == (("only-b.*",), ("kept-.*",))
    topic_filter = load_topic_filter(ab.topic_filter_class, ab.plugin_config())
    assert [topic_filter.should_replicate_topic(t) for t in ("secret.orders", "orders")] == [False, True]
    warned = {p.key: p.reason for p in validate(config)}
    assert warned["topics.blacklist"] == "was removed in Kafka 4.0; mm2py reads it as topics.exclude"
    assert warned["b->a.groups.blacklist"] == "was removed in Kafka 4.0; mm2py reads it as b->a.groups.exclude"


def test_connector_fills_in_aliases_and_disables_itself_unless_enabled() -> None:
    # connectorBaseConfig: source/target.cluster.alias if absent, `enabled = false` if absent.
    props = plain(mm2("clusters = a, b").connector_props(AB))
    assert props["source.cluster.alias"] == "a"
    assert props["target.cluster.alias"] == "b"
    assert props["enabled"] == "false"


# -- lists and booleans ----------------------------------------------------------------------------


def test_an_empty_topics_list_replicates_no_topic() -> None:
    # MirrorSourceConfigTest.testNoTopics
    typed = build_flow_config(mm2("clusters = a, b\na->b.topics =\n"), AB)
    assert typed.topics == ()
    topic_filter = load_topic_filter(typed.topic_filter_class, typed.plugin_config())
    assert not any(topic_filter.should_replicate_topic(t) for t in ("topic1", "topic2", ""))


def test_a_topics_list_is_trimmed_around_commas() -> None:
    # MirrorSourceConfigTest.testListOfTopics / testAllTopics
    typed = build_flow_config(mm2("clusters = a, b\na->b.topics =  topic1 ,  topic2  \n"), AB)
    assert typed.topics == ("topic1", "topic2")
    topic_filter = load_topic_filter(typed.topic_filter_class, typed.plugin_config())
    assert [topic_filter.should_replicate_topic(t) for t in ("topic1", "topic2", "topic3")] == [True, True, False]


def test_groups_list_reaches_the_group_filter() -> None:
    # MirrorCheckpointConfigTest.testGroupMatching
    typed = build_flow_config(mm2("clusters = a, b\na->b.groups = group1\n"), AB)
    group_filter = load_group_filter(typed.group_filter_class, typed.plugin_config())
    assert group_filter.should_replicate_group("group1")
    assert not group_filter.should_replicate_group("group2")


def test_boolean_keys_accept_any_case_and_surrounding_spaces() -> None:
    config = mm2("""
        clusters = a, b
        a->b.sync.group.offsets.enabled =  TRUE
        a->b.emit.checkpoints.enabled = False
    """)
    typed = build_flow_config(config, AB)
    assert (typed.sync_group_offsets_enabled, typed.emit_checkpoints_enabled) == (True, False)


def test_a_boolean_that_is_not_true_or_false_is_a_config_error() -> None:
    config = mm2("clusters = a, b\na->b.sync.group.offsets.enabled = yes\n")
    with pytest.raises(ConfigError) as caught:
        build_flow_config(config, AB)
    assert caught.value.key == "a->b.sync.group.offsets.enabled"
    assert caught.value.line == 2


def test_offset_syncs_topic_location_is_source_or_target() -> None:
    # MirrorSourceConfigTest.testOffsetSyncsTopic (topic names themselves are tested with the policies)
    assert build_flow_config(mm2("clusters = a, b"), AB).offset_syncs_cluster == "a"
    on_target = mm2("clusters = a, b\na->b.offset-syncs.topic.location = target\n")
    assert build_flow_config(on_target, AB).offset_syncs_cluster == "b"
    with pytest.raises(ConfigError) as caught:
        build_flow_config(mm2("clusters = a, b\na->b.offset-syncs.topic.location = something\n"), AB)
    assert caught.value.key == "a->b.offset-syncs.topic.location"
    assert caught.value.allowed == "source, target"


# -- client layering (MirrorConnectorConfig) -------------------------------------------------------


def test_source_consumer_takes_cluster_connection_keys_and_consumer_keys() -> None:
    # MirrorConnectorConfigTest.testSourceConsumerConfig
    props = connector_map(
        {"consumer.max.poll.interval.ms": "120000", "source.cluster.bootstrap.servers": "localhost:2345"}
    )
    assert plain(client_props(props, "source", "consumer")) == {
        "bootstrap.servers": "localhost:2345",
        "max.poll.interval.ms": "120000",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
    }


def test_consumer_auto_offset_reset_can_be_overridden_but_auto_commit_cannot() -> None:
    # MirrorConnectorConfigTest.testSourceConsumerConfig (second half)
    props = connector_map(
        {
            "consumer.auto.offset.reset": "latest",
            "consumer.enable.auto.commit": "true",
            "source.cluster.bootstrap.servers": "localhost:2345",
        }
    )
    assert plain(client_props(props, "source", "consumer")) == {
        "bootstrap.servers": "localhost:2345",
        "auto.offset.reset": "latest",
        "enable.auto.commit": "false",
    }


def test_source_consumer_keys_with_source_prefix() -> None:
    # MirrorConnectorConfigTest.testSourceConsumerConfigWithSourcePrefix
    props = connector_map(
        {"source.consumer.auto.offset.reset": "latest", "source.consumer.max.poll.interval.ms": "100"}
    )
    assert plain(client_props(props, "source", "consumer")) == {
        "auto.offset.reset": "latest",
        "max.poll.interval.ms": "100",
        "enable.auto.commit": "false",
    }


@pytest.mark.parametrize("key", ["producer.acks", "source.producer.acks"])
def test_source_producer_keys(key: str) -> None:
    # MirrorConnectorConfigTest.testSourceProducerConfig / testSourceProducerConfigWithSourcePrefix
    assert plain(client_props(connector_map({key: "1"}), "source", "producer")) == {"acks": "1"}


@pytest.mark.parametrize(
    ("side", "key"),
    [
        ("source", "admin.connections.max.idle.ms"),
        ("source", "source.admin.connections.max.idle.ms"),
        ("target", "admin.connections.max.idle.ms"),
        ("target", "target.admin.connections.max.idle.ms"),
    ],
)
def test_admin_keys(side: str, key: str) -> None:
    # testSourceAdminConfig(WithSourcePrefix) / testTargetAdminConfig(WithSourcePrefix)
    props = client_props(connector_map({key: "10000"}), "source" if side == "source" else "target", "admin")
    assert plain(props) == {"connections.max.idle.ms": "10000"}


def test_side_prefixed_keys_stay_on_their_side() -> None:
    props = connector_map({"source.admin.request.timeout.ms": "1", "target.admin.send.buffer.bytes": "1"})
    assert plain(client_props(props, "source", "admin")) == {"request.timeout.ms": "1"}
    assert plain(client_props(props, "target", "admin")) == {"send.buffer.bytes": "1"}


def test_only_connection_keys_of_the_cluster_reach_clients() -> None:
    # MirrorConnectorConfig: originalsWithPrefix("source.cluster.") retained to the client ConfigDef names.
    props = connector_map(
        {
            "source.cluster.bootstrap.servers": "a:9092",
            "source.cluster.security.protocol": "SSL",
            "source.cluster.ssl.truststore.location": "/ts.jks",
            "source.cluster.topics": "x",
            "source.cluster.acks": "all",
            "retries": "123",
        }
    )
    assert plain(client_props(props, "source", "producer")) == {
        "bootstrap.servers": "a:9092",
        "security.protocol": "SSL",
        "ssl.truststore.location": "/ts.jks",
    }


def test_connector_keys_with_client_prefixes_are_not_client_settings() -> None:
    # Deliberate difference: MM2 hands `consumer.poll.timeout.ms` to the consumer as `poll.timeout.ms` (an
    # unknown key the Java client ignores); librdkafka would reject it, so mm2py keeps connector keys and
    # producer.override.* (the worker producer's) out of the client maps.
    props = connector_map(
        {
            "consumer.poll.timeout.ms": "500",
            "admin.timeout.ms": "9000",
            "producer.override.acks": "1",
            "producer.linger.ms": "5",
        }
    )
    assert "poll.timeout.ms" not in client_props(props, "source", "consumer")
    assert "timeout.ms" not in client_props(props, "target", "admin")
    assert plain(client_props(props, "source", "producer")) == {"linger.ms": "5"}


def test_client_ids_have_mm2_shape() -> None:
    # testSourceConsumerConfig & co: client.id = <src>-><tgt>|<connector>|<role>
    typed = build_flow_config(
        mm2("""
        clusters = source1, target2
        source1.bootstrap.servers = s:9092
        target2.bootstrap.servers = t:9092
    """),
        Flow("source1", "target2"),
    )
    source = "source1->target2|MirrorSourceConnector|"
    assert java(typed.source_consumer)["client.id"] == source + "replication-consumer"
    assert java(typed.source_admin)["client.id"] == source + "replication-source-admin"
    assert java(typed.target_admin)["client.id"] == source + "replication-target-admin"
    assert java(typed.offset_syncs_producer)["client.id"] == source + "offset-syncs-source-producer"
    assert (
        java(typed.target_consumer)["client.id"]
        == "source1->target2|MirrorCheckpointConnector|checkpoints-target-consumer"
    )
    assert typed.source_consumer is not None
    assert typed.source_consumer.settings()["client.id"] == java(typed.source_consumer)["client.id"]


def test_a_user_client_id_is_kept_in_front() -> None:
    # MirrorConnectorConfig.addClientId: "<user client.id>|<src>-><tgt>|<connector>|<role>"
    typed = build_flow_config(
        mm2("""
        clusters = a, b
        bootstrap.servers = x:9092
        a.consumer.client.id = billing
    """),
        AB,
    )
    assert java(typed.source_consumer)["client.id"] == "billing|a->b|MirrorSourceConnector|replication-consumer"


def test_offset_syncs_producer_is_the_producer_of_the_offset_syncs_side() -> None:
    # MirrorSourceConfigTest.testProducerConfigsForOffsetSyncsTopic
    text = """
        clusters = a, b
        a.bootstrap.servers = a:9092
        b.bootstrap.servers = b:9092
        a->b.source.producer.batch.size = 1
        a->b.target.producer.acks = 1
        a->b.producer.linger.ms = 1
        fetch.min.bytes = 1
    """
    on_source = build_flow_config(mm2(text), AB)
    assert without_client_id(on_source.offset_syncs_producer) == {
        "bootstrap.servers": "a:9092",
        "batch.size": "1",
        "linger.ms": "1",
    }
    assert java(on_source.offset_syncs_producer)["client.id"].endswith("|offset-syncs-source-producer")
    on_target = build_flow_config(mm2(text + "a->b.offset-syncs.topic.location = target\n"), AB)
    assert without_client_id(on_target.offset_syncs_producer) == {
        "bootstrap.servers": "b:9092",
        "acks": "1",
        "linger.ms": "1",
    }
    assert java(on_target.offset_syncs_producer)["client.id"].endswith("|offset-syncs-target-producer")


def test_admins_take_their_side_and_the_shared_admin_keys() -> None:
    # MirrorSourceConfigTest.testAdminConfigsForOffsetSyncsTopic. FlowConfig has one admin per side; MM2's
    # offset-syncs admin is built exactly like the admin of the side the topic lives on.
    typed = build_flow_config(
        mm2("""
        clusters = a, b
        a.bootstrap.servers = a:9092
        b.bootstrap.servers = b:9092
        a->b.source.admin.request.timeout.ms = 1
        a->b.target.admin.send.buffer.bytes = 1
        a->b.admin.reconnect.backoff.max.ms = 1
        retries = 123
    """),
        AB,
    )
    assert without_client_id(typed.source_admin) == {
        "bootstrap.servers": "a:9092",
        "request.timeout.ms": "1",
        "reconnect.backoff.max.ms": "1",
    }
    assert without_client_id(typed.target_admin) == {
        "bootstrap.servers": "b:9092",
        "send.buffer.bytes": "1",
        "reconnect.backoff.max.ms": "1",
    }


def test_consumers_take_their_side_and_the_shared_consumer_keys() -> None:
    # MirrorCheckpointConfigTest.testConsumerConfigsForOffsetSyncsTopic
    typed = build_flow_config(
        mm2("""
        clusters = a, b
        a.bootstrap.servers = a:9092
        b.bootstrap.servers = b:9092
        a->b.source.consumer.max.partition.fetch.bytes = 1
        a->b.target.consumer.heartbeat.interval.ms = 1
        a->b.consumer.max.poll.interval.ms = 1
        fetch.min.bytes = 1
    """),
        AB,
    )
    common = {"enable.auto.commit": "false", "auto.offset.reset": "earliest", "max.poll.interval.ms": "1"}
    assert without_client_id(typed.source_consumer) == {
        "bootstrap.servers": "a:9092",
        "max.partition.fetch.bytes": "1",
        **common,
    }
    assert without_client_id(typed.target_consumer) == {
        "bootstrap.servers": "b:9092",
        "heartbeat.interval.ms": "1",
        **common,
    }


def test_cluster_level_client_keys_beat_flow_level_ones_unless_side_prefixed() -> None:
    # clientConfigsWithPrefix: `a.consumer.x` becomes `source.consumer.x`, the last client layer, so it beats
    # `a->b.consumer.x`; `a->b.source.consumer.x` replaces it for one flow.
    config = mm2("""
        clusters = a, b
        a.bootstrap.servers = a:9092
        b.bootstrap.servers = b:9092
        a.consumer.max.poll.records = 100
        a->b.consumer.max.poll.records = 200
        a.consumer.fetch.min.bytes = 10
        a->b.source.consumer.fetch.min.bytes = 20
        a->b.consumer.bootstrap.servers = elsewhere:9092
    """)
    consumer = java(build_flow_config(config, AB).source_consumer)
    assert consumer["max.poll.records"] == "100"
    assert consumer["fetch.min.bytes"] == "20"
    assert consumer["bootstrap.servers"] == "a:9092"  # cluster bootstrap is spread to consumer.* too


# -- security settings and MirrorClientConfig-style cluster views ----------------------------------


@pytest.fixture
def secrets_file(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.properties"
    path.write_text("password = secret2\n", encoding="utf-8")
    return path


def test_cluster_security_beats_top_level_and_client_security_beats_cluster(secrets_file: Path) -> None:
    # testClientConfigProperties (MirrorClientConfig's view, here through the flow a->b where a is the source)
    config = mm2(f"""
        clusters = a, b
        config.providers = file
        config.providers.file.class = {FILE_PROVIDER}
        replication.policy.separator = __
        ssl.key.password = ${{file:{secrets_file}:password}}
        security.protocol = SSL
        a.security.protocol = PLAINTEXT
        a.producer.security.protocol = SSL
        a.bootstrap.servers = 127.0.0.1:9092, 127.0.0.2:9092
        b.bootstrap.servers = 127.0.0.3:9092, 127.0.0.4:9092
        metrics.reporter = com.example.FakeMetricsReporter
        a.metrics.reporter = com.example.FakeMetricsReporter
        b->a.metrics.reporter = com.example.FakeMetricsReporter
        a.xxx = yyy
        xxx = zzz
    """)
    assert config.provider_problems == []
    a_view = plain(config.cluster_props("a"))
    assert a_view["admin.bootstrap.servers"] == "127.0.0.1:9092, 127.0.0.2:9092"
    assert a_view["admin.security.protocol"] == "PLAINTEXT"
    assert a_view["producer.security.protocol"] == "SSL"
    assert a_view["admin.ssl.key.password"] == "secret2"
    connector = config.connector_props(AB)
    assert connector["replication.policy.separator"].value == "__"
    admin = plain(client_props(connector, "source", "admin"))
    assert admin == {
        "bootstrap.servers": "127.0.0.1:9092, 127.0.0.2:9092",
        "security.protocol": "PLAINTEXT",
        "ssl.key.password": "secret2",
    }
    producer = plain(client_props(connector, "source", "producer"))
    assert producer["security.protocol"] == "SSL"
    assert not any("metric" in key or "xxx" in key for key in (*admin, *producer))
    target_admin = plain(client_props(connector, "target", "admin"))
    assert target_admin["security.protocol"] == "SSL"  # b sets none: the top-level default applies
    assert "metrics.reporter" in plain(config.connector_props(Flow("b", "a")))  # flow-level: verbatim


def test_top_level_security_settings_are_inherited_by_every_cluster() -> None:
    # MirrorMakerConfig.clusterProps: top-level client keys fill in as <k> and producer/consumer/admin.<k>.
    config = mm2("""
        clusters = a, b
        bootstrap.servers = x:9092
        security.protocol = SASL_SSL
        sasl.mechanism = PLAIN
        b.sasl.mechanism = SCRAM-SHA-512
    """)
    for alias, mechanism in (("a", "PLAIN"), ("b", "SCRAM-SHA-512")):
        view = plain(config.cluster_props(alias))
        assert view["security.protocol"] == "SASL_SSL"
        assert view["sasl.mechanism"] == mechanism
        assert view["consumer.sasl.mechanism"] == view["admin.sasl.mechanism"] == mechanism
    connector = config.connector_props(AB)
    assert plain(client_props(connector, "target", "consumer"))["sasl.mechanism"] == "SCRAM-SHA-512"
    assert plain(client_props(connector, "source", "consumer"))["sasl.mechanism"] == "PLAIN"


def test_invalid_security_protocol_is_an_error_naming_the_key() -> None:
    # testInvalidSecurityProtocol (MirrorMakerConfigTest and MirrorConnectorConfigTest).
    # MM2 throws from the constructor; mm2py reports it from validation, with the line.
    config = mm2("""
        clusters = a, b, c
        a->b.emit.heartbeats.enabled = false
        a->c.emit.heartbeats.enabled = false
        security.protocol = abc
    """)
    errors = [p for p in validate(config) if p.severity == "error" and p.key == "security.protocol"]
    assert errors
    assert {p.line for p in errors} == {5}


def test_security_protocol_is_case_insensitive_and_kept_as_written() -> None:
    # testCaseInsensitiveSecurityProtocol (both classes): the Java view keeps the text; librdkafka gets it
    # upper-cased.
    config = mm2("""
        clusters = a, b
        bootstrap.servers = x:9092
        security.protocol = ssl
    """)
    assert not [p for p in validate(config) if p.key == "security.protocol"]
    typed = build_flow_config(config, AB)
    assert java(typed.source_admin)["security.protocol"] == "ssl"
    assert typed.source_admin is not None
    assert typed.source_admin.settings()["security.protocol"] == "SSL"


# -- worker (herder) config ------------------------------------------------------------------------


def test_worker_config_of_each_herder(secrets_file: Path) -> None:
    # testWorkerConfigs
    config = mm2(f"""
        clusters = a, b
        config.providers = file
        config.providers.file.class = {FILE_PROVIDER}
        replication.policy.separator = __
        offset.storage.replication.factor = 123
        b.status.storage.replication.factor = 456
        b.producer.client.id = client-one
        b.security.protocol = PLAINTEXT
        b.producer.security.protocol = SASL
        ssl.truststore.password = secret1
        ssl.key.password = ${{file:{secrets_file}:password}}
        b.xxx = yyy
    """)
    to_a = plain(config.worker_props(Flow("b", "a")))
    assert to_a["client.id"] == "b->a"
    assert to_a["offset.storage.replication.factor"] == "123"
    assert to_a["replication.policy.separator"] == "__"
    assert to_a["config.providers"] == "file"
    to_b = plain(config.worker_props(AB))
    assert to_b["client.id"] == "a->b"
    assert to_b["status.storage.replication.factor"] == "456"
    assert to_b["producer.client.id"] == "client-one"
    assert to_b["producer.security.protocol"] == "SASL"
    assert to_b["consumer.security.protocol"] == "PLAINTEXT"
    assert to_b["ssl.truststore.password"] == to_b["producer.ssl.truststore.password"] == "secret1"
    assert to_b["ssl.key.password"] == to_b["producer.ssl.key.password"] == "secret2"
    assert to_b["replication.policy.separator"] == "__"


def test_worker_defaults_are_named_after_the_source() -> None:
    # MirrorMakerConfig.workerConfig defaults (docs/mm2-semantics.md, *Worker settings*)
    worker = plain(mm2("clusters = a, b").worker_props(AB))
    assert worker["group.id"] == "a-mm2"
    assert worker["offset.storage.topic"] == "mm2-offsets.a.internal"
    assert worker["status.storage.topic"] == "mm2-status.a.internal"
    assert worker["config.storage.topic"] == "mm2-configs.a.internal"


def test_replicated_records_use_the_worker_producer_of_the_target() -> None:
    # docs/mm2-semantics.md, *Client settings*: target cluster-level producer.* and flow-level
    # producer.override.* tune the worker producer; flow-level producer.* only reaches MM2's offset-syncs producer.
    config = mm2("""
        clusters = a, b
        bootstrap.servers = x:9092
        b.producer.linger.ms = 50
        b.producer.acks = all
        a->b.producer.override.acks = 1
        a->b.producer.compression.type = zstd
    """)
    producer = plain(worker_producer_props(config.worker_props(AB), config.connector_props(AB)))
    assert producer == {"bootstrap.servers": "x:9092", "linger.ms": "50", "acks": "1"}
    typed = build_flow_config(config, AB)
    assert without_client_id(typed.target_producer) == producer
    assert java(typed.offset_syncs_producer)["compression.type"] == "zstd"


# -- config providers ------------------------------------------------------------------------------


def test_provider_references_are_resolved_once_for_connector_and_worker(secrets_file: Path) -> None:
    # testLazyConfigResolution. Deliberate difference: MM2 keeps `${...}` in connector configs because its
    # Connect worker resolves them later; mm2py has no worker, so it resolves every value when it reads
    # the file, and the connector sees what MM2's connector sees after the worker resolved it.
    reference = f"${{file:{secrets_file}:password}}"
    config = mm2(f"""
        clusters = a, b
        config.providers = file
        config.providers.file.class = {FILE_PROVIDER}
        ssl.key.password = {reference}
        b->a.topics = {reference}
    """)
    connector = plain(config.connector_props(Flow("b", "a")))
    assert connector["ssl.key.password"] == "secret2"
    assert connector["topics"] == "secret2"
    assert connector["config.providers.file.class"] == FILE_PROVIDER
    assert plain(config.worker_props(Flow("b", "a")))["ssl.key.password"] == "secret2"


def test_env_provider_values_reach_the_cluster_clients() -> None:
    config = mm2(
        f"""
        clusters = a, b
        config.providers = env
        config.providers.env.class = {ENV_PROVIDER}
        a.bootstrap.servers = a:9092
        a.sasl.jaas.config = ${{env:A_JAAS}}
    """,
        environ={"A_JAAS": "jaas-text"},
    )
    assert config.provider_problems == []
    consumer = plain(client_props(config.connector_props(AB), "source", "consumer"))
    assert consumer["sasl.jaas.config"] == "jaas-text"


def test_unresolvable_env_reference_is_reported_and_left_as_written() -> None:
    # Deliberate difference: Kafka's ConfigTransformer silently leaves an unresolvable reference in place;
    # mm2py leaves it too but reports it, so validation can point at the line.
    config = mm2(f"""
        clusters = a, b
        config.providers = env
        config.providers.env.class = {ENV_PROVIDER}
        a.ssl.truststore.password = ${{env:MISSING}}
    """)
    assert config.get("a.ssl.truststore.password") == "${env:MISSING}"
    assert [p.key for p in config.provider_problems] == ["a.ssl.truststore.password"]
    assert "MISSING" in config.provider_problems[0].reason


def test_reference_to_an_undeclared_provider_is_reported() -> None:
    config = mm2("""
        clusters = a, b
        a.sasl.jaas.config = ${vault:secret/kafka:jaas}
    """)
    assert config.get("a.sasl.jaas.config") == "${vault:secret/kafka:jaas}"
    assert len(config.provider_problems) == 1
    assert "vault" in config.provider_problems[0].reason


def test_typed_flow_config_is_built_from_the_resolved_values(secrets_file: Path) -> None:
    config = mm2(f"""
        clusters = a, b
        config.providers = file
        config.providers.file.class = {FILE_PROVIDER}
        bootstrap.servers = x:9092
        a->b.consumer.client.id = ${{file:{secrets_file}:password}}
    """)
    typed: FlowConfig = build_flow_config(config, AB)
    assert java(typed.source_consumer)["client.id"].startswith("secret2|a->b|")

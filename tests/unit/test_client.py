"""MirrorClient without a broker: the topic-name logic ported from MM2's MirrorClientTest, the
MirrorClientConfig view of a properties map, and the decoding rules of checkpoints and heartbeats (fed by a
fake topic reader)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

import mm2py.tools.mirror_client
from mm2py.errors import ConfigError
from mm2py.librdkafka.admin import ClusterAdmin, TopicInfo
from mm2py.mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
from mm2py.mirror.record_formats import Checkpoint, Heartbeat
from mm2py.tools.mirror_client import (
    MirrorClient,
    all_sources,
    checkpoint_topics_in,
    count_hops_for_topic,
    heartbeat_topics_in,
    mirror_client_java_config,
    remote_topics_in,
    replication_hops_in,
    upstream_clusters_in,
)

DEFAULT = DefaultReplicationPolicy()


def identity_policy(alias: str) -> IdentityReplicationPolicy:
    policy = IdentityReplicationPolicy()
    policy.configure({"source.cluster.alias": alias})
    return policy


def separator_policy(separator: str) -> DefaultReplicationPolicy:
    policy = DefaultReplicationPolicy()
    policy.configure({"replication.policy.separator": separator})
    return policy


# -- MirrorClientTest ------------------------------------------------------------------------------------


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
def test_heartbeat_topics_are_the_local_one_and_its_replicas(topic: str, expected: bool) -> None:
    assert (heartbeat_topics_in(DEFAULT, [topic]) == {topic}) is expected


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("source1.checkpoints.internal", True),
        ("checkpoints.internal", False),
        ("checkpoints-internal", False),
        ("checkpoints.internal!", False),
        ("!checkpoints.internal", False),
        ("source1checkpointsinternal", False),
    ],
)
def test_checkpoint_topics_need_a_source_alias(topic: str, expected: bool) -> None:
    assert (checkpoint_topics_in(DEFAULT, [topic]) == {topic}) is expected


@pytest.mark.parametrize(
    ("topic", "alias", "hops"),
    [
        ("topic", "source", -1),
        ("source", "source", -1),
        ("sourcetopic", "source", -1),
        ("source1.topic", "source2", -1),
        ("source1.topic", "source1", 1),
        ("source2.source1.topic", "source2", 1),
        ("source2.source1.topic", "source1", 2),
        ("source3.source2.source1.topic", "source1", 3),
        ("source3.source2.source1.topic", "source4", -1),
    ],
)
def test_hops_for_a_topic_count_aliases_up_to_the_source(topic: str, alias: str, hops: int) -> None:
    assert count_hops_for_topic(DEFAULT, topic, alias) == hops


def test_heartbeat_topics_are_picked_out_of_all_topics() -> None:
    topics = [
        "topic1",
        "topic2",
        "heartbeats",
        "source1.heartbeats",
        "source2.source1.heartbeats",
        "source3.heartbeats",
    ]
    assert heartbeat_topics_in(DEFAULT, topics) == {
        "heartbeats",
        "source1.heartbeats",
        "source2.source1.heartbeats",
        "source3.heartbeats",
    }


def test_checkpoint_topics_are_picked_out_of_all_topics() -> None:
    topics = [
        "topic1",
        "topic2",
        "checkpoints.internal",
        "source1.checkpoints.internal",
        "source2.source1.checkpoints.internal",
        "source3.checkpoints.internal",
    ]
    assert checkpoint_topics_in(DEFAULT, topics) == {
        "source1.checkpoints.internal",
        "source2.source1.checkpoints.internal",
        "source3.checkpoints.internal",
    }


def test_replication_hops_are_the_shortest_path_over_heartbeat_topics() -> None:
    topics = [
        "topic1",
        "topic2",
        "heartbeats",
        "source1.heartbeats",
        "source1.source2.heartbeats",
        "source3.heartbeats",
    ]
    assert replication_hops_in(DEFAULT, topics, "source1") == 1
    assert replication_hops_in(DEFAULT, topics, "source2") == 2
    assert replication_hops_in(DEFAULT, topics, "source3") == 1
    assert replication_hops_in(DEFAULT, topics, "source4") == -1


def test_replication_hops_take_the_minimum_when_a_cluster_is_reachable_two_ways() -> None:
    topics = ["a.b.heartbeats", "b.heartbeats"]
    assert replication_hops_in(DEFAULT, topics, "b") == 1


def test_replication_hops_ignore_remote_topics_that_are_not_heartbeats() -> None:
    assert replication_hops_in(DEFAULT, ["source1.orders"], "source1") == -1


UPSTREAM_TOPICS = [
    "topic1",
    "topic2",
    "heartbeats",
    "source1.heartbeats",
    "source1.source2.heartbeats",
    "source3.source4.source5.heartbeats",
]


def test_upstream_clusters_are_every_alias_along_every_heartbeat_chain() -> None:
    assert upstream_clusters_in(DEFAULT, UPSTREAM_TOPICS) == {"source1", "source2", "source3", "source4", "source5"}


def test_upstream_clusters_work_with_the_identity_policy() -> None:
    # IdentityReplicationPolicy keeps prefixing heartbeats, so discovery works as with the default policy.
    assert upstream_clusters_in(identity_policy("source"), UPSTREAM_TOPICS) == {
        "source1",
        "source2",
        "source3",
        "source4",
        "source5",
    }


def test_remote_topics_are_those_with_a_source_alias() -> None:
    topics = [
        "topic1",
        "topic2",
        "topic3",
        "source1.topic4",
        "source1.source2.topic5",
        "source3.source4.source5.topic6",
    ]
    assert remote_topics_in(DEFAULT, topics) == {
        "source1.topic4",
        "source1.source2.topic5",
        "source3.source4.source5.topic6",
    }


def test_identity_policy_considers_every_topic_remote_except_local_heartbeats() -> None:
    topics = ["topic1", "topic2", "topic3", "heartbeats", "backup.heartbeats"]
    assert remote_topics_in(identity_policy("source"), topics) == {"topic1", "topic2", "topic3", "backup.heartbeats"}


def test_remote_topics_follow_a_custom_separator() -> None:
    topics = [
        "topic1",
        "topic2",
        "topic3",
        "source1__topic4",
        "source1__source2__topic5",
        "source3__source4__source5__topic6",
    ]
    assert remote_topics_in(separator_policy("__"), topics) == {
        "source1__topic4",
        "source1__source2__topic5",
        "source3__source4__source5__topic6",
    }


def test_identity_policy_keeps_names_and_reports_the_configured_source() -> None:
    policy = identity_policy("primary")
    assert policy.format_remote_topic("primary", "topic1") == "topic1"
    assert policy.topic_source("topic1") == "primary"
    assert policy.format_remote_topic("backup", "heartbeats") == "backup.heartbeats"
    assert policy.topic_source("backup.heartbeats") == "backup"


# -- beyond MirrorClientTest ----------------------------------------------------------------------------


def test_remote_topics_from_one_source_are_only_those_replicated_directly_from_it() -> None:
    topics = ["source1.topic4", "source1.source2.topic5", "source3.topic6", "source1.checkpoints.internal"]
    assert remote_topics_in(DEFAULT, topics, "source1") == {"source1.topic4", "source1.source2.topic5"}
    assert remote_topics_in(DEFAULT, topics, "source2") == set()


def test_a_policy_that_cannot_prevent_cycles_answers_minus_one_instead_of_looping() -> None:
    # Identity: topic_source("orders") is always "source" and upstream_topic("orders") is "orders" again.
    policy = identity_policy("source")
    assert count_hops_for_topic(policy, "orders", "elsewhere") == -1
    assert count_hops_for_topic(policy, "orders", "source") == 1
    assert all_sources(policy, "orders") == {"source"}


def test_all_sources_stop_at_a_repeated_alias() -> None:
    assert all_sources(DEFAULT, "a.b.a.heartbeats") == {"a", "b"}
    assert all_sources(DEFAULT, "heartbeats") == set()


# -- MirrorClientConfig -----------------------------------------------------------------------------------


def test_client_settings_keep_only_connection_keys_with_prefixed_overrides() -> None:
    props = {
        "bootstrap.servers": "a:9092",
        "security.protocol": "PLAINTEXT",
        "client.id": "mine",
        "consumer.client.id": "mm2-client",
        "consumer.bootstrap.servers": "b:9092",
        "admin.request.timeout.ms": "5",
        "replication.policy.separator": "__",
    }
    assert mirror_client_java_config(props, "consumer") == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "PLAINTEXT",
    }
    assert mirror_client_java_config(props, "admin") == {
        "bootstrap.servers": "a:9092",
        "security.protocol": "PLAINTEXT",
    }


def test_from_properties_translates_connection_keys_for_librdkafka() -> None:
    client = MirrorClient.from_properties(
        {"bootstrap.servers": " a:9092 , b:9092 ", "consumer.client.id": "x", "admin.security.protocol": "plaintext"},
        alias="dc1",
    )
    assert client.consumer_settings == {"bootstrap.servers": "a:9092,b:9092"}
    assert client.admin_settings == {"bootstrap.servers": "a:9092,b:9092"}  # PLAINTEXT: librdkafka's default
    assert client.alias == "dc1"
    assert isinstance(client.policy, DefaultReplicationPolicy)


def test_from_properties_configures_the_policy_with_the_separator_keys() -> None:
    client = MirrorClient.from_properties({"bootstrap.servers": "a:9092", "replication.policy.separator": "__"})
    assert client.policy.checkpoints_topic("dc1") == "dc1__checkpoints__internal"
    legacy = MirrorClient.from_properties(
        {
            "bootstrap.servers": "a:9092",
            "replication.policy.separator": "__",
            "replication.policy.internal.topic.separator.enabled": "false",
        }
    )
    assert legacy.policy.checkpoints_topic("dc1") == "dc1.checkpoints.internal"
    assert legacy.policy.format_remote_topic("dc1", "orders") == "dc1__orders"


def test_from_properties_loads_the_identity_policy_with_its_source_alias() -> None:
    client = MirrorClient.from_properties(
        {
            "bootstrap.servers": "a:9092",
            "replication.policy.class": "IdentityReplicationPolicy",
            "source.cluster.alias": "primary",
        }
    )
    assert isinstance(client.policy, IdentityReplicationPolicy)
    assert client.policy.topic_source("orders") == "primary"


def test_from_properties_requires_bootstrap_servers() -> None:
    with pytest.raises(ConfigError) as caught:
        MirrorClient.from_properties({"consumer.client.id": "x"}, alias="dc9")
    assert caught.value.key == "bootstrap.servers"
    assert "dc9" in caught.value.reason


def test_from_properties_names_the_prefixed_key_that_is_wrong() -> None:
    with pytest.raises(ConfigError) as caught:
        MirrorClient.from_properties({"bootstrap.servers": "a:9092", "consumer.security.protocol": "TLS"})
    assert (caught.value.key, caught.value.value) == ("consumer.security.protocol", "TLS")
    assert caught.value.allowed is not None and "SASL_SSL" in caught.value.allowed


def test_from_properties_rejects_an_unknown_policy_class() -> None:
    with pytest.raises(ConfigError) as caught:
        MirrorClient.from_properties(
            {"bootstrap.servers": "a:9092", "replication.policy.class": "org.apache.kafka.connect.mirror.Nope"}
        )
    assert caught.value.key == "replication.policy.class"
    assert "DefaultReplicationPolicy" in caught.value.reason


def test_from_properties_rejects_a_non_boolean_internal_separator_flag() -> None:
    with pytest.raises(ConfigError) as caught:
        MirrorClient.from_properties(
            {"bootstrap.servers": "a:9092", "replication.policy.internal.topic.separator.enabled": "yes"}
        )
    assert caught.value.key == "replication.policy.internal.topic.separator.enabled"


def test_from_properties_logs_its_settings_with_secrets_masked(caplog: pytest.LogCaptureFixture) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret-pw";'
    with caplog.at_level(logging.INFO, logger="mm2py.tools.mirror_client"):
        client = MirrorClient.from_properties(
            {
                "bootstrap.servers": "a:9092",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": jaas,
            }
        )
    assert client.consumer_settings["sasl.password"] == "s3cret-pw"
    assert "mirror client cluster=cluster" in caplog.text
    assert "s3cret-pw" not in caplog.text


# -- reading checkpoints and heartbeats (fake reader) -------------------------------------------------------


@dataclass
class FakeMessage:
    key_bytes: bytes | None
    value_bytes: bytes | None
    offset_value: int

    def key(self) -> bytes | None:
        return self.key_bytes

    def value(self) -> bytes | None:
        return self.value_bytes

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.offset_value


def fake_topics(monkeypatch: pytest.MonkeyPatch, contents: Mapping[str, list[Checkpoint | Heartbeat | bytes]]) -> None:
    """Serve ``contents`` as the cluster's topics; ``bytes`` entries are undecodable (key and value)."""

    def read_topic(
        alias: str, settings: Mapping[str, str], topic: str, *, purpose: str, timeout_s: float = 30.0
    ) -> Iterator[FakeMessage]:
        for offset, item in enumerate(contents.get(topic, [])):
            if isinstance(item, bytes):
                yield FakeMessage(item, item, offset)
            else:
                yield FakeMessage(item.record_key(), item.record_value(), offset)

    def list_topics(self: ClusterAdmin) -> dict[str, TopicInfo]:
        return {name: TopicInfo(name, 1) for name in contents}

    monkeypatch.setattr(mm2py.tools.mirror_client, "read_topic", read_topic)
    monkeypatch.setattr(ClusterAdmin, "list_topics", list_topics)


def client(policy: ReplicationPolicy = DEFAULT) -> MirrorClient:
    return MirrorClient("target", {"bootstrap.servers": "unused:1"}, {"bootstrap.servers": "unused:1"}, policy)


def test_remote_consumer_offsets_keep_the_last_checkpoint_per_partition_of_the_group(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_topics(
        monkeypatch,
        {
            "dc1.checkpoints.internal": [
                Checkpoint("g1", "dc1.orders", 0, 100, 90),
                Checkpoint("g2", "dc1.orders", 0, 500, 480),
                b"\x00",
                Checkpoint("g1", "dc1.orders", 1, 7, 7),
                Checkpoint("g1", "dc1.orders", 0, 120, 111),
            ],
            "dc2.checkpoints.internal": [Checkpoint("g1", "dc2.orders", 0, 1, 1)],
        },
    )
    with caplog.at_level(logging.WARNING, logger="mm2py.tools.mirror_client"):
        offsets = client().remote_consumer_offsets("g1", "dc1")
    assert offsets == {("dc1.orders", 0): 111, ("dc1.orders", 1): 7}
    assert (
        "skipping undecodable record cluster=target topic=dc1.checkpoints.internal partition=0 offset=2" in caplog.text
    )


def test_remote_consumer_offsets_of_an_unknown_group_or_cluster_are_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_topics(monkeypatch, {"dc1.checkpoints.internal": [Checkpoint("g1", "dc1.orders", 0, 1, 1)]})
    assert client().remote_consumer_offsets("other", "dc1") == {}
    assert client().remote_consumer_offsets("g1", "dc7") == {}


def test_checkpoints_are_read_from_the_topic_the_policy_names(monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = Checkpoint("g1", "dc1__orders", 0, 1, 1, "meta")
    fake_topics(
        monkeypatch,
        {
            "dc1__checkpoints__internal": [checkpoint, b""],
            "dc1.checkpoints.internal": [Checkpoint("g1", "wrong", 0, 2, 2)],
        },
    )
    assert client(separator_policy("__")).checkpoints("dc1") == [checkpoint]


def test_latest_heartbeats_keep_the_newest_per_flow_across_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_topics(
        monkeypatch,
        {
            "heartbeats": [Heartbeat("dc1", "target", 20), Heartbeat("dc1", "target", 10), b"junk"],
            "dc1.heartbeats": [Heartbeat("dc0", "dc1", 5)],
            "dc2.dc1.heartbeats": [Heartbeat("dc0", "dc1", 8)],
            "dc1.orders": [b"not read"],
        },
    )
    assert client().latest_heartbeats() == {
        ("dc1", "target"): Heartbeat("dc1", "target", 20),
        ("dc0", "dc1"): Heartbeat("dc0", "dc1", 8),
    }


def test_client_methods_answer_from_the_cluster_topic_list(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_topics(
        monkeypatch,
        {
            name: []
            for name in (
                "heartbeats",
                "dc1.heartbeats",
                "dc1.dc0.heartbeats",
                "dc1.checkpoints.internal",
                "dc1.orders",
                "orders",
            )
        },
    )
    mirror = client()
    assert mirror.heartbeat_topics() == {"heartbeats", "dc1.heartbeats", "dc1.dc0.heartbeats"}
    assert mirror.checkpoint_topics() == {"dc1.checkpoints.internal"}
    assert mirror.upstream_clusters() == {"dc1", "dc0"}
    assert (mirror.replication_hops("dc1"), mirror.replication_hops("dc0"), mirror.replication_hops("x")) == (1, 2, -1)
    assert mirror.remote_topics() == {"dc1.heartbeats", "dc1.dc0.heartbeats", "dc1.orders"}
    assert mirror.remote_topics("dc0") == set()

"""MirrorClient against a real broker holding MM2's topics as Java MM2 writes them.

The records are produced as raw bytes (built by mm2py.mirror.record_formats, which is pinned to MM2's verified
test vectors, plus one checkpoint written straight from a Java-produced vector), so reading them back proves the client
answers from what a running MM2 leaves on a cluster.
"""

from __future__ import annotations

import logging

import pytest

from mm2py.mirror.record_formats import Checkpoint, Heartbeat
from mm2py.tools.mirror_client import MirrorClient
from tests.harness.kafka_harness import ClusterFactory, Record, create_topic, list_topics, produce

pytestmark = pytest.mark.integration

NOW_MS = 1_700_000_000_000
# Checkpoint C3 of the reference's verified vectors, as Java's Checkpoint.serializeKey/Value write it:
# group consumer-group-1, topic primary.test-topic-1, partition 9, upstream 1234567, downstream 1234500.
JAVA_C3_KEY = bytes.fromhex("0010636f6e73756d65722d67726f75702d3100147072696d6172792e746573742d746f7069632d3100000009")
JAVA_C3_VALUE = bytes.fromhex("0000000000000012d687000000000012d6440000")


def record(key: bytes | None, value: bytes | None, timestamp: int = NOW_MS) -> Record:
    return Record(key, value, [], timestamp, 0)


def checkpoint(cp: Checkpoint) -> Record:
    return record(cp.record_key(), cp.record_value())


def heartbeat(hb: Heartbeat) -> Record:
    return record(hb.record_key(), hb.record_value(), hb.timestamp)


@pytest.fixture
def target(kafka_cluster: ClusterFactory) -> str:
    """A 'target' cluster as MM2 leaves it after flows dc0->dc1->target and dc1->target."""
    bootstrap = kafka_cluster("target")["target"].bootstrap
    for topic in ("dc1.checkpoints.internal", "heartbeats", "dc1.heartbeats", "dc1.orders", "orders"):
        create_topic(bootstrap, topic, 1)
    produce(
        bootstrap,
        "dc1.checkpoints.internal",
        [
            checkpoint(Checkpoint("app", "dc1.orders", 0, 100, 90)),
            checkpoint(Checkpoint("other", "dc1.orders", 0, 500, 480)),
            record(b"\x00\x05bad", b"\x00"),  # truncated: MM2 logs and skips it
            checkpoint(Checkpoint("app", "dc1.orders", 1, 40, 38, "meta")),
            checkpoint(Checkpoint("app", "dc1.orders", 0, 120, 111)),
            record(JAVA_C3_KEY, JAVA_C3_VALUE),
        ],
    )
    produce(
        bootstrap,
        "heartbeats",
        [
            heartbeat(Heartbeat("dc1", "target", NOW_MS)),
            heartbeat(Heartbeat("dc1", "target", NOW_MS + 1000)),
            record(None, None),  # a tombstone is not a heartbeat
        ],
    )
    produce(bootstrap, "dc1.heartbeats", [heartbeat(Heartbeat("dc0", "dc1", NOW_MS + 500))])
    return bootstrap


def test_remote_consumer_offsets_translate_a_group_from_mm2_checkpoints(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = MirrorClient.from_properties({"bootstrap.servers": target}, alias="target")
    with caplog.at_level(logging.WARNING, logger="mm2py.tools.mirror_client"):
        offsets = client.remote_consumer_offsets("app", "dc1", timeout_s=20)
    assert offsets == {("dc1.orders", 0): 111, ("dc1.orders", 1): 38}
    assert (
        "skipping undecodable record cluster=target topic=dc1.checkpoints.internal partition=0 offset=2" in caplog.text
    )
    assert client.remote_consumer_offsets("consumer-group-1", "dc1", timeout_s=20) == {
        ("primary.test-topic-1", 9): 1234500
    }
    checkpoints = client.checkpoints("dc1", timeout_s=20)
    assert len(checkpoints) == 5
    assert checkpoints[2] == Checkpoint("app", "dc1.orders", 1, 40, 38, "meta")


def test_offsets_of_a_cluster_without_checkpoints_are_empty_and_create_nothing(target: str) -> None:
    client = MirrorClient.from_properties({"bootstrap.servers": target}, alias="target")
    assert client.remote_consumer_offsets("app", "dc9", timeout_s=20) == {}
    assert "dc9.checkpoints.internal" not in list_topics(target)


def test_latest_heartbeats_and_topology_come_from_the_heartbeat_topics(target: str) -> None:
    client = MirrorClient.from_properties({"bootstrap.servers": target}, alias="target")
    assert client.latest_heartbeats(timeout_s=20) == {
        ("dc1", "target"): Heartbeat("dc1", "target", NOW_MS + 1000),
        ("dc0", "dc1"): Heartbeat("dc0", "dc1", NOW_MS + 500),
    }
    assert client.heartbeat_topics() == {"heartbeats", "dc1.heartbeats"}
    assert client.checkpoint_topics() == {"dc1.checkpoints.internal"}
    assert client.upstream_clusters() == {"dc1"}
    assert client.replication_hops("dc1") == 1
    assert client.replication_hops("dc0") == -1  # dc0's heartbeats reach target only once dc1 replicates them
    assert client.remote_topics() == {"dc1.heartbeats", "dc1.orders"}
    assert client.remote_topics("dc1") == {"dc1.heartbeats", "dc1.orders"}


def test_two_hop_upstream_is_found_once_its_heartbeats_are_replicated(target: str) -> None:
    create_topic(target, "dc1.dc0.heartbeats", 1)
    produce(target, "dc1.dc0.heartbeats", [heartbeat(Heartbeat("dcx", "dc0", NOW_MS))])
    client = MirrorClient.from_properties({"bootstrap.servers": target}, alias="target")
    assert client.upstream_clusters() == {"dc1", "dc0"}
    assert (client.replication_hops("dc1"), client.replication_hops("dc0")) == (1, 2)
    assert client.latest_heartbeats(timeout_s=20)[("dcx", "dc0")] == Heartbeat("dcx", "dc0", NOW_MS)

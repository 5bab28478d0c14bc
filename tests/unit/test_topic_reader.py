"""The batch path's topic reader (wire/topic_reader.py), with which a retried copy task reads its predecessor's
progress, against a fake cluster of three brokers: every record of every partition once, in offset order, empty
partitions included, through a lost leader; deleted first records fail the read
naming the partition."""

from __future__ import annotations

import pytest

from mm2py.errors import ReplicationError
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.errors import OFFSET_OUT_OF_RANGE, WireError
from mm2py.wire.topic_reader import read_topic
from tests.harness.fake_cluster import FakeCluster

TOPIC = "mm2-offsets.dc1.internal"


def batch(first: int, count: int) -> bytes:
    return bytes(encode_batch([Record(i, 1_000, b"k%d" % (first + i), b"v%d" % (first + i)) for i in range(count)]))


def loaded(cluster: FakeCluster, sizes: dict[int, list[int]]) -> list[tuple[bytes, bytes]]:
    """Loads partition p with batches of ``sizes[p]`` records; returns every record, partition by partition."""
    cluster.create(TOPIC, len(sizes))
    expected = []
    for p, counts in sizes.items():
        first = 1_000 * p
        for count in counts:
            cluster.partitions[(TOPIC, p)].load([batch(first, count)])
            expected += [(b"k%d" % n, b"v%d" % n) for n in range(first, first + count)]
            first += count
    return expected


def test_every_record_of_every_partition_once_in_order_empty_partitions_included() -> None:
    cluster = FakeCluster()
    expected = loaded(cluster, {0: [3, 4, 5], 1: [], 2: [1]})

    assert read_topic(cluster, TOPIC, read_committed=True, timeout_s=30, purpose="test") == expected


def test_a_leader_lost_during_the_read_costs_nothing_and_repeats_nothing() -> None:
    cluster = FakeCluster()
    expected = loaded(cluster, {0: [2] * 50, 1: [2] * 50})
    leader = cluster.partitions[(TOPIC, 0)].leader
    cluster.kill(leader)  # its partitions move to another replica after the session timeout

    assert read_topic(cluster, TOPIC, read_committed=False, timeout_s=60, purpose="test") == expected
    assert cluster.partitions[(TOPIC, 0)].leader != leader  # read from the new leader


def test_deleted_first_records_fail_the_read_naming_the_partition() -> None:
    cluster = FakeCluster()
    loaded(cluster, {0: [2], 1: [2]})
    cluster.inject = lambda kind, node, key: WireError(OFFSET_OUT_OF_RANGE) if key == (TOPIC, 1) else None

    with pytest.raises(ReplicationError, match=rf"resuming: reading {TOPIC}-1 on fake failed: .*OFFSET_OUT_OF_RANGE"):
        read_topic(cluster, TOPIC, read_committed=True, timeout_s=30, purpose="resuming")

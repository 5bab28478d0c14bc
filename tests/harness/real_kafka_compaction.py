"""Compaction by Kafka's real log cleaner, within a test: topic settings and a driver that waits for it.

Why: anything mm2py reads back from a compacted topic (offset syncs, checkpoints, its own progress) must
be checked against what the cleaner leaves, not against the full history tansu keeps. The broker side is
set up by ``real_kafka.KafkaCluster`` (``log.cleaner.backoff.ms=2000``, a small dedupe buffer).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.harness.kafka_harness import Record, client_config, produce, read_all

if TYPE_CHECKING:
    from tests.harness.real_kafka import KafkaCluster

# Per-topic settings under which the log cleaner compacts within a few seconds (see await_compaction).
COMPACTED_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # the next append 100 ms after a segment opened rolls it; only closed ones are cleaned
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "100",  # tombstones disappear soon after the cleaner has kept them once
}


def newest_per_key(records: Iterable[Record]) -> dict[int, list[Record]]:
    """Per partition, the newest record of every key in offset (production) order: what compaction keeps."""
    newest: dict[int, dict[bytes | None, tuple[int, Record]]] = {}
    for position, record in enumerate(records):
        newest.setdefault(record.partition, {})[record.key] = (position, record)
    return {p: [r for _, r in sorted(by_key.values(), key=lambda pr: pr[0])] for p, by_key in newest.items()}


def _shape(records: Iterable[Record], drop_tombstones: bool) -> dict[int, list[tuple[Any, ...]]]:
    shaped: dict[int, list[tuple[Any, ...]]] = {}
    for r in records:
        if not (drop_tombstones and r.value is None):
            shaped.setdefault(r.partition, []).append((r.key, r.value, tuple(r.headers)))
    return shaped


def await_compaction(
    cluster: KafkaCluster, topic: str, produced: list[Record], partitions: int, timeout: float = 60.0
) -> list[Record]:
    """Drive the log cleaner until a full read of ``topic`` holds exactly the newest record per key.

    Kafka never cleans a partition's active segment, and rolls it (``segment.ms``) only on an append. So
    every round appends one record per partition whose key was never used (``seal-...``): it closes the
    segment that holds the versions without adding a second version of any key. Seal records are appended
    to ``produced``. Tombstones count as cleaned whether or not the cleaner has dropped them yet.
    Returns the final read.
    """
    seal = f"seal-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + timeout
    for round_ in itertools.count():
        seals = [
            Record(f"{seal}-{round_}".encode(), b"seal", [], int(time.time() * 1000), p) for p in range(partitions)
        ]
        produce(cluster.bootstrap, topic, seals)
        produced.extend(seals)
        expected = [r for records in newest_per_key(produced).values() for r in records]
        read = read_all(cluster.bootstrap, topic)
        keys = [(r.partition, r.key) for r in read]
        if len(keys) == len(set(keys)) and _shape(read, True) == _shape(expected, True):
            return read
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{topic} not compacted after {timeout} s: {len(read)} records read, {len(expected)} expected"
            )
        time.sleep(0.2)  # poll interval; each round's seal record also rolls the segment of the last one
    raise AssertionError("unreachable")


def alter_topic_config(cluster: KafkaCluster, topic: str, config: dict[str, str]) -> None:
    """SET ``config`` on an existing topic (IncrementalAlterConfigs), e.g. to make the cleaner compact it soon."""
    admin = AdminClient(client_config(cluster.bootstrap))
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    futures = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)]
    )
    for future in futures.values():
        future.result(timeout=30)


def compact_in_place(
    cluster: KafkaCluster, topic: str, seal: Callable[[str, int], tuple[bytes, bytes]], timeout: float = 60.0
) -> tuple[list[Record], list[Record]]:
    """Make the log cleaner compact a topic another program wrote (mm2py's internal topics), then prove it did.

    The topic gets COMPACTED_TOPIC_CONFIG; then each round appends one *seal* record per partition with a key
    never used before (``seal(name, partition)`` -> key, value, so it can be well-formed for the topic's readers),
    which rolls the active segment, until a full read holds every (partition, key) once. Returns what the
    topic held before (nothing may write to it meanwhile) and the final read.
    """
    before = read_all(cluster.bootstrap, topic, isolation_level="read_uncommitted")
    partitions = len(
        AdminClient(client_config(cluster.bootstrap)).list_topics(topic, timeout=10).topics[topic].partitions
    )
    alter_topic_config(cluster, topic, COMPACTED_TOPIC_CONFIG)
    token = uuid.uuid4().hex[:8]
    deadline = time.monotonic() + timeout
    for round_ in itertools.count():
        seals = []
        for p in range(partitions):
            key, value = seal(f"seal-{token}-{round_}", p)
            seals.append(Record(key, value, [], int(time.time() * 1000), p))
        produce(cluster.bootstrap, topic, seals)
        read = read_all(cluster.bootstrap, topic, isolation_level="read_uncommitted")
        keys = [(r.partition, r.key) for r in read]
        if len(keys) == len(set(keys)):
            return before, read
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{topic} not compacted after {timeout} s: {len(read)} records, "
                f"{len(keys) - len(set(keys))} older versions of keys left"
            )
        time.sleep(0.2)  # poll interval; each round's seal also rolls the segment of the previous one
    raise AssertionError("unreachable")

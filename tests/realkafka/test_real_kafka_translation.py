"""Offset translation after Kafka's log cleaner compacted every compacted internal topic (real brokers only).

tansu never compacts, so elsewhere the history of ``mm2-offset-syncs.*`` is always complete. Here the cleaner
really leaves one sync per partition there, and translation of lagging groups must still be exact because
mm2py's dense syncs live in a delete-policy topic. The topic is a merge: two sources, one remote topic
(IdentityReplicationPolicy). dc1 is real Kafka with its syncs on itself (the default location); dc2 is a tansu
broker whose syncs go to the real target (``offset-syncs.topic.location = target``), so both locations of
the syncs topic are compacted for real.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mm2py.mirror.record_formats import Checkpoint, Heartbeat, OffsetSync, source_offset_key, source_offset_value
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    commit_group,
    create_topic,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_compaction import compact_in_place, newest_per_key
from tests.harness.real_kafka_mm2 import IDENTITY, latest_checkpoints, unique_alias, write_real_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

Seal = Callable[[str, int], tuple[bytes, bytes]]


def _sync_seal(name: str, _p: int) -> tuple[bytes, bytes]:
    sync = OffsetSync(name, 0, 0, 0)  # an offset sync of a topic that does not exist: ignored by translation
    return sync.record_key(), sync.record_value()


def _progress_seal(name: str, p: int) -> tuple[bytes, bytes]:
    return source_offset_key(name, name, p), source_offset_value(0)


def _checkpoint_seal(name: str, _p: int) -> tuple[bytes, bytes]:
    checkpoint = Checkpoint(name, name, 0, 0, 0)
    return checkpoint.record_key(), checkpoint.record_value()


def _heartbeat_seal(name: str, _p: int) -> tuple[bytes, bytes]:
    heartbeat = Heartbeat(name, name, int(time.time() * 1000))
    return heartbeat.record_key(), heartbeat.record_value()


def _lease_seal(name: str, _p: int) -> tuple[bytes, bytes]:
    return f"{name}->{name}".encode(), json.dumps({"holder": name, "since": 0}).encode()


def _translate(config: Path, group: str, source: str, target: str) -> list[dict[str, Any]]:
    out = mm2py("translate-offsets", str(config), "--group", group, "--source", source, "--target", target, "--json")
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def _assert_exact(source: list[Record], target: list[Record], partition: int, g: int, d: int) -> None:
    """A target consumer resuming at ``d`` sees exactly this source's records from ``g`` on: none lost, none twice."""
    ours = {r.value for r in source if r.partition == partition}
    expected = [r.value for r in source if r.partition == partition and r.offset >= g]
    resumed = [r.value for r in target if r.partition == partition and r.offset >= d and r.value in ours]
    assert resumed == expected, f"partition {partition}: from {d} got {len(resumed)}, expected {len(expected)}"


def test_translation_and_checkpoints_stay_exact_after_the_cleaner_compacted_the_internal_topics(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    kafka_cluster: ClusterFactory,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    dc1, dc2, tgt = unique_alias("dc"), unique_alias("dc"), unique_alias("tgt")
    tansu = kafka_cluster("dc2")["dc2"]
    topic = unique_topic("orders")
    real_kafka.create_topic(topic, partitions=2)
    create_topic(tansu.bootstrap, topic, 2)
    produce(real_kafka.bootstrap, topic, make_records(600, partitions=2, seed=1, with_headers=False))
    produce(tansu.bootstrap, topic, make_records(600, partitions=2, seed=2, with_headers=False))
    config = write_real_config(
        tmp_path / "mm2.properties",
        {dc1: real_kafka.bootstrap, dc2: tansu.bootstrap, tgt: real_kafka_target.bootstrap},
        (
            f"{dc1}->{tgt}.enabled = true\n{dc2}->{tgt}.enabled = true\n"
            f"{dc2}->{tgt}.offset-syncs.topic.location = target\n"
            f"topics = {topic}\ngroups = (behind|end)-.*\nreplication.policy.class = {IDENTITY}\n"
            "mm2py.range.max.records = 100\n"
        ),
    )  # several ranges: many syncs, and both flows interleave in the merge
    groups = {
        dc1: {"behind": {0: 17, 1: 113}, "end": {0: 300, 1: 300}},
        dc2: {"behind": {0: 31, 1: 350}, "end": {0: 400, 1: 400}},
    }
    bootstraps = {dc1: real_kafka.bootstrap, dc2: tansu.bootstrap}

    # dc2's first records land alone; then both flows copy together, so dc1 sits behind and between dc2.
    for alias, bootstrap in bootstraps.items():  # earlier positions: checkpoints exist before compaction
        commit_group(bootstrap, f"behind-{alias}", topic, {0: 3, 1: 2})
        commit_group(bootstrap, f"end-{alias}", topic, {0: 100, 1: 100})
    first = mm2py("run", str(config), "--once", "--flows", f"{dc2}->{tgt}")
    assert first.returncode == 0, first.stderr
    produce(tansu.bootstrap, topic, make_records(200, partitions=2, seed=9, with_headers=False))
    commit_group(tansu.bootstrap, f"end-{dc2}", topic, {0: 200, 1: 200})  # moved: checkpointed again
    second = mm2py("run", str(config), "--once")
    assert second.returncode == 0, second.stderr
    for alias, bootstrap in bootstraps.items():
        for name, offsets in groups[alias].items():
            commit_group(bootstrap, f"{name}-{alias}", topic, offsets)
    record_property("replicate_seconds", round(time.monotonic() - started, 1))

    compacting = time.monotonic()
    compacted: list[tuple[KafkaCluster, str, Seal]] = [
        (real_kafka, f"mm2-offset-syncs.{tgt}.internal", _sync_seal),
        (real_kafka_target, f"mm2-offset-syncs.{dc2}.internal", _sync_seal),
        *((real_kafka_target, f"mm2-offsets.{a}.internal", _progress_seal) for a in (dc1, dc2)),
        *((real_kafka_target, f"{a}.checkpoints.internal", _checkpoint_seal) for a in (dc1, dc2)),
        (real_kafka_target, "heartbeats", _heartbeat_seal),
        (real_kafka_target, "mm2py-leases.internal", _lease_seal),
    ]
    # Tests on the other worker write heartbeats and leases of their own flows to the shared target meanwhile:
    # in those two topics only this test's keys (named after its aliases) are compared.
    shared = {"heartbeats", "mm2py-leases.internal"}
    aliases = [a.encode() for a in (dc1, dc2, tgt)]

    def ours(name: str, key: bytes | None) -> bool:
        return name not in shared or any(a in (key or b"") for a in aliases)

    for cluster, name, seal in compacted:
        written, read = compact_in_place(cluster, name, seal)
        kept = [(r.partition, r.key, r.value) for r in read if b"seal-" not in (r.key or b"") and ours(name, r.key)]
        newest = [
            (r.partition, r.key, r.value) for rs in newest_per_key(written).values() for r in rs if ours(name, r.key)
        ]
        written = [r for r in written if ours(name, r.key)]
        assert sorted(kept, key=repr) == sorted(newest, key=repr), f"{name}: not the newest record per key"
        if not name.endswith(".checkpoints.internal") or dc2 in name:  # dc1's groups were checkpointed once
            assert len(kept) < len(written), f"{name}: {len(written)} records written, {len(kept)} kept"
        if name.startswith("mm2-offset-syncs."):  # MM2's rule: one sync per partition survives
            syncs = [OffsetSync.from_record(key, value) for _, key, value in kept]
            assert sorted(s.partition for s in syncs if s.topic == topic) == [0, 1], (name, syncs)
    record_property("compaction_seconds", round(time.monotonic() - compacting, 1))

    # Without the dense syncs (delete policy), the compacted history no longer translates lagging groups exactly.
    mm2_only = tmp_path / "mm2-only.properties"
    mm2_only.write_text(config.read_text() + "mm2py.offset-syncs.dense.enabled = false\n")
    behind_mm2_only = _translate(mm2_only, f"behind-{dc1}", dc1, tgt)
    assert {r["method"] for r in behind_mm2_only} != {"exact"}, behind_mm2_only

    target = read_all(real_kafka_target.bootstrap, topic)
    translated: dict[tuple[str, str, int], tuple[int, int]] = {}
    for alias, bootstrap in bootstraps.items():
        source = read_all(bootstrap, topic)
        foreign = {r.value for r in target} - {r.value for r in source}
        for name, offsets in groups[alias].items():
            rows = _translate(config, f"{name}-{alias}", alias, tgt)
            assert [(r["topic"], r["partition"], r["upstream_offset"], r["method"]) for r in rows] == [
                (topic, p, offsets[p], "exact") for p in (0, 1)
            ], rows
            for row in rows:
                p, d = row["partition"], row["offset"]
                _assert_exact(source, target, p, offsets[p], d)
                if name == "end":  # right after this source's last record, whatever of the other follows
                    assert d == max(r.offset for r in target if r.partition == p and r.value not in foreign) + 1
                translated[(f"{name}-{alias}", topic, p)] = (offsets[p], d)
        if alias == dc1:
            assert any(r.value in foreign for r in target if r.offset < translated[(f"behind-{dc1}", topic, 1)][1]), (
                "the test needs the other source's records before dc1's translated offset"
            )

    later = mm2py("run", str(config), "--once")
    assert later.returncode == 0, later.stderr
    for alias in (dc1, dc2):
        checkpoints = latest_checkpoints(read_all(real_kafka_target.bootstrap, f"{alias}.checkpoints.internal"))
        for (group, t, p), (upstream, downstream) in translated.items():
            if group.endswith(alias):
                cp = checkpoints[(group, t, p)]
                assert (cp.upstream_offset, cp.downstream_offset) == (upstream, downstream), (group, p)
    record_property("total_seconds", round(time.monotonic() - started, 1))

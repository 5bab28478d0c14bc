"""`mm2py verify` after `mm2py run --once`: clean copies pass; a lost, changed or repeated record fails.

tansu cannot delete records, so a damaged target is rebuilt: the remote topic is re-created and the copy is
produced into it again with one record dropped, changed or repeated, while the offset syncs and progress
stay as the run wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from mm2py.mirror.progress import PROGRESS_PARTITIONER, progress_record, progress_topic
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    client_config,
    create_topic,
    delete_topic,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def verify_json(config: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = mm2py("verify", str(config), "--json", *args)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def rows_of(rows: list[dict[str, Any]], flow: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["flow"] == flow]


def rebuild(broker: TansuBroker, topic: str, partitions: int, records: list[Record]) -> None:
    delete_topic(broker.bootstrap, topic)
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, records)


def load(brokers: dict[str, TansuBroker], dcs: tuple[str, ...], count: int, partitions: int) -> None:
    for i, dc in enumerate(dcs):
        create_topic(brokers[dc].bootstrap, "orders", partitions)
        produce(
            brokers[dc].bootstrap,
            "orders",
            make_records(count, partitions=partitions, seed=i + 1, tombstone_every=17, null_key_every=13),
        )


def test_clean_prefixed_copy_of_two_sources_passes(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    load(brokers, ("dc1", "dc2"), 450, 3)
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\nmm2py.range.max.records = 70\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0

    # several windows per partition; only orders (the flows also replicate the sources' heartbeats topics)
    code, rows, stderr = verify_json(config, "--window-records", "40", "--topics", "orders")
    assert code == 0, stderr
    assert stderr.strip() == ""
    assert {(r["flow"], r["remote_topic"], r["partition"]) for r in rows} == {
        (f"{dc}->target", f"{dc}.orders", p) for dc in ("dc1", "dc2") for p in range(3)
    }
    for r in rows:
        assert (r["status"], r["method"]) == ("ok", "offset-syncs")
        assert (r["first_offset"], r["last_offset"]) == (0, 149)
        assert r["source_records"] == r["target_records"] == 150
        assert r["source_digest"] == r["target_digest"]

    table = mm2py("verify", str(config), "--flows", "dc1->target", "--topics", "ord.*")
    assert table.returncode == 0, table.stderr
    assert "dc1->target" in table.stdout and "dc2->target" not in table.stdout and "total" in table.stdout


@pytest.fixture
def merged(kafka_cluster: ClusterFactory, tmp_path: Path) -> tuple[dict[str, TansuBroker], Path]:
    """dc1 and dc2 merged into target:orders (IdentityReplicationPolicy), in small interleaved batches."""
    brokers = kafka_cluster("dc1", "dc2", "target")
    load(brokers, ("dc1", "dc2"), 300, 2)
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
        f"replication.policy.class = {IDENTITY}\nmm2py.range.max.records = 40\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0
    return brokers, config


def test_clean_merged_identity_copy_passes_ignoring_the_other_sources_records(
    merged: tuple[dict[str, TansuBroker], Path],
) -> None:
    brokers, config = merged
    target = read_all(brokers["target"].bootstrap, "orders")
    assert len(target) == 600
    code, rows, stderr = verify_json(config, "--window-records", "64", "--topics", "orders")
    assert code == 0, stderr
    assert len(rows) == 4
    for r in rows:
        assert (r["status"], r["source_records"], r["target_records"]) == ("ok", 150, 150), r
        assert r["method"] == "offset-syncs" and r["missing"] == r["altered"] == r["duplicates"] == 0


def test_a_missing_an_altered_and_a_duplicated_record_fail_naming_partition_and_offsets(
    merged: tuple[dict[str, TansuBroker], Path],
) -> None:
    brokers, config = merged
    target = read_all(brokers["target"].bootstrap, "orders")
    origin = {r.value: dc for dc in ("dc1", "dc2") for r in read_all(brokers[dc].bootstrap, "orders", 1)}
    merged_1 = [i for i, r in enumerate(target) if r.partition == 1]
    # The victim has records of the other flow before it on the target (its downstream offset is not its upstream
    # one): a record of the flow that comes second at the first switch between the flows, mid-way through the
    # rest of that flow's records. How the two flows interleave depends on timing, so it is found, not assumed.
    switch = next(
        k for k in range(1, len(merged_1)) if origin[target[merged_1[k]].value] != origin[target[merged_1[k - 1]].value]
    )
    dc = origin[target[merged_1[switch]].value]
    later = [i for i in merged_1[switch:] if origin[target[i].value] == dc]
    i = later[len(later) // 2]
    victim, d = target[i], target[i].offset
    upstream = next(r.offset for r in read_all(brokers[dc].bootstrap, "orders", 1) if r.value == victim.value)
    assert d != upstream and victim.value is not None
    other = "dc2" if dc == "dc1" else "dc1"
    where = f"verify: flow={dc}->target topic=orders partition=1"

    rebuild(brokers["target"], "orders", 2, target[:i] + target[i + 1 :])
    code, rows, stderr = verify_json(config)
    assert code == 1
    assert stderr.splitlines() == [f"{where} missing upstream offset {upstream}"]
    (bad,) = [r for r in rows if r["status"] != "ok"]
    assert (bad["flow"], bad["partition"], bad["missing"]) == (f"{dc}->target", 1, 1)
    assert bad["target_records"] == 149

    altered = Record(victim.key, b"changed", victim.headers, victim.timestamp, 1)
    rebuild(brokers["target"], "orders", 2, [*target[:i], altered, *target[i + 1 :]])
    code, rows, stderr = verify_json(config)
    assert code == 1
    assert stderr.splitlines() == [
        f"{where} altered upstream offset {upstream} at downstream offset {d} (value differs)"
    ]
    assert all(r["status"] == "ok" for r in rows_of(rows, f"{other}->target"))

    rebuild(brokers["target"], "orders", 2, [*target[: i + 1], target[i], *target[i + 1 :]])
    code, rows, stderr = verify_json(config)
    assert code == 1
    assert stderr.splitlines() == [f"{where} duplicate of upstream offset {upstream} at downstream offset {d + 1}"]
    (bad,) = [r for r in rows if r["status"] != "ok"]
    assert (bad["duplicates"], bad["source_records"], bad["target_records"]) == (1, 150, 151)


def test_records_copied_twice_after_a_lost_progress_write_are_duplicates(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "target")
    load(brokers, ("dc1",), 200, 2)
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ntopics = orders\nmm2py.range.max.records = 30\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0
    assert mm2py("verify", str(config)).returncode == 0
    # As if the task copying partition 0 from offset 60 died before writing its progress: the next run
    # copies offsets 60.. again (at-least-once).
    progress = progress_record("dc1", "orders", 0, 59)
    producer = Producer(client_config(brokers["target"].bootstrap, partitioner=PROGRESS_PARTITIONER))
    producer.produce(progress_topic("dc1"), progress.value, progress.key)
    assert producer.flush(10) == 0
    assert mm2py("run", str(config), "--once").returncode == 0

    code, rows, stderr = verify_json(config)
    assert code == 1
    assert stderr.splitlines() == [
        "verify: flow=dc1->target topic=orders partition=0 duplicates of upstream "
        "offsets 60..99 at downstream offsets 60..99 (40 records)"
    ]
    by_partition = {r["partition"]: r for r in rows}
    hit = by_partition[0]
    assert (hit["duplicates"], hit["source_records"], hit["target_records"]) == (40, 100, 140)
    assert by_partition[1]["status"] == "ok"


def test_without_dense_syncs_records_are_matched_by_content_and_a_loss_is_found(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "target")
    load(brokers, ("dc1",), 300, 2)
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ntopics = orders\nmm2py.range.max.records = 50\n"
        "mm2py.offset-syncs.dense.enabled = false\noffset.lag.max = 20\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0
    code, rows, stderr = verify_json(config, "--topics", "orders")
    assert code == 0, stderr
    assert rows
    for r in rows:
        assert (r["status"], r["method"]) == ("ok", "mixed")
        assert "matched by content fingerprints" in r["note"]

    target = read_all(brokers["target"].bootstrap, "dc1.orders")
    lost = next(i for i, r in enumerate(target) if r.partition == 0 and r.offset == 71)
    rebuild(brokers["target"], "dc1.orders", 2, target[:lost] + target[lost + 1 :])
    code, _rows, stderr = verify_json(config)
    assert code == 1
    assert stderr.splitlines() == ["verify: flow=dc1->target topic=orders partition=0 missing upstream offset 71"]

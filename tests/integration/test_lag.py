"""`mm2py lag`: records and seconds per partition, with cron-friendly thresholds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kafka_harness import ClusterFactory, create_topic, make_records, produce
from mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_lag_after_seven_new_records_on_one_partition(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    for dc in ("dc1", "dc2"):
        create_topic(brokers[dc].bootstrap, "orders", 3)
        produce(brokers[dc].bootstrap, "orders", make_records(90, partitions=3, seed=len(dc)))
    config = write_config(tmp_path / "mm2.properties", brokers,
                          "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
                          "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    assert mm2py("run", str(config), "--once").returncode == 0

    new = make_records(7, partitions=1, seed=99, base_timestamp=int(time.time() * 1000) - 5_000)
    produce(brokers["dc1"].bootstrap, "orders", new)  # all on partition 0
    result = mm2py("lag", str(config), "--json")
    assert result.returncode == 0, result.stderr
    rows = {(r["flow"], r["partition"]): r for r in json.loads(result.stdout)}
    assert len(rows) == 6
    hot = rows[("dc1->target", 0)]
    assert (hot["source_end_offset"], hot["replicated_offset"], hot["lag_records"]) == (37, 30, 7)
    assert hot["remote_topic"] == "orders" and hot["lag_seconds"] >= 5.0
    for key, row in rows.items():
        if key != ("dc1->target", 0):
            assert (row["lag_records"], row["lag_seconds"]) == (0, 0.0), key

    over = mm2py("lag", str(config), "--max-lag", "6")
    assert over.returncode == 1
    assert "flow=dc1->target topic=orders partition=0 lag_records=7" in over.stderr
    assert mm2py("lag", str(config), "--max-lag", "7").returncode == 0
    assert mm2py("lag", str(config), "--max-lag-seconds", "3").returncode == 1

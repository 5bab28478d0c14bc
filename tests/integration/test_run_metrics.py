"""`mm2py run --metrics-port`: MM2's metrics, under the names Strimzi's exporter gives them, while a run goes on."""

from __future__ import annotations

import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import (
    ClusterFactory,
    commit_group,
    create_topic,
    end_offsets,
    free_port,
    make_records,
    produce,
)
from tests.harness.mm2py_cli import write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
PARTITIONS = 3


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


@pytest.mark.parametrize("path", ["batch", "record"])
def test_metrics_while_running_count_every_copied_record_per_partition_and_time_checkpoints(
    kafka_cluster: ClusterFactory, tmp_path: Path, path: str
) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", PARTITIONS)
    records = make_records(3_000, partitions=PARTITIONS, seed=12, value_size=50)
    produce(brokers["dc1"].bootstrap, "orders", records)
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 10, 1: 20, 2: 30})
    port = free_port()
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\ntopics = orders\nemit.checkpoints.interval.seconds = 1\n"
            f"consumer.poll.timeout.ms = 200\nmm2py.copy.mode = {path}\n"
        ),
    )

    def copied() -> int:
        try:
            return sum(end_offsets(brokers["target"].bootstrap, "dc1.orders").values())
        except Exception:  # the remote topic may not exist yet
            return 0

    def checkpointed() -> bool:
        """Every partition of the group has a checkpoint latency (each partition's first checkpoint may come in
        a later round than another's)."""
        try:
            samples = scrape(port).get(CHECKPOINT + "checkpoint_latency_ms", [])
        except OSError:
            return False
        seen = {(s["group"], s["topic"], s["partition"]) for s, _v in samples}
        return {("billing", "dc1.orders", str(p)) for p in range(PARTITIONS)} <= seen

    with MirrorRun(config, tmp_path / "run.log", "--metrics-port", str(port)) as run:
        run.wait_for(lambda: copied() >= len(records), 180, "the records to be copied")
        run.wait_for(checkpointed, 60, "a checkpoint latency for every partition of the group")
        metrics = scrape(port)  # the run is still going
        assert run.proc.poll() is None
        assert run.stop() == 0, run.log_text()

    # Only orders: the flow also replicates the source's heartbeats topic (dc1.heartbeats), which has its own rows.
    counts = {
        (s["source"], s["target"], s["topic"], s["partition"]): v
        for s, v in metrics[SOURCE + "record_count"]
        if s["topic"] == "dc1.orders"
    }
    expected = Counter(r.partition for r in records)
    assert counts == {("dc1", "target", "dc1.orders", str(p)): float(expected[p]) for p in range(PARTITIONS)}
    byte_counts = {s["partition"]: v for s, v in metrics[SOURCE + "byte_count"] if s["topic"] == "dc1.orders"}
    values = {str(p): float(sum(len(r.value or b"") for r in records if r.partition == p)) for p in range(PARTITIONS)}
    if path == "record":
        assert byte_counts == values  # MM2 counts value bytes
    else:  # the batch path counts the record batches it forwards: values plus keys, headers and framing
        assert byte_counts.keys() == values.keys() and all(byte_counts[p] > values[p] for p in values)
    assert {s["path"] for s, v in metrics["mm2py_copy_path"] if v == 1} == {path}
    for name in ("record_age_ms_max", "replication_latency_ms_max", "replication_latency_ms_avg"):
        values = [v for labels, v in metrics[SOURCE + name] if labels["topic"] == "dc1.orders"]
        assert len(values) == PARTITIONS and all(v >= 0 for v in values), name
    latency = {(s["group"], s["topic"], s["partition"]) for s, _v in metrics[CHECKPOINT + "checkpoint_latency_ms"]}
    assert {("billing", "dc1.orders", str(p)) for p in range(PARTITIONS)} <= latency

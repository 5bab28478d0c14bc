"""Continuous mode on real Kafka while the copy tasks follow their partitions: what arrives is copied by the same
Spark job (no job per trickle), the metrics port and ``mm2py lag`` show it within 10 s, and SIGTERM stops the run
within 10 s with its progress recorded.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mm2py.control.progress_store import read_progress
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import end_offsets, free_port, make_records, produce, read_all, records_in
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import unique_alias, write_real_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
RECORD_COUNT = "kafka_connect_mirror_mirrorsourceconnector_record_count"
SHOWN_WITHIN_S = 10.0


def _record_count(port: int, remote: str) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return -1
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == RECORD_COUNT and s.labels.get("topic") == remote
    )


def _replicated(config: Path, topic: str) -> dict[int, int]:
    """``mm2py lag --json``: per partition of ``topic``, the offset replicated up to (the next to copy)."""
    result = mm2py("lag", str(config), "--json", "--topics", topic)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    return {r["partition"]: r["replicated_offset"] for r in rows if r.get("topic") == topic}


def test_following_tasks_show_in_metrics_and_lag_within_10_s_and_sigterm_stops_within_10_s(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = real_kafka.create_topic(unique_topic("following"), partitions=PARTITIONS)
    src, tgt = unique_alias("src"), unique_alias("tgt")
    config = write_real_config(
        tmp_path / "mm2.properties",
        {src: real_kafka.bootstrap, tgt: real_kafka_target.bootstrap},
        f"{src}->{tgt}.enabled = true\ntopics = {topic}\n",
    )
    remote = f"{src}.{topic}"
    first = make_records(2_000, partitions=PARTITIONS, seed=31)
    produce(real_kafka.bootstrap, topic, first)
    port = free_port()
    with MirrorRun(config, tmp_path / "run.log", "--metrics-port", str(port)) as run:
        run.wait_for(lambda: records_in(real_kafka_target.bootstrap, remote) == 2_000, 180, "the first records")
        run.wait_for(lambda: _record_count(port, remote) == 2_000, 60, "record_count to count them")
        jobs = run.stages_completed()

        later = make_records(1_000, partitions=PARTITIONS, seed=32)
        produce(real_kafka.bootstrap, topic, later)
        run.wait_for(lambda: records_in(real_kafka_target.bootstrap, remote) == 3_000, 60, "the later records")
        copied_at = time.monotonic()
        poll_until(lambda: _record_count(port, remote) == 3_000, SHOWN_WITHIN_S, "record_count on the metrics port")
        ends = end_offsets(real_kafka.bootstrap, topic)
        expected = {p: ends[p] - 1 for p in range(PARTITIONS)}
        remaining = SHOWN_WITHIN_S - (time.monotonic() - copied_at)
        poll_until(lambda: _replicated(config, topic) == ends, max(remaining, 0.1), "mm2py lag at the end")
        # The same Spark job copied both: its tasks followed their partitions, no job ended in between.
        assert run.stages_completed() == jobs
        assert run.proc.poll() is None

        stopping = time.monotonic()
        assert run.stop(timeout=60) == 0, run.log_text()
        stop_s = time.monotonic() - stopping
    assert stop_s < 10.0, f"the run took {stop_s:.1f} s to stop after SIGTERM"
    progress = read_progress(tgt, {"bootstrap.servers": real_kafka_target.bootstrap}, src)
    assert {p: progress[(topic, p)] for p in range(PARTITIONS)} == expected

    def by_partition(bootstrap: str, name: str) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
        records = sorted(read_all(bootstrap, name), key=lambda r: (r.partition, r.offset))
        return {p: [(r.key, r.value) for r in records if r.partition == p] for p in range(PARTITIONS)}

    # Every record once, in order per partition.
    assert by_partition(real_kafka_target.bootstrap, remote) == by_partition(real_kafka.bootstrap, topic)
    print(f"FIGURES SIGTERM to exit {stop_s:.1f} s")

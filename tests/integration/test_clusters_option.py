"""`mm2py run --clusters`: on an active/active pair, a node for west copies east->west and nothing else.

The same run serves /metrics: the endpoint answers while the run is under way and is gone once it exits.
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    create_topic,
    free_port,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py_argv, write_config
from tests.harness.polling import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ACTIVE_ACTIVE = "east->west.enabled = true\nwest->east.enabled = true\ntopics = orders\n"


def fields(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, tuple(r.headers), r.timestamp, r.partition)


def scrape(port: int) -> str | None:
    """The /metrics text, or None while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return str(response.read().decode("utf-8"))
    except (urllib.error.URLError, ConnectionError):
        return None


def test_clusters_west_copies_east_to_west_and_leaves_west_to_east_untouched(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("east", "west")
    for seed, side in enumerate(("east", "west"), start=1):
        create_topic(brokers[side].bootstrap, "orders", 2)
        produce(brokers[side].bootstrap, "orders", make_records(120, partitions=2, seed=seed))
    config = write_config(tmp_path / "mm2.properties", brokers, ACTIVE_ACTIVE + "mm2py.metrics.host = 127.0.0.1\n")
    east_before = set(list_topics(brokers["east"].bootstrap))
    port = free_port()

    stdout, stderr = tmp_path / "run.out", tmp_path / "run.err"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(
            [
                *mm2py_argv(),
                "run",
                str(config),
                "--once",
                "--clusters",
                "west",
                "--metrics-port",
                str(port),
            ],
            stdout=out,
            stderr=err,
        )
        try:
            served = poll_until(
                lambda: scrape(port), 120, "the metrics endpoint to answer", interval=0.05, process=process
            )
            returncode = process.wait(timeout=240)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert returncode == 0, stderr.read_text()
    assert served is not None, "the endpoint never answered during the run"
    assert "# TYPE kafka_connect_mirror_mirrorsourceconnector_record_count gauge" in served
    assert scrape(port) is None, "the endpoint outlived the run"

    source = read_all(brokers["east"].bootstrap, "orders")
    copied = read_all(brokers["west"].bootstrap, "east.orders")
    for p in (0, 1):
        assert [fields(r) for r in copied if r.partition == p] == [fields(r) for r in source if r.partition == p]

    east_after = set(list_topics(brokers["east"].bootstrap))
    assert "west.orders" not in east_after
    # With --clusters west this node runs only the herder pairs into west (as MM2 does): no heartbeats into east.
    assert "heartbeats" not in east_after
    assert "mm2-offsets.west.internal" not in east_after
    # east->west keeps its offset syncs (MM2's and mm2py's dense ones) on its source, east; west->east left no
    # trace there at all.
    assert east_after - east_before == {"mm2-offset-syncs.west.internal", "mm2py-offset-syncs.west.internal"}
    assert len(read_all(brokers["east"].bootstrap, "orders")) == 120

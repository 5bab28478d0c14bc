"""Cron with `auto.offset.reset = latest` loses nothing and `lag` agrees with `run`; heartbeats as MM2 emits them."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from mm2py.mirror.record_formats import Heartbeat
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    create_topic,
    end_offsets,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 3


def key(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, r.timestamp, r.partition)


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", PARTITIONS)
    return brokers


def lag_rows(config: Path) -> dict[int, int]:
    result = mm2py("lag", str(config), "--json")
    assert result.returncode == 0, result.stderr
    return {r["partition"]: r["lag_records"] for r in json.loads(result.stdout) if r["topic"] == "orders"}


def test_latest_reset_records_its_start_so_the_next_once_copies_what_came_after_and_lag_agrees(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "mm2.properties",
        pair,
        ("dc1->target.enabled = true\ntopics = orders\ndc1.consumer.auto.offset.reset = latest\n"),
    )
    produce(pair["dc1"].bootstrap, "orders", make_records(1_002, partitions=PARTITIONS, seed=8))

    first = mm2py("run", str(config), "--once")
    assert first.returncode == 0, first.stderr
    assert sum(end_offsets(pair["target"].bootstrap, "dc1.orders").values()) == 0  # the backlog is skipped
    assert lag_rows(config) == {p: 0 for p in range(PARTITIONS)}

    later = make_records(10, partitions=PARTITIONS, seed=9)
    produce(pair["dc1"].bootstrap, "orders", later)
    expected = Counter(r.partition for r in later)
    assert lag_rows(config) == {p: expected[p] for p in range(PARTITIONS)}  # exactly what the next run copies

    second = mm2py("run", str(config), "--once")
    assert second.returncode == 0, second.stderr
    target = read_all(pair["target"].bootstrap, "dc1.orders")
    assert Counter(key(r) for r in target) == Counter(key(r) for r in later)
    assert lag_rows(config) == {p: 0 for p in range(PARTITIONS)}


def test_heartbeats_keep_their_interval_during_a_long_copy_and_reach_both_sides(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "mm2.properties",
        pair,
        (
            "dc1->target.enabled = true\ntopics = orders\n"
            "refresh.topics.interval.seconds = 2\n"
            "mm2py.range.max.records = 100000000\n"
        ),
    )  # one long copy job for the whole backlog
    backlog = 600_000
    produce(
        pair["dc1"].bootstrap,
        "orders",
        make_records(backlog, partitions=PARTITIONS, seed=10, value_size=100, with_headers=False),
    )
    with MirrorRun(config, tmp_path / "run.log") as run:
        run.wait_for(lambda: _copied(pair["target"], "dc1.orders") >= backlog, 300, "the backlog to be copied")
        # MM2's reverse herder target->dc1 wrote into dc1's heartbeats, which dc1->target replicates.
        run.wait_for(
            lambda: "dc1.heartbeats" in list_topics(pair["target"].bootstrap), 60, "dc1.heartbeats on the target"
        )
        # On a quiet machine the copy can end within four heartbeat intervals: the gaps are then checked up to
        # the fifth, which the copy's time is part of.
        run.wait_for(lambda: len(_our_heartbeats(pair["target"])) >= 5, 30, "five heartbeats of dc1->target")
        assert run.stop() == 0, run.log_text()
    ours = _our_heartbeats(pair["target"])
    gaps = [b - a for a, b in itertools.pairwise(ours)]
    print(f"FIGURES heartbeats={len(ours)} max gap {max(gaps)} ms during a {backlog}-record copy")
    assert max(gaps) <= 3_000
    reverse = [Heartbeat.from_record(r.key, r.value) for r in read_all(pair["dc1"].bootstrap, "heartbeats")]
    assert {(b.source_cluster_alias, b.target_cluster_alias) for b in reverse} == {("target", "dc1")}


def _our_heartbeats(target: TansuBroker) -> list[int]:
    """The timestamps of the flow dc1->target's heartbeats on the target, in order."""
    beats = [Heartbeat.from_record(r.key, r.value) for r in read_all(target.bootstrap, "heartbeats")]
    return sorted(b.timestamp for b in beats if (b.source_cluster_alias, b.target_cluster_alias) == ("dc1", "target"))


def _copied(target: TansuBroker, topic: str) -> int:
    try:
        return sum(end_offsets(target.bootstrap, topic).values())
    except Exception:  # the remote topic may not exist yet
        return 0

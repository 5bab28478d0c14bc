"""One run per flow at a time: two `--once` started together copy once; a standby takes over from a dead holder."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    create_topic,
    end_offsets,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py_argv, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 4


def key(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, r.timestamp, r.partition)


def copied(target: TansuBroker) -> int:
    try:
        return sum(end_offsets(target.bootstrap, "orders").values())
    except Exception:  # the remote topic may not exist yet
        return 0


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", PARTITIONS)
    return brokers


def config_for(tmp_path: Path, brokers: dict[str, TansuBroker], extra: str = "") -> Path:
    return write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\ntopics = orders\n"
            "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
            "consumer.poll.timeout.ms = 200\n" + extra
        ),
    )


def test_two_once_runs_started_together_copy_every_record_once(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    records = make_records(60_000, partitions=PARTITIONS, seed=3, value_size=100)
    produce(pair["dc1"].bootstrap, "orders", records)
    config = config_for(tmp_path, pair)
    args = [*mm2py_argv(), "run", str(config), "--once"]
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [r.communicate(timeout=300) for r in runs]
    for run, (_out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
    held = [out for out, _err in outputs if "held_by=" in out]
    assert len(held) == 1, outputs  # one run copied, the other named the holder and copied nothing
    assert "copied=0" in held[0]
    target = read_all(pair["target"].bootstrap, "orders")
    assert Counter(key(r) for r in target) == Counter(key(r) for r in records)


def test_standby_takes_over_when_the_active_run_is_killed_and_loses_nothing(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    first = make_records(2_000, partitions=PARTITIONS, seed=4)
    produce(pair["dc1"].bootstrap, "orders", first)
    config = config_for(tmp_path, pair)
    with MirrorRun(config, tmp_path / "active.log") as active:
        active.wait_for(lambda: copied(pair["target"]) >= len(first), 120, "the active run to copy the backlog")
        with MirrorRun(config, tmp_path / "standby.log") as standby:
            # The standby is up (Spark started, lease group joined) before the active run dies.
            standby.wait_for(lambda: "stands by" in standby.log_text(), 120, "the standby to join the lease group")
            killed_at = time.monotonic()
            active.kill()
            later = make_records(1_500, partitions=PARTITIONS, seed=5)
            produce(pair["dc1"].bootstrap, "orders", later)
            standby.wait_for(
                lambda: copied(pair["target"]) >= len(first) + len(later),
                120,
                "the standby to copy what was produced after the kill",
            )
            takeover_s = time.monotonic() - killed_at
            assert standby.stop() == 0, standby.log_text()
    target = Counter(key(r) for r in read_all(pair["target"].bootstrap, "orders"))
    missing = [r for r in first + later if target[key(r)] == 0]
    assert not missing, f"{len(missing)} records lost"
    print(f"FIGURES standby took over and caught up {takeover_s:.1f} s after the kill")

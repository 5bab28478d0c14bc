"""`mm2py lag`: records and seconds per partition, flow ages, Prometheus text, mirrored group lag and
--watch, with cron-friendly thresholds."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.kafka_harness import ClusterFactory, commit_group, create_topic, make_records, produce
from tests.harness.mm2py_cli import mm2py, mm2py_argv, write_config
from tests.harness.polling import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def metrics(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Metric name -> sorted label pairs -> value, parsed back from Prometheus text."""
    result: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            result.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return result


def test_lag_after_seven_new_records_on_one_partition(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    for dc in ("dc1", "dc2"):
        create_topic(brokers[dc].bootstrap, "orders", 3)
        produce(brokers[dc].bootstrap, "orders", make_records(90, partitions=3, seed=len(dc)))
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0

    new = make_records(7, partitions=1, seed=99, base_timestamp=int(time.time() * 1000) - 5_000)
    produce(brokers["dc1"].bootstrap, "orders", new)  # all on partition 0
    result = mm2py("lag", str(config), "--json")
    assert result.returncode == 0, result.stderr
    every = json.loads(result.stdout)
    rows = {(r["flow"], r["partition"]): r for r in every if r["topic"] == "orders"}
    assert len(rows) == 6
    # The run also replicated the heartbeats MM2's reverse pairs wrote into each source, before its end offsets.
    beats = [r for r in every if r["topic"] == "heartbeats"]
    assert len(beats) == 2 and all(r["lag_records"] == 0 for r in beats), beats
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


def test_lag_reports_flow_ages_and_prometheus_metrics_after_a_run(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "dc2", "target")
    for dc in ("dc1", "dc2"):
        create_topic(brokers[dc].bootstrap, "orders", 3)
        produce(brokers[dc].bootstrap, "orders", make_records(90, partitions=3, seed=len(dc)))
    commit_group(brokers["dc1"].bootstrap, "billing", "orders", {0: 10, 1: 20, 2: 30})  # so dc1 gets checkpoints
    config = write_config(
        tmp_path / "mm2.properties",
        brokers,
        "dc1->target.enabled = true\ndc2->target.enabled = true\ntopics = orders\n"
        f"replication.policy.class = {IDENTITY}\n",
    )
    assert mm2py("run", str(config), "--once").returncode == 0
    produce(brokers["dc1"].bootstrap, "orders", make_records(7, partitions=1, seed=99))

    result = mm2py("lag", str(config), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 8  # 3 partitions of orders and the heartbeats topic, per flow
    for row in rows:
        assert 0 <= row["heartbeat_age_seconds"] < 120, row
        if row["flow"] == "dc1->target":
            assert 0 <= row["checkpoint_age_seconds"] < 120, row
        else:
            assert row["checkpoint_age_seconds"] is None, row  # no group on dc2, so no checkpoint

    table = mm2py("lag", str(config))
    assert table.returncode == 0, table.stderr
    assert "no checkpoint" in table.stdout and table.stdout.count("heartbeat ") == 2
    assert "s ago, checkpoint " in table.stdout

    started = time.time()
    prom = mm2py("lag", str(config), "--prometheus", "--max-lag", "6")
    assert prom.returncode == 1, prom.stderr  # the metrics are printed even when a threshold is exceeded
    found = metrics(prom.stdout)
    hot = (("partition", "0"), ("source", "dc1"), ("target", "target"), ("topic", "orders"))
    assert found["mm2py_replication_lag_records"][hot] == 7
    assert found["mm2py_source_end_offset"][hot] == 37 and found["mm2py_replicated_offset"][hot] == 30
    assert found["mm2py_replication_lag_seconds"][hot] >= 0
    assert len(found["mm2py_replication_lag_records"]) == 8
    assert sum(found["mm2py_replication_lag_records"].values()) == 7
    flows = {(("source", dc), ("target", "target")) for dc in ("dc1", "dc2")}
    assert set(found["mm2py_heartbeat_age_seconds"]) == flows
    assert set(found["mm2py_checkpoint_age_seconds"]) == {(("source", "dc1"), ("target", "target"))}
    assert started - 1 <= found["mm2py_lag_check_timestamp_seconds"][()] <= time.time()


def test_lag_groups_shows_target_groups_on_remote_topics(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 2)
    create_topic(brokers["target"].bootstrap, "dc1.orders", 2)  # what a run creates (DefaultReplicationPolicy)
    create_topic(brokers["target"].bootstrap, "local", 1)
    produce(brokers["target"].bootstrap, "dc1.orders", make_records(20, partitions=2))
    commit_group(brokers["target"].bootstrap, "reporting", "dc1.orders", {0: 3})  # failed over, 7 behind
    commit_group(brokers["target"].bootstrap, "local-app", "local", {0: 0})  # not on a remote topic: not shown
    config = write_config(tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = orders\n")

    result = mm2py("lag", str(config), "--groups", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "group": "reporting",
            "topic": "dc1.orders",
            "partition": 0,
            "current_offset": 3,
            "log_end_offset": 10,
            "lag": 7,
        }
    ]
    table = mm2py("lag", str(config), "--groups")
    assert table.returncode == 0, table.stderr
    assert "consumer groups on target" in table.stdout and "reporting" in table.stdout
    assert "local-app" not in table.stdout

    prom = mm2py("lag", str(config), "--groups", "--prometheus")
    assert prom.returncode == 0, prom.stderr
    assert metrics(prom.stdout)["mm2py_group_lag_records"] == {
        (("group", "reporting"), ("partition", "0"), ("topic", "dc1.orders")): 7
    }

    over = mm2py("lag", str(config), "--groups", "--max-lag", "6")
    assert over.returncode == 1
    assert "group lag over threshold: group=reporting topic=dc1.orders partition=0 lag=7" in over.stderr
    assert mm2py("lag", str(config), "--groups", "--max-lag", "7").returncode == 0
    assert mm2py("lag", str(config), "--groups", "--max-lag-seconds", "1").returncode == 2


def _sigint_as_at_a_terminal() -> None:
    """The watcher gets SIGINT's default action, as a command started at a terminal has: a suite started in the
    background by a shell without job control inherits SIGINT ignored, and Ctrl-C would then prove nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_lag_watch_shows_lag_growing_and_stops_cleanly_on_ctrl_c(kafka_cluster: ClusterFactory, tmp_path: Path) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 1)
    produce(brokers["dc1"].bootstrap, "orders", make_records(10, partitions=1))
    config = write_config(tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = orders\n")
    watcher = subprocess.Popen(
        [*mm2py_argv(), "lag", str(config), "--watch", "--interval", "0.5", "--max-lag", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a hang below is answered by SIGABRT: every thread's stack
        preexec_fn=_sigint_as_at_a_terminal,
    )
    lines: queue.Queue[str] = queue.Queue()
    errors: list[str] = []  # stderr is drained too: a full pipe would block the watcher's next log line

    def pump() -> None:
        for line in watcher.stdout or []:
            lines.put(line)

    def drain() -> None:
        errors.extend(watcher.stderr or [])

    drainer = threading.Thread(target=drain, daemon=True)
    threading.Thread(target=pump, daemon=True).start()
    drainer.start()

    def next_line_matching(pattern: str) -> str | None:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            return None
        return line if re.search(pattern, line) else None

    def wait_for(pattern: str) -> str:
        return poll_until(lambda: next_line_matching(pattern), 60, f"--watch printing {pattern!r}", interval=0)

    row = r"orders\W+dc1\.orders\W+0\W+{end}\W+0\W+{end}\W+[\d.]+\W+0\W+{arrow}"  # a row (0 lost) and its trend
    try:
        wait_for(row.format(end=10, arrow=""))
        wait_for("1 row\\(s\\) over threshold")  # 10 records behind, threshold 5: highlighted, not an exit
        produce(brokers["dc1"].bootstrap, "orders", make_records(5, partitions=1, seed=7))
        wait_for(row.format(end=15, arrow="↑"))
        wait_for(row.format(end=15, arrow="="))
        watcher.send_signal(signal.SIGINT)
        try:
            code = watcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            masks = [line for line in Path(f"/proc/{watcher.pid}/status").read_text().splitlines() if "Sig" in line]
            watcher.send_signal(signal.SIGABRT)
            watcher.wait(timeout=30)
            drainer.join(timeout=10)  # stderr's end: the whole stack dump
            pytest.fail(f"no exit 30 s after SIGINT; {masks}; stderr: {''.join(errors)[-6000:]}")
        assert code == 0, "".join(errors)[-4000:]
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()

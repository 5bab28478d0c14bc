"""Continuous `mm2py run`: keeps copying, stops cleanly on SIGTERM, and loses nothing when SIGKILLed."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.faults import BurstProducer, session_processes
from tests.harness.flows_helpers import (
    IDENTITY,
    config_for,
    copied,
    copied_past_progress,
    recorded_progress,
    start_run,
)
from tests.harness.kafka_harness import TansuBroker, create_topic, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py, write_config
from tests.harness.polling import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 4


# Every test here: the merged (Identity) layout, and short polls so ranges end quickly.
FLOW = IDENTITY + "consumer.poll.timeout.ms = 200\n"


def test_sigterm_finishes_the_batch_records_progress_and_exits_0(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    config = config_for(tmp_path, pair, FLOW)
    produce(pair["dc1"].bootstrap, "orders", make_records(2_000, partitions=PARTITIONS, seed=1))
    log = tmp_path / "run.log"
    proc = start_run(config, log)
    try:
        poll_until(lambda: copied(pair["target"]) == 2_000, 120, "the first 2000 records", process=proc, log=log)
        produce(pair["dc1"].bootstrap, "orders", make_records(500, partitions=PARTITIONS, seed=2))
        poll_until(
            lambda: copied(pair["target"]) == 2_500, 60, "500 records produced while running", process=proc, log=log
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Progress was recorded: another run finds nothing to copy.
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert copied(pair["target"]) == 2_500


def test_ctrl_c_to_the_process_group_finishes_the_batch_and_exits_0(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    """A terminal's Ctrl-C signals the whole foreground process group; Spark's JVM and workers must not die of it
    (they have a group of their own) and PySpark must not cancel the job: the run stops as after SIGTERM."""
    config = config_for(tmp_path, pair, FLOW + "mm2py.range.max.records = 20000\n")
    produce(
        pair["dc1"].bootstrap,
        "orders",
        make_records(120_000, partitions=PARTITIONS, seed=6, value_size=64, with_headers=False),
    )
    log = tmp_path / "run.log"
    proc = start_run(config, log)
    try:
        poll_until(lambda: copied(pair["target"]) > 0, 180, "the copy to start", process=proc, log=log)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "received SIGINT" in log.read_text()


def test_sigkill_of_the_process_group_mid_copy_loses_nothing(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    """Killed while its tasks follow a source that keeps receiving records: the next run copies again only what
    the killed one had copied past its recorded progress (at most offset.flush.interval.ms or 5 s of copying)."""
    config = config_for(tmp_path, pair, FLOW)
    preload = make_records(40_000, partitions=PARTITIONS, seed=3, value_size=64, with_headers=False)
    produce(pair["dc1"].bootstrap, "orders", preload)
    load = BurstProducer(pair["dc1"].bootstrap, "orders", PARTITIONS, burst=500, interval_s=0.25)
    log = tmp_path / "run.log"
    proc = start_run(config, log)
    load.start()
    try:
        try:
            # Killed once progress was recorded while the tasks follow (every 5 s at most), so the bound below
            # is what a crash of a long-running task leaves, not everything it copied.
            poll_until(lambda: recorded_progress(pair) >= 40_000, 180, "progress recorded", process=proc, log=log)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # The JVM and the Python workers have process groups of their own and outlive the driver's for a moment
        # (the JVM exits when its driver's pipe closes, the daemon then ends its workers); what they copy in that
        # moment counts too, so the bound is read once no process of the run is left.
        poll_until(lambda: not session_processes(proc.pid), 60, "the run's JVM and workers to exit after its driver")
        at_kill = copied(pair["target"])
        unrecorded = copied_past_progress(pair)
    finally:
        produced = load.stop()
    records = preload + produced

    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    target = read_all(pair["target"].bootstrap, "orders")
    counts = Counter(r.value for r in target)
    missing = [r for r in records if r.value not in counts]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:3]}"
    duplicates = sum(n - 1 for n in counts.values())
    # At-least-once: the crash re-copies at most what was copied past the recorded progress.
    assert duplicates <= unrecorded, f"{duplicates} duplicates, {unrecorded} copied past the progress at the kill"
    for p in range(PARTITIONS):  # per-partition order holds across the crash (duplicates repeat a suffix)
        values = [r.value for r in target if r.partition == p]
        source = [r.value for r in records if r.partition == p]
        assert list(dict.fromkeys(values)) == source
    print(
        f"FIGURES SIGKILL at {at_kill} copied of {len(records)}; {unrecorded} past the recorded progress; "
        f"duplicates after resume: {duplicates}"
    )


def test_new_source_topics_are_picked_up_every_refresh_interval(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mm2.properties",
        pair,
        (
            "dc1->target.enabled = true\ntopics = orders.*\nrefresh.topics.interval.seconds = 2\n"
            "consumer.poll.timeout.ms = 200\n"
        ),
    )
    produce(pair["dc1"].bootstrap, "orders", make_records(100, partitions=PARTITIONS, seed=1))
    log = tmp_path / "run.log"
    proc = start_run(config, log)
    try:
        poll_until(lambda: copied(pair["target"], "dc1.orders") == 100, 120, "the first topic", process=proc, log=log)
        create_topic(pair["dc1"].bootstrap, "orders-eu", 2)
        produce(pair["dc1"].bootstrap, "orders-eu", make_records(40, partitions=2, seed=2))
        poll_until(lambda: copied(pair["target"], "dc1.orders-eu") == 40, 60, "the new topic", process=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

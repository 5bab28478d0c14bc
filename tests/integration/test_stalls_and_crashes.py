"""Reliability of `mm2py run` (issue "Reliability"): repeated crashes under load, stalled brokers, a killed
Spark Python worker. Every test ends by checking that no source record is missing downstream, and prints a
``FIGURES`` line (records lost, duplicates, recovery time) for the release notes: run with ``-s`` to see them.

At-least-once (MM2's default) allows duplicates; the bound checked is the one the copy task documents: a crash
re-copies at most what was copied past the recorded progress (continuous mode records it every
offset.flush.interval.ms or 5 s while tasks follow their partitions); a stall re-copies nothing beyond the
batches in flight.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.faults import BurstProducer, LandingWatch, MirrorRun, kill_busy_python_worker, worker_crashes
from tests.harness.flows_helpers import IDENTITY, config_for, copied, copied_past_progress, recorded_progress
from tests.harness.kafka_harness import (
    Record,
    TansuBroker,
    end_offsets,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 4
BATCH = 5_000
# A stall twice as long as the longest client timeout the tests set (the target's message.timeout.ms, 6 s; the
# request timeouts are 3 s): requests time out during it, and a longer stall would prove nothing more.
STALL_S = 12.0


def settings(batch: int = BATCH) -> str:
    """Merged (Identity) layout, short polls, and ``batch`` records per range."""
    return IDENTITY + f"dc1->target.consumer.poll.timeout.ms = 200\nmm2py.range.max.records = {batch}\n"


def source_total(source: TansuBroker) -> int:
    return sum(end_offsets(source.bootstrap, "orders").values())


def missing_and_duplicates(brokers: dict[str, TansuBroker]) -> tuple[int, int]:
    """(source records absent from the target, extra copies in the target); also checks per-partition order:
    duplicates may only repeat records already copied, never reorder the partition."""
    source = read_all(brokers["dc1"].bootstrap, "orders")
    target = read_all(brokers["target"].bootstrap, "orders")
    counts = Counter(r.value for r in target)
    missing = sum(1 for r in source if r.value not in counts)
    if not missing:
        for p in range(PARTITIONS):
            firsts = list(dict.fromkeys(r.value for r in target if r.partition == p))
            assert firsts == [r.value for r in source if r.partition == p], f"partition {p} out of order"
    return missing, sum(n - 1 for n in counts.values())


def wait_until_target_has_everything(run: MirrorRun, brokers: dict[str, TansuBroker], timeout: float) -> float:
    """Poll until every source record is downstream; returns when that was first seen (monotonic)."""
    expected = source_total(brokers["dc1"])
    run.wait_for(lambda: copied(brokers["target"]) >= expected, timeout, f"{expected} records downstream")
    run.wait_for(lambda: missing_and_duplicates(brokers)[0] == 0, timeout, "every source record downstream")
    return time.monotonic()


@pytest.mark.timeout(600)
def test_repeated_sigkill_under_load_loses_nothing_and_duplicates_only_what_was_past_the_progress(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    source, target = pair["dc1"], pair["target"]
    config = config_for(tmp_path, pair, settings())
    preload = make_records(40_000, partitions=PARTITIONS, seed=1, value_size=64, with_headers=False)
    produce(source.bootstrap, "orders", preload)
    load = BurstProducer(source.bootstrap, "orders", PARTITIONS, burst=200, interval_s=0.25)
    duplicates_after: list[int] = []  # cumulative duplicates right after each crash, then after the last run
    unrecorded: list[int] = []  # copied past the recorded progress at each crash: what the next run may copy again
    at_kill: list[tuple[int, int]] = []  # (copied with duplicates, source end) at each crash
    load.start()
    try:
        with LandingWatch(target.bootstrap, "orders", PARTITIONS) as watch:
            for crash in range(3):
                before = copied(target)
                recorded = recorded_progress(pair)
                with MirrorRun(config, tmp_path / f"run-{crash}.log") as run:
                    # Well past what the previous crash left unrecorded, so its re-copy is complete and its
                    # duplicates are counted for that crash; and past progress this run recorded while its
                    # tasks follow, so the crash leaves what a long-running task leaves.
                    watch.wait_landing(run, before + (unrecorded[-1] if unrecorded else 0) + 10_000, 150)
                    run.wait_for(
                        lambda floor=recorded + 10_000: recorded_progress(pair) >= floor, 60, "progress recorded"
                    )
                    run.kill()
                at_kill.append((copied(target), source_total(source)))
                duplicates_after.append(missing_and_duplicates(pair)[1])
                unrecorded.append(copied_past_progress(pair))
    finally:
        produced = load.stop()
    tail = make_records(1_000, partitions=PARTITIONS, seed=2, value_size=64, with_headers=False)
    produce(source.bootstrap, "orders", tail)

    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    expected = {r.value for r in [*preload, *produced, *tail]}
    assert len(expected) == source_total(source), "the source does not hold exactly what the test produced"
    lost, duplicates = missing_and_duplicates(pair)
    duplicates_after.append(duplicates)
    per_crash = [b - a for a, b in itertools.pairwise(duplicates_after)]
    print(
        f"\nFIGURES sigkill: {len(expected)} source records, {len(produced)} produced during the runs, "
        f"lost {lost}, duplicates per crash {per_crash} (copied past the recorded progress at each crash "
        f"{unrecorded}), (copied, source end) at each crash {at_kill}"
    )
    assert lost == 0
    assert duplicates_after[0] == 0, "duplicates before any restart"
    assert all(0 <= d <= bound for d, bound in zip(per_crash, unrecorded, strict=True)), (per_crash, unrecorded)


def wait_resumed(run: MirrorRun, target: TansuBroker, since: float, stalled_at: int) -> float:
    """Seconds from ``since`` until the remote topic grows past ``stalled_at`` (counted before any record was
    written after the stall: a run that follows its partitions copies those within a fetch)."""
    run.wait_for(lambda: copied(target) > stalled_at, 120, "the copy to resume")
    return time.monotonic() - since


# Where the run is when a broker stalls: inside a copy job (the copy tasks wait on the broker), or idle,
# caught up (the driver's own calls wait on it: end offsets, heartbeats).
WHEN = ["mid-copy", "idle"]


def freeze_when(when: str, run: MirrorRun, brokers: dict[str, TansuBroker], broker: TansuBroker) -> int:
    """SIGSTOP ``broker`` at that point of the run; returns about how many records were copied by then."""
    if when == "mid-copy":  # the first records landing: the first job is writing its ranges
        with LandingWatch(brokers["target"].bootstrap, "orders", PARTITIONS) as watch:
            landed = watch.wait_landing(run, 0, 120)
            broker.freeze()
            return landed
    wait_until_target_has_everything(run, brokers, 120)
    landed = copied(brokers["target"])
    broker.freeze()
    return landed


def stall_dataset(when: str, seed: int) -> list[Record]:
    # 1 KB values: a task spends long enough writing its 5 MB range for the stall to catch it mid-range (the stall
    # starts as the first records land); two ranges per partition, so a range is copied after the stall too.
    return make_records(
        40_000 if when == "mid-copy" else 20_000, partitions=PARTITIONS, seed=seed, value_size=1024, with_headers=False
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("when", WHEN)
def test_source_broker_frozen_past_the_client_timeouts_the_run_recovers_by_itself_and_loses_nothing(
    pair: dict[str, TansuBroker], tmp_path: Path, when: str
) -> None:
    source, target = pair["dc1"], pair["target"]
    # The source's request timeout as short as the target's below, so fetches time out during the stall.
    config = config_for(tmp_path, pair, settings() + "dc1.consumer.request.timeout.ms = 3000\n")
    data = stall_dataset(when, seed=3)
    total = len(data)
    produce(source.bootstrap, "orders", data)
    with MirrorRun(config, tmp_path / "run.log") as run:
        frozen_at = freeze_when(when, run, pair, source)
        try:
            run.assert_alive_for(STALL_S, "the source stall")
        finally:
            source.thaw()
        thawed = time.monotonic()
        stalled_at = copied(target)
        # Records written after the stall arrive too.
        produce(
            source.bootstrap,
            "orders",
            make_records(2_000, partitions=PARTITIONS, seed=4, value_size=64, with_headers=False),
        )
        resumed = wait_resumed(run, target, thawed, stalled_at)
        recovered = wait_until_target_has_everything(run, pair, 120) - thawed
        assert run.stop() == 0, run.log_text()
    lost, duplicates = missing_and_duplicates(pair)
    print(
        f"\nFIGURES source frozen {STALL_S:.0f} s ({when}, about {frozen_at}/{total} copied): lost {lost}, "
        f"duplicates {duplicates}, copying again {resumed:.1f} s and everything downstream {recovered:.1f} s "
        "after SIGCONT"
    )
    if when == "mid-copy":
        assert frozen_at < total, "the copy finished before the stall: make the dataset larger"
    assert lost == 0
    assert duplicates <= BATCH * PARTITIONS


# Mid-copy on both copy paths (each has its own way of surviving timed-out produces); idle only on the default
# path, since what an idle run writes to the target (heartbeats) does not depend on the copy path.
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("when", "path"), [("mid-copy", "record"), ("mid-copy", "batch"), ("idle", "batch")])
def test_target_broker_frozen_past_the_client_timeouts_timed_out_producers_are_replaced_and_nothing_is_lost(
    pair: dict[str, TansuBroker], tmp_path: Path, when: str, path: str
) -> None:
    source, target = pair["dc1"], pair["target"]
    # Short client timeouts, so records time out during the stall (_MSG_TIMED_OUT) and the copy task must
    # replace its idempotent producer: tansu refuses the epoch bump that would otherwise follow
    # (docs/test-broker.md, *Idempotent producer after a stall*).
    config = config_for(
        tmp_path,
        pair,
        settings()
        + "target.producer.message.timeout.ms = 6000\ntarget.producer.socket.timeout.ms = 3000\n"
        + f"mm2py.copy.mode = {path}\n",
    )
    validated = mm2py("validate", str(config))
    assert validated.returncode == 0 and "0 warning(s)" in validated.stdout, validated.stdout + validated.stderr
    data = stall_dataset(when, seed=5)
    total = len(data)
    produce(source.bootstrap, "orders", data)
    load = BurstProducer(source.bootstrap, "orders", PARTITIONS, burst=1_000, interval_s=0.5)
    with MirrorRun(config, tmp_path / "run.log") as run:
        frozen_at = freeze_when(when, run, pair, target)
        load.start()  # the source keeps receiving records while the target is stalled
        try:
            try:
                run.assert_alive_for(STALL_S, "the target stall")
            finally:
                target.thaw()
            thawed = time.monotonic()
        finally:
            produced = load.stop()
        recovered = wait_until_target_has_everything(run, pair, 150) - thawed
        assert run.stop() == 0, run.log_text()
    log = run.log_text()
    lost, duplicates = missing_and_duplicates(pair)
    failed_attempts = [t for t in run.task_ends() if t.failed]
    timed_out = sum(1 for t in failed_attempts if "Message timed out" in t.description)
    driver_retries = log.count("will retry in")
    print(
        f"\nFIGURES target frozen {STALL_S:.0f} s ({when}, about {frozen_at}/{total} copied, {len(produced)} "
        f"produced meanwhile): lost {lost}, duplicates {duplicates}, {timed_out} task attempts timed out, "
        f"{len(failed_attempts)} failed task attempts, {driver_retries} driver retries, everything downstream "
        f"{recovered:.1f} s after SIGCONT"
    )
    if when == "mid-copy":
        assert frozen_at < total, "the copy finished before the stall: make the dataset larger"
        if path == "record":
            assert timed_out >= 1, "no record timed out: the producer-replacement path was not exercised\n" + log
        else:  # the batch path resends the same batches (same sequence numbers) until the target answers
            assert "resending its unacknowledged batches" in log or failed_attempts, log
    else:  # the driver's own writes to the target (heartbeats) fail meanwhile, and are written again after
        assert (
            "heartbeat flow=dc1->target failed" in log and "heartbeats flow=dc1->target are being written again" in log
        ), log
    assert lost == 0
    # A timed-out request may still be written once the broker wakes (it sat in the broker's socket buffer;
    # docs/test-broker.md, *Idempotent producer after a stall*), so every failed attempt may leave one copy
    # of each range of its task behind (a task serves PARTITIONS / 2 partitions under local[2]).
    assert duplicates <= max(1, len(failed_attempts)) * BATCH * (PARTITIONS // 2)


@pytest.mark.timeout(240)
def test_a_killed_spark_python_worker_is_retried_by_spark_and_nothing_is_lost(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    """A following task whose Python worker dies: Spark runs it again, from the progress its predecessor
    recorded, and the run goes on."""
    source, target = pair["dc1"], pair["target"]
    config = config_for(tmp_path, pair, settings())
    preload = make_records(100_000, partitions=PARTITIONS, seed=6, value_size=64, with_headers=False)
    produce(source.bootstrap, "orders", preload)
    # A steady load keeps every task's worker busy: a worker seen busy is inside its (following) task.
    load = BurstProducer(source.bootstrap, "orders", PARTITIONS, burst=500, interval_s=0.1)
    with MirrorRun(config, tmp_path / "run.log") as run, LandingWatch(target.bootstrap, "orders", PARTITIONS) as watch:
        load.start()
        try:
            watch.wait_landing(run, BATCH, 120)  # records are landing: tasks are past their first reads
            # Progress recorded while following: the kill leaves what a long-running task leaves.
            run.wait_for(lambda: recorded_progress(pair) >= len(preload), 60, "progress recorded")
            # A following task on a trickle uses a few per cent of a core; an idle pooled worker uses none.
            kill_busy_python_worker(run, 60, window_s=0.5, windows=3, min_share=0.02)
            killed_at = watch.sample()
            unrecorded = copied_past_progress(pair)  # the killed task's process is gone: no more progress from it
            run.wait_for(lambda: copied(target) > killed_at + 10_000, 120, "the copy to go on after the kill")
        finally:
            load.stop()
        wait_until_target_has_everything(run, pair, 120)
        assert run.stop() == 0, run.log_text()
    lost, duplicates = missing_and_duplicates(pair)
    retried = [t for t in run.task_ends() if t.attempt > 0]
    print(
        f"\nFIGURES python worker SIGKILLed mid-task at about {killed_at} copied: lost {lost}, duplicates "
        f"{duplicates} ({unrecorded} copied past the recorded progress at the kill)"
    )
    assert worker_crashes(run) == 1
    assert [t.reason for t in retried] == ["Success"], "Spark retried the crashed task once, successfully"
    assert lost == 0
    assert duplicates <= unrecorded, "more was copied twice than the killed task had not recorded"

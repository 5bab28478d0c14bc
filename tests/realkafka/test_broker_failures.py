"""The batch path through broker failures on real three-node Kafka clusters (issue 20), scaled down to fit
``make test``: the scenarios of ``tests/harness/fault_scenarios.py`` once each, 200,000 records of 100 bytes over 8
partitions per ``--once`` run, 4,000 records/s in continuous mode, every record checked (key, value, headers,
timestamp, partition, order). ``bench/broker_faults.py`` runs them at full size, many times, and also a rolling
restart under a full-speed ``--once`` (here a copy of this size outruns the roll: the first node alone would go
down mid-copy, which the leader kills below already show).

Both clusters are RF 3 with min.insync.replicas 2 and the copy path is the default one (``auto``: batch). What
must hold after each fault: the run exits 0 (a continuous one stays up until stopped), and the target holds
every source record exactly once, in order. The fault tests share one source and one target cluster for the
module (``make test`` runs the module in one worker, beside the rest of the suite in the other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness.broker_faults import fault_cluster
from tests.harness.fault_bed import Bed, Outcome
from tests.harness.fault_scenarios import (
    churn_continuous,
    leader_kill,
    partition_offline_once,
    rolling_continuous,
    stall_leader,
)
from tests.harness.real_kafka import OTHER_VERSIONS, KafkaJarsMissing, KafkaRuntime
from tests.harness.shared_clusters import SHARED

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

RECORDS = 200_000  # per --once run: about 2 s of copying at full speed here, 26 MB
VERSION_RECORDS = 100_000
# The target producer's request.timeout.ms in the stall test (Java's default, and mm2py's, is 30 s): the stall
# must outlast it, and a longer one proves nothing more.
REQUEST_TIMEOUT_S = 10


def _runtime(version: str | None = None) -> KafkaRuntime:
    try:
        return KafkaRuntime.locate(version)
    except KafkaJarsMissing as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    """A three-node source and a three-node target (the pinned Kafka), for this module only: six JVMs are not
    kept for the rest of the session."""
    runtime = _runtime()
    work = tmp_path_factory.mktemp("broker-faults")
    source, target = fault_cluster(work / "source", runtime), fault_cluster(work / "target", runtime)
    try:
        source.start()
        target.start()
        yield Bed(SHARED.lend("broker-faults source", source), SHARED.lend("broker-faults target", target), work)
    finally:
        # As for the session's three-node cluster: nothing is kept, so the last KRaft leader's 5 s wait for
        # followers that are already gone is cut short.
        SHARED.take_back(source)
        SHARED.take_back(target)
        source.stop(timeout=3.0)
        target.stop(timeout=3.0)


def check(outcome: Outcome, record_property: Callable[[str, object], None]) -> None:
    """Exit 0 and every record exactly once, in order; what was measured goes into the test report."""
    record_property("outcome", outcome.row())
    record_property("notes", {k: v for k, v in outcome.notes.items() if k != "churn"})
    tail = Path(outcome.log).read_text(errors="replace")[-6000:] if Path(outcome.log).is_file() else ""
    assert outcome.exit_code == 0, f"{outcome.row()}\n{tail}"
    assert outcome.comparison.exact, f"{outcome.comparison.summary()}\n{outcome.row()}\n{tail}"
    assert outcome.comparison.source_records >= outcome.records > 0


def test_a_target_leader_sigkilled_at_40_percent_of_a_once_copy(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """The node leading most remote partitions dies mid-copy: its in-flight Produce requests end in a lost
    connection, the partitions get new leaders after the session timeout, and the batches in doubt are resent
    with their sequences, so the new leaders write them once."""
    outcome = leader_kill(bed, RECORDS, side="target", at=0.4, how="sigkill")
    check(outcome, record_property)
    assert outcome.events[0].copied < 1.0, "the node died after the copy: nothing was proven"


def test_a_source_leader_sigkilled_at_40_percent_of_a_once_copy(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """The node leading most source partitions dies mid-copy: fetching goes on at the new leaders from the same
    offsets, nothing skipped, nothing read twice."""
    outcome = leader_kill(bed, RECORDS, side="source", at=0.4, how="sigkill")
    check(outcome, record_property)
    assert outcome.events[0].copied < 1.0, "the node died after the copy: nothing was proven"


def test_a_continuous_copy_stays_up_through_rolling_restarts_of_the_target_and_the_source(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """4,000 records/s while every target node in turn is stopped (SIGTERM: leaderships move first) and started
    again, then every source node in turn is SIGKILLed and started again, each back in sync before the next."""
    outcome = rolling_continuous(bed, [("target", "sigterm"), ("source", "sigkill")], rate=4000, gap_s=3)
    check(outcome, record_property)
    assert outcome.notes["alive_until_stopped"], "the continuous run exited before it was stopped"
    downs = [(e.cluster, e.node, e.action) for e in outcome.events if e.action in ("sigterm", "sigkill")]
    assert downs == [("target", n, "sigterm") for n in (1, 2, 3)] + [("source", n, "sigkill") for n in (1, 2, 3)]


def test_a_target_leader_stalled_past_the_request_timeout_holds_up_nothing_for_good(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """The node leading most remote partitions is SIGSTOPped for longer than the request timeout: its requests
    time out, its partitions get new leaders, the batches in doubt go there with their sequences; after SIGCONT
    it finds itself a follower and truncates what it may have appended alone."""
    outcome = stall_leader(bed, RECORDS, seconds=REQUEST_TIMEOUT_S + 5, at=0.3, request_timeout_s=REQUEST_TIMEOUT_S)
    check(outcome, record_property)
    assert [e.action for e in outcome.events] == ["sigstop", "sigcont"]
    assert outcome.events[0].copied < 1.0, "the node stalled after the copy: nothing was proven"


def test_leader_elections_and_reassignments_write_nothing_twice_and_fail_no_task(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """4,000 records/s while the remote topic's replicas are reordered or moved and a preferred-leader election
    runs every 2 s: NOT_LEADER_OR_FOLLOWER answers send batches to the new leaders, never twice, and no Spark
    task attempt fails (a failed task would copy its ranges again)."""
    outcome = churn_continuous(bed, rate=4000, seconds=14, interval_s=2)
    check(outcome, record_property)
    assert outcome.failed_tasks == [], outcome.failed_tasks
    churn = outcome.notes["churn"]
    moved = [e for e in churn if e["leaders_before"] != e["leaders_after"]]
    record_property("churn_events", len(churn))
    assert len(churn) >= 3 and len(moved) >= 2, f"too little churn to prove anything: {churn}"


def test_a_partition_with_all_replicas_down_is_copied_once_back_and_the_once_run_exits_0(
    bed: Bed, record_property: Callable[[str, object], None]
) -> None:
    """A source partition whose only replica is down when a ``--once`` run starts, and back 5 s after the others
    were copied (45 s at the latest, well within ``mm2py.retry.timeout.seconds``): the others are copied
    meanwhile, the run, left with that partition alone, waits for it, copies it, and exits 0."""
    outcome = partition_offline_once(bed, RECORDS // 2, seconds=45, hold_s=5)
    check(outcome, record_property)
    assert outcome.notes["first_run_exit"] == 0
    # The other partitions were copied while partition 0 had no leader (placing a flow needs each partition's
    # log start and end; one without a leader is placed once it is back, from its stored progress).
    assert outcome.notes["others_copied_after_s"] is not None, outcome.notes


@pytest.mark.parametrize("version", OTHER_VERSIONS)
def test_a_leader_killed_mid_copy_on_another_broker_version_as_source_and_as_target(
    bed: Bed, version: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """A three-node cluster of ``version`` as the source (its busiest leader SIGKILLed at 40 % of a ``--once``
    copy), then as the target (the same), the pinned version on the other side: the wire client's API versions
    and error handling hold for a 3.x broker (which still serves what 4.0 removed, KIP-896) and the newest 4.x."""
    other = fault_cluster(tmp_path / f"kafka-{version}", _runtime(version))
    try:
        other.start()
        as_source = leader_kill(Bed(other, bed.target, tmp_path / "as-source"), VERSION_RECORDS, side="source")
        as_target = leader_kill(bed.with_target(other, tmp_path / "as-target"), RECORDS, side="target")
    finally:
        other.stop(timeout=3.0)
    for outcome in (as_source, as_target):
        check(outcome, record_property)
        assert outcome.events[0].copied < 1.0, "the node died after the copy: nothing was proven"

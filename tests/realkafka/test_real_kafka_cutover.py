"""``mm2py cutover`` on real Kafka: two groups move from A to B with nothing read twice and nothing skipped.

The groups' consumers record every (topic, partition, offset) they process and the record's unique id
(tests/harness/recording_consumer.py), on A before the switch-over and on B after it, so "exactly once across
A and B" is counted, not assumed. The same flow also shows the refusals (a live member, a lease holder that
does not hand the flow over), that a dry run changes nothing, and that ``run`` refuses the flow until ``--reset``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mm2py.control.lease import FlowLease
from tests.harness.kafka_harness import (
    Record,
    committed_group,
    end_offsets,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import one_flow_config
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 8
RECORDS = 20_000
COPIED_FIRST = 12_000  # by a `run --once` before the switch-over; the rest the cut-over copies itself
BEHIND = 6_000  # records the lagging group processed on A


def _cutover(config: Path, flow: str, groups: str, *extra: str) -> Any:
    return mm2py("cutover", str(config), "--flow", flow, "--groups", groups, "--quiet-seconds", "2", *extra)


def _state_of_b(b: KafkaCluster, remote: str, groups: list[str], flow: str) -> dict[str, Any]:
    """What a dry run must leave as it was on B: the groups' offsets, the flow's topics (named after its
    aliases; other tests create theirs on this shared cluster meanwhile), the remote topic's ends, the flow's
    progress records, and its cut-over mark (its records in the lease topic)."""
    topics = list_topics(b.bootstrap)
    aliases = flow.split("->")
    marks = [
        (r.key, r.value)
        for r in (read_all(b.bootstrap, "mm2py-leases.internal") if "mm2py-leases.internal" in topics else [])
        if r.key == f"cutover:{flow}".encode()
    ]
    return {
        "offsets": {g: committed_group(b.bootstrap, g, remote, PARTITIONS) for g in groups},
        "topics": sorted(t for t in topics if any(alias in t for alias in aliases)),
        "ends": end_offsets(b.bootstrap, remote),
        "progress": end_offsets(b.bootstrap, f"mm2-offsets.{aliases[0]}.internal"),
        "marks": marks,
    }


def test_a_planned_switch_over_moves_two_groups_with_nothing_read_twice_or_skipped(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    a, b = real_kafka, real_kafka_target
    topic = a.create_topic(unique_topic("orders"), partitions=PARTITIONS)
    config, src, tgt = one_flow_config(tmp_path / "mm2.properties", a.bootstrap, b.bootstrap, topic)
    flow, remote = f"{src}->{tgt}", f"{src}.{topic}"
    ahead, behind = f"ahead-{topic}", f"behind-{topic}"
    groups = f"{re.escape(ahead)}|{re.escape(behind)}"
    records = make_records(RECORDS, partitions=PARTITIONS, seed=31)
    produce(a.bootstrap, topic, records[:COPIED_FIRST])
    first = mm2py("run", str(config), "--once")
    assert first.returncode == 0, first.stderr
    produce(a.bootstrap, topic, records[COPIED_FIRST:])  # the producers' last records: B lacks them

    ahead_a = RecordingConsumer(src, a.bootstrap, ahead, topic, "ahead-app-on-a")
    behind_a = RecordingConsumer(src, a.bootstrap, behind, topic, "behind-app-on-a")
    ahead_a.consume(until_ends=end_offsets(a.bootstrap, topic))
    behind_a.consume(until_records=BEHIND)

    # Consumers still in their groups on A: refused, naming the group, its client and the cluster.
    busy = _cutover(config, flow, groups)
    assert busy.returncode == 1, busy.stderr
    assert f"group {ahead} has 1 member(s) on {src}" in busy.stderr and "ahead-app-on-a" in busy.stderr, busy.stderr
    ahead_a.close()
    behind_a.close()

    # A holder of the flow's lease that does not hand it over (the product's lease, taken here without the
    # watch a run gives it, as an mm2py without hand-over holds it): refused once the timeout passes, naming it.
    lease = FlowLease(src, tgt, {"bootstrap.servers": b.bootstrap}, {"bootstrap.servers": b.bootstrap}, 6000)
    try:
        assert lease.acquire(threading.Event(), wait=False)
        held = _cutover(config, flow, groups, "--handover-timeout", "2")
    finally:
        lease.release()
    assert held.returncode == 1, held.stderr
    assert f"flow {flow} is being replicated by {lease.identity}" in held.stderr, held.stderr
    assert "did not hand the flow over within --handover-timeout 2 s" in held.stderr, held.stderr

    # The drill: every check, the current lag, nothing changed on B.
    before = _state_of_b(b, remote, [ahead, behind], flow)
    drill = _cutover(config, flow, groups, "--dry-run", "--json")
    assert drill.returncode == 0, drill.stderr
    dry = json.loads(drill.stdout)
    assert dry["dry_run"] and not dry["copied"] and dry["refusals"] == []
    assert [t["lag"] for t in dry["topics"]] == [RECORDS - COPIED_FIRST]
    assert _state_of_b(b, remote, [ahead, behind], flow) == before

    switched = _cutover(config, flow, groups, "--json")
    assert switched.returncode == 0, switched.stderr
    report = json.loads(switched.stdout)
    assert report["copied"] and [(t["holds_all"], t["source_end_offsets"]) for t in report["topics"]] == [
        (True, RECORDS)
    ]
    moves = report["groups"]
    assert {m["group"] for m in moves} == {ahead, behind}
    assert all((m["method"], m["read_again"], m["skipped"]) == ("exact", 0, 0) for m in moves), moves
    assert report["totals"] == {"read_again": 0, "skipped": 0}
    assert len(report["marks"][0]["positions"]) == PARTITIONS

    # The same groups' consumers, now on B, read to the end.
    ids = [r.value or b"" for r in records]
    b_ends = end_offsets(b.bootstrap, remote)
    figures: dict[str, tuple[int, int, int, int]] = {}
    for group, on_a in ((ahead, ahead_a), (behind, behind_a)):
        on_b = RecordingConsumer(tgt, b.bootstrap, group, remote, f"{group}-app-on-b")
        try:
            on_b.consume(until_ends=b_ends)
        finally:
            on_b.close()
        twice, skipped = once_per_group(on_a.processed + on_b.processed, ids)
        figures[group] = (len(on_a.processed), len(on_b.processed), twice, skipped)
    record_property("processed_on_a_on_b_twice_skipped", figures)
    assert figures[ahead] == (RECORDS, 0, 0, 0), figures
    assert figures[behind] == (BEHIND, RECORDS - BEHIND, 0, 0), figures

    # The flow stays stopped, saying why, until the mark is cleared.
    refused = mm2py("run", str(config), "--once")
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"flow {flow} was cut over at" in line and "`mm2py cutover`" in line, line
    assert f"--flow {flow} --reset" in line, line
    cleared = mm2py("cutover", str(config), "--flow", flow, "--reset")
    assert cleared.returncode == 0 and "cleared the cut-over mark" in cleared.stdout, cleared.stderr
    again = mm2py("run", str(config), "--once")
    assert again.returncode == 0, again.stderr


def test_a_source_still_written_to_is_refused_naming_the_moving_partitions_and_a_drill_reports_it(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    a, b = real_kafka, real_kafka_target
    topic = a.create_topic(unique_topic("orders"), partitions=2)
    config, src, tgt = one_flow_config(tmp_path / "mm2.properties", a.bootstrap, b.bootstrap, topic)
    flow = f"{src}->{tgt}"
    produce(a.bootstrap, topic, make_records(100, partitions=2, seed=1))
    stop = threading.Event()

    def keep_writing() -> None:  # a producer that has not been stopped, on partition 1 only
        seq = 0
        while not stop.wait(0.2):
            produce(a.bootstrap, topic, [Record(None, f"late-{seq}".encode(), [], int(time.time() * 1000), 1)])
            seq += 1

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        drill = mm2py(
            "cutover", str(config), "--flow", flow, "--quiet-seconds", "2", "--quiet-timeout", "6", "--dry-run"
        )
        refused = mm2py("cutover", str(config), "--flow", flow, "--quiet-seconds", "2", "--quiet-timeout", "6")
    finally:
        stop.set()
        writer.join(timeout=10)
    assert drill.returncode == 1, drill.stderr
    assert f"cutover {flow} (dry run: nothing changed)" in drill.stdout, drill.stdout
    assert f"would refuse: producers are still writing on {src}" in drill.stderr, drill.stderr
    assert refused.returncode == 1, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"producers are still writing on {src}" in line and f"{topic}-1" in line and f"{topic}-0" not in line, line
    assert f"{src}.{topic}" not in list_topics(b.bootstrap)  # refused before anything was copied

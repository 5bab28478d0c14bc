"""``mm2py failover`` on real Kafka: A's every node SIGKILLed during a continuous copy, with a backlog B never got;
the group moved to B from what B holds alone, nothing B holds skipped and nothing the checkpoints cover read twice.

A is a cluster of this test's own (it is killed); B is the session's shared target (only uniquely named topics
and groups, and marks of a flow with unique aliases, are written there). The group's consumers record every
record they process (tests/harness/recording_consumer.py), on A before the loss and on B after it.

The run is frozen (so that it lists nothing more) and SIGKILLed with A, as when both die with A's data centre
(a SIGTERM after A's loss: tests/realkafka/test_stop_without_source.py); its lease then lapses before failover
may start. What it listed of A is on B all the same: it keeps the ends it saw beyond its copy beside its
checkpoints.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from mm2py.control.lease import FlowLease, lease_group
from mm2py.librdkafka.admin import ClusterAdmin
from tests.harness.faults import MirrorRun, session_processes
from tests.harness.kafka_harness import (
    committed_group,
    consumer_config,
    end_offsets,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import checkpointed, kept_ends, one_flow_config, replicated_to
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
FIRST = 4_000  # copied by `run --once` before the continuous run
BACKLOG = 12_000  # produced before the continuous run starts, which is stopped while it copies them
PROCESSABLE = 4_000  # the part of the backlog produced before the group processes records on A
UNLISTED = 1_000  # produced after the run stopped, then A is killed: no run ever listed them
PROCESSED_ON_A = 5_000  # records the group processed on A before A was lost (of FIRST + PROCESSABLE)
# Small ranges, so that the backlog takes many of them and A dies with part of it listed but not copied.
FLOW_SETTINGS = (
    "offset-syncs.topic.location = target\n"
    "emit.checkpoints.interval.seconds = 1\n"
    "mm2py.continuous.tasks = rounds\n"
    "mm2py.range.max.records = 50\n"
)


def _marks(b: KafkaCluster, flow: str) -> list[tuple[bytes | None, bytes | None]]:
    if "mm2py-leases.internal" not in list_topics(b.bootstrap):
        return []
    return [
        (r.key, r.value) for r in read_all(b.bootstrap, "mm2py-leases.internal") if r.key == f"cutover:{flow}".encode()
    ]


def _state_of_b(b: KafkaCluster, flow: str, group: str, remote: str) -> dict[str, Any]:
    """What a dry run must leave as it was on B: the group's offsets, the flow's topics (named after its aliases),
    the remote topic's ends, and the flow's cut-over mark."""
    aliases = flow.split("->")
    return {
        "offsets": committed_group(b.bootstrap, group, remote, PARTITIONS),
        "topics": sorted(t for t in list_topics(b.bootstrap) if any(alias in t for alias in aliases)),
        "ends": end_offsets(b.bootstrap, remote),
        "marks": _marks(b, flow),
    }


def test_failover_without_the_source_moves_the_group_to_b_with_nothing_b_holds_skipped_or_read_twice(
    kafka_runtime: KafkaRuntime,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    b = real_kafka_target
    with KafkaCluster(tmp_path / "a", 1, runtime=kafka_runtime) as a:
        topic = a.create_topic(unique_topic("orders"), partitions=PARTITIONS)
        config, src, tgt = one_flow_config(tmp_path / "mm2.properties", a.bootstrap, b.bootstrap, topic, FLOW_SETTINGS)
        # Progress recorded often (a worker key, read from the target's settings): the wait for it ends mid-backlog.
        config.write_text(f"{config.read_text()}{tgt}.offset.flush.interval.ms = 200\n")
        flow, remote, group = f"{src}->{tgt}", f"{src}.{topic}", f"billing-{topic}"
        records = make_records(FIRST + BACKLOG + UNLISTED, partitions=PARTITIONS, seed=31)
        produce(a.bootstrap, topic, records[:FIRST])
        first = mm2py("run", str(config), "--once")
        assert first.returncode == 0, first.stderr
        produce(a.bootstrap, topic, records[FIRST : FIRST + PROCESSABLE])

        on_a = RecordingConsumer(src, a.bootstrap, group, topic, "billing-on-a")
        on_a.consume(until_records=PROCESSED_ON_A)
        on_a.close()
        committed_on_a = {p: o for p, o in committed_group(a.bootstrap, group, topic, PARTITIONS).items() if o >= 0}
        # The rest of the backlog lies beyond the group's position on every partition, so that the run can be
        # stopped after it copied past that position and before it copied the whole backlog.
        produce(a.bootstrap, topic, records[FIRST + PROCESSABLE : FIRST + BACKLOG])

        listed = end_offsets(a.bootstrap, topic)
        with MirrorRun(config, tmp_path / "run.log") as run:
            # The checkpoints cover the group's last position on A, and the run has kept (beside them) the ends it
            # listed on A, the whole backlog, while it copies it in small rounds.
            run.wait_for(
                lambda: checkpointed(b.bootstrap, src, group, remote) == committed_on_a, 120, "the group's checkpoints"
            )
            run.wait_for(lambda: kept_ends(b.bootstrap, src, topic) == listed, 60, "the listed ends kept on B")
            # The copy has passed the group's position, so the syncs on B place it exactly. (A group ahead of a
            # range written but not yet recorded re-reads that range: tests/unit/test_failover_recovery.py.)
            run.wait_for(
                lambda: all(replicated_to(b.bootstrap, src, topic).get(p, 0) >= o for p, o in committed_on_a.items()),
                120,
                "the copy to pass the group's position",
            )
            # Frozen mid-copy (it lists nothing more), more records reach A, then A's every node and the run are
            # SIGKILLed.
            for pid in session_processes(run.session):
                os.kill(pid, signal.SIGSTOP)
            produce(a.bootstrap, topic, records[FIRST + BACKLOG :])
            a_ends = end_offsets(a.bootstrap, topic)
            for node in a.nodes:
                a.kill_node(node.node_id)
            killed_at = time.monotonic()
            run.kill()
        # The killed run's lease lapses after its session timeout; until then failover refuses, naming it.
        lease_members = ClusterAdmin(tgt, {"bootstrap.servers": b.bootstrap}).describe_group
        poll_until(lambda: not lease_members(lease_group(src, tgt)).members, 60, "the killed run's lease to lapse")
        b_ends = end_offsets(b.bootstrap, remote)
        true_missing = {p: a_ends[p] - b_ends[p] for p in range(PARTITIONS)}  # one record per offset: no markers
        unlisted = {p: sum(1 for r in records[FIRST + BACKLOG :] if r.partition == p) for p in range(PARTITIONS)}
        record_property("lag_at_kill_records", sum(true_missing.values()))
        assert sum(true_missing.values()) > sum(unlisted.values()), "the run copied the whole backlog before it stopped"

        # A consumer of the group already on B: refused (the drill too), naming the group, its client and B.
        member = Consumer(consumer_config(b.bootstrap, **{"group.id": group, "client.id": "early-app-on-b"}))
        member.subscribe([remote])
        try:
            poll_until(lambda: (member.poll(0.2), member.assignment())[1], 60, "a member of the group on B")
            busy = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group))
            busy_drill = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group), "--dry-run")
        finally:
            member.close()
        assert busy.returncode == 1, busy.stderr
        (line,) = busy.stderr.strip().splitlines()
        assert f"group {group} has 1 member(s) on {tgt}" in line and "early-app-on-b" in line, line
        assert busy_drill.returncode == 1 and "would refuse: group" in busy_drill.stderr, busy_drill.stderr

        # A run holding the flow's lease (the product's own lease, taken here) would copy into B when A returns.
        lease = FlowLease(src, tgt, {"bootstrap.servers": b.bootstrap}, {"bootstrap.servers": b.bootstrap}, 6000)
        try:
            assert lease.acquire(threading.Event(), wait=False)
            held = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group))
        finally:
            lease.release()
        assert held.returncode == 1, held.stderr
        assert f"flow {flow} is being replicated by {lease.identity}" in held.stderr, held.stderr

        before = _state_of_b(b, flow, group, remote)
        text = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group), "--dry-run")
        assert text.returncode == 0, text.stderr
        record_property("dry_run_report", text.stdout)
        total = sum(true_missing.values()) - sum(unlisted.values())
        assert f"failover {flow} (dry run: nothing changed): {src} not contacted" in text.stdout, text.stdout
        assert f"not replicated: at least {total} record(s) over {PARTITIONS} partition(s)" in text.stdout, (
            f"{true_missing=} {unlisted=}\n{text.stdout}"
        )
        drill = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group), "--dry-run", "--json")
        assert drill.returncode == 0, drill.stderr
        assert json.loads(drill.stdout)["refusals"] == []
        assert _state_of_b(b, flow, group, remote) == before

        started = time.monotonic()
        failed_over = mm2py("failover", str(config), "--flow", flow, "--groups", re.escape(group), "--json")
        took_s = time.monotonic() - started
        assert failed_over.returncode == 0, failed_over.stderr
        record_property("failover_seconds", round(took_s, 1))
        record_property("seconds_from_kill_to_failed_over", round(time.monotonic() - killed_at, 1))
        assert took_s < 60, f"failover took {took_s:.1f} s"
        report: dict[str, Any] = json.loads(failed_over.stdout)

        # The recovery point: a lower bound of what B lacks, per partition, short by exactly the records written
        # after the run's last listing.
        point = report["recovery_point"]
        bound = {r["partition"]: r["not_replicated_at_least"] for r in point["partitions"]}
        record_property("not_replicated_reported_vs_true", (sum(bound.values()), sum(true_missing.values())))
        assert point["lower_bound"] and point["newest_replicated_age_seconds"] is not None
        assert all(bound[p] <= true_missing[p] for p in range(PARTITIONS)), (bound, true_missing)
        assert {p: true_missing[p] - bound[p] for p in range(PARTITIONS)} == unlisted
        holds = {r["partition"]: r["replicated_to"] + r["on_target_beyond_progress"] for r in point["partitions"]}
        assert holds == b_ends  # a range written when the run was killed, its progress not yet, is counted off
        landed = {g["partition"]: g for g in report["groups"]}
        assert sorted(landed) == sorted(committed_on_a) and report["committed"] == {group: len(committed_on_a)}
        assert {p: g["checkpoint_upstream_offset"] for p, g in landed.items()} == committed_on_a
        assert report["mark"]["command"] == "failover"
        assert {g["method"] for g in report["groups"]} == {"exact"}, report["groups"]

        # The group's consumers on B: every record B holds processed once across A and B.
        held = read_all(b.bootstrap, remote)
        on_b = RecordingConsumer(tgt, b.bootstrap, group, remote, "billing-on-b")
        try:
            on_b.consume(until_ends=b_ends)
        finally:
            on_b.close()
        twice, skipped = once_per_group(on_a.processed + on_b.processed, [r.value or b"" for r in held])
        record_property("processed_on_a_on_b_twice_skipped", (len(on_a.processed), len(on_b.processed), twice, skipped))
        record_property("methods", sorted({g["method"] for g in report["groups"]}))
        assert (twice, skipped) == (0, 0) and on_b.processed

        refused = mm2py("run", str(config), "--once")
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert f"flow {flow} was cut over at" in line and "`mm2py failover`" in line and "--reset" in line, line
        cleared = mm2py("failover", str(config), "--flow", flow, "--reset")
        assert cleared.returncode == 0 and "cleared the cut-over mark" in cleared.stdout, cleared.stderr
        assert _marks(b, flow)[-1][1] is None

"""``mm2py failback`` on real Kafka: after a planned switch-over A->B, A took 5,000 more records that B never got;
failback keeps them on B record by record, starts B->A at the cut-over so B's newer records reach A and none of B's
older ones, and clears the mark, once.

A and B are the session's shared clusters: the test creates only uniquely named topics and groups, under cluster
aliases of its own (so the progress, lease and mark records are its own too).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mm2py.config import load
from mm2py.control.cutover_mark import CutPosition, read_mark
from mm2py.control.lease import FlowLease
from mm2py.control.topics import ensure_internal_topics, lease_topic
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.tools.cutover.tail import divergent_tail
from mm2py.tools.cutover.tail_copy import preserve_tail
from tests.harness.kafka_harness import (
    Record,
    commit_group,
    committed_group,
    end_offsets,
    list_topics,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import IDENTITY, unique_alias, write_real_config
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
COPIED = 8_000  # on A, replicated to B before the switch-over
TAIL = 5_000  # written to A after the switch-over: B never gets them
B_BEFORE = 400  # written to B's own topic before the switch-over: B's history, which A must not get
B_AFTER = 1_000  # written to B's own topic after the switch-over: what B->A must bring to A
LEDGER_ON_B = 600  # of them, processed on B by the group that returns to A
HALF = 300  # records of a partition's tail an interrupted failback had kept already


def _standing_marks(cluster: KafkaCluster, flow: str, kind: str = "cutover") -> list[bytes]:
    """The flow's cut-over mark (or failback record) as the lease topic leaves it: the newest record under its
    key, unless a tombstone."""
    if "mm2py-leases.internal" not in list_topics(cluster.bootstrap):
        return []
    key = f"{kind}:{flow}".encode()
    values = [r.value for r in read_all(cluster.bootstrap, "mm2py-leases.internal") if r.key == key]
    return [values[-1]] if values and values[-1] is not None else []


def _state(a: KafkaCluster, b: KafkaCluster, topic: str, aliases: tuple[str, str], group: str) -> dict[str, Any]:
    """What a dry run must leave as it was: the group's offsets on both sides, the test's topics on both clusters
    and their ends (the progress topics among them), and the standing mark."""
    src, tgt = aliases

    def mine(cluster: KafkaCluster) -> dict[str, dict[int, int]]:
        names = [t for t in list_topics(cluster.bootstrap) if topic in t or src in t or tgt in t]
        return {t: end_offsets(cluster.bootstrap, t) for t in sorted(names)}

    return {
        "group on A": committed_group(a.bootstrap, group, topic, PARTITIONS),
        "group on B": committed_group(b.bootstrap, group, f"{src}.{topic}", PARTITIONS),
        "A": mine(a),
        "B": mine(b),
        "mark": _standing_marks(b, f"{src}->{tgt}"),
    }


def _both_ways(path: Path, a: KafkaCluster, b: KafkaCluster, topic: str, more: str = "") -> tuple[Path, str, str]:
    """A file with the flow A->B and its reverse B->A (failback starts it) on ``topic``, new aliases for A and B:
    the file, A's alias and B's alias."""
    src, tgt = unique_alias("src"), unique_alias("tgt")
    body = (
        f"{src}->{tgt}.enabled = true\n{tgt}->{src}.enabled = true\ntopics = {topic}\n"
        f"heartbeats.replication.enabled = false\n{more}"
    )
    return write_real_config(path, {src: a.bootstrap, tgt: b.bootstrap}, body), src, tgt


def _identity(r: Record) -> tuple[Any, ...]:
    return (r.partition, r.key, r.value, r.headers, r.timestamp)


def test_failback_keeps_as_tail_the_records_b_never_got_and_starts_b_to_a_at_the_cut_over(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    a, b = real_kafka, real_kafka_target
    topic = unique_topic("orders")
    a.create_topic(topic, partitions=PARTITIONS)
    b.create_topic(topic, partitions=PARTITIONS)  # B's own topic of the same name: the applications write it later
    config, src, tgt = _both_ways(tmp_path / "mm2.properties", a, b, topic)
    flow, reverse, remote = f"{src}->{tgt}", f"{tgt}->{src}", f"{src}.{topic}"
    group, ledger = f"billing-{topic}", f"ledger-{topic}"

    produce(b.bootstrap, topic, make_records(B_BEFORE, partitions=PARTITIONS, seed=2))
    produce(a.bootstrap, topic, make_records(COPIED, partitions=PARTITIONS, seed=1))
    copied = mm2py("run", str(config), "--once", "--flows", flow)
    assert copied.returncode == 0, copied.stderr
    on_a = RecordingConsumer(src, a.bootstrap, group, topic, "billing-on-a")
    try:
        on_a.consume(until_ends=end_offsets(a.bootstrap, topic))
    finally:
        on_a.close()
    switched = mm2py("cutover", str(config), "--flow", flow, "--groups", re.escape(group), "--quiet-seconds", "2")
    assert switched.returncode == 0, switched.stderr

    # A takes records B never gets (run refuses the flow now), and the applications write on B.
    cut = end_offsets(a.bootstrap, topic)
    tail = make_records(TAIL, partitions=PARTITIONS, seed=3)
    produce(a.bootstrap, topic, tail)
    refused = mm2py("run", str(config), "--once", "--flows", flow)
    assert refused.returncode == 2 and f"flow {flow} was cut over" in refused.stderr, refused.stderr
    after = make_records(B_AFTER, partitions=PARTITIONS, seed=4)
    # An application group on B reads B's own topic from the cut-over on, and gets part way before the return.
    commit_group(b.bootstrap, ledger, topic, end_offsets(b.bootstrap, topic))
    produce(b.bootstrap, topic, after)
    ledger_b = RecordingConsumer(tgt, b.bootstrap, ledger, topic, "ledger-on-b")
    try:
        ledger_b.consume(until_records=LEDGER_ON_B)
    finally:
        ledger_b.close()
    on_b = RecordingConsumer(tgt, b.bootstrap, group, remote, "billing-on-b")
    try:
        on_b.consume(until_ends=end_offsets(b.bootstrap, remote))
    finally:
        on_b.close()
    now = end_offsets(a.bootstrap, topic)

    # A run of B->A holding its lease on A (the product's own lease, taken here): refused, naming the holder. The
    # lease topic is created on A as a run of B->A creates it (none has run yet).
    a_admin = ClusterAdmin(src, {"bootstrap.servers": a.bootstrap})
    ensure_internal_topics({src: a_admin}, [replace(lease_topic(load(config, flows=[reverse]).flows[0]), feature=None)])
    lease = FlowLease(tgt, src, {"bootstrap.servers": a.bootstrap}, {"bootstrap.servers": a.bootstrap}, 6000)
    try:
        assert lease.acquire(threading.Event(), wait=False)
        held = mm2py("failback", str(config), "--flow", flow, "--groups", re.escape(group))
    finally:
        lease.release()
    assert held.returncode == 1, held.stderr
    assert f"flow {reverse} is being replicated by {lease.identity}" in held.stderr, held.stderr

    # The drill: exactly the 5,000 per partition, nothing changed anywhere.
    before = _state(a, b, topic, (src, tgt), group)
    drill = mm2py("failback", str(config), "--flow", flow, "--groups", re.escape(group), "--dry-run", "--json")
    assert drill.returncode == 0, drill.stderr
    dry = json.loads(drill.stdout)
    listed = [(t["topic"], t["partition"], t["from"], t["to"], t["count"]) for t in dry["tail"]]
    assert listed == [(topic, p, cut[p], now[p], now[p] - cut[p]) for p in range(PARTITIONS)]
    assert dry["tail_count"] == TAIL and dry["refusals"] == [] and not dry["mark_cleared"]
    assert _state(a, b, topic, (src, tgt), group) == before

    # An earlier failback that stopped half way: the product's own copy kept the first HALF records of two
    # partitions' tails, and nothing else was done (the mark stands).
    side = f"{remote}.failback-tail"
    forward = load(config, flows=[flow]).flows[0]
    b_admin = ClusterAdmin(tgt, {"bootstrap.servers": b.bootstrap})
    stopped = divergent_tail(
        [CutPosition(topic, p, cut[p], remote, 0) for p in range(PARTITIONS)],
        {},
        {(topic, p): cut[p] + (HALF if p < 2 else 0) for p in range(PARTITIONS)},
    )
    mark = read_mark(forward, b_admin)
    assert mark is not None
    assert sum(c.copied for c in preserve_tail(forward, b_admin, mark, stopped, {topic: PARTITIONS})) == 2 * HALF

    done = mm2py("failback", str(config), "--flow", flow, "--groups", re.escape(group), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(c["verified"] and c["side_topic"] == side for c in report["preserved"]), report["preserved"]
    per_partition = TAIL // PARTITIONS
    assert [(c["kept_before"], c["copied"]) for c in report["preserved"]] == [
        (HALF, per_partition - HALF),
        (HALF, per_partition - HALF),
        (0, per_partition),
        (0, per_partition),
    ]
    # The side topic holds A's tail record by record: partition, key, value, headers, timestamp, order.
    kept = read_all(b.bootstrap, side)
    a_tail = [r for r in read_all(a.bootstrap, topic) if r.offset >= cut[r.partition]]
    assert [_identity(r) for r in kept] == [_identity(r) for r in a_tail]
    assert len(kept) == TAIL and {r.value for r in kept} == {r.value for r in tail}
    # The group read all B had of A: on A it stands where the tail begins.
    assert {(g["partition"], g["source_offset"]) for g in report["groups"]} == set(cut.items())
    assert report["mark_cleared"] and _standing_marks(b, flow) == [] and _standing_marks(b, flow, "failback") == []

    # The next run of B->A brings B's records since the cut-over to A, and none of B's history.
    back = mm2py("run", str(config), "--once", "--flows", reverse)
    assert back.returncode == 0, back.stderr
    on_a_now = read_all(a.bootstrap, f"{tgt}.{topic}")
    history = {r.value for r in make_records(B_BEFORE, partitions=PARTITIONS, seed=2)}
    figures = {
        "tail_listed": dry["tail_count"],
        "tail_kept": len(kept),
        "b_after_reached_a": sum(r.value in {x.value for x in after} for r in on_a_now),
        "b_history_reached_a": sum(r.value in history for r in on_a_now),
    }
    record_property("failback_figures", figures)
    assert figures == {"tail_listed": TAIL, "tail_kept": TAIL, "b_after_reached_a": B_AFTER, "b_history_reached_a": 0}
    assert len(on_a_now) == B_AFTER

    # The planned switch-over back, B->A, moves both groups to A: ledger from B's own topic to its copy on A,
    # billing from A's records on B back to A's own topic, where it goes on at the first record B never got.
    both = f"{re.escape(ledger)}|{re.escape(group)}"
    returned = mm2py("cutover", str(config), "--flow", reverse, "--groups", both, "--quiet-seconds", "2", "--json")
    assert returned.returncode == 0, returned.stderr
    home = [m for m in json.loads(returned.stdout)["groups"] if m["group"] == group]
    assert sorted((m["topic"], m["remote_topic"], m["partition"], m["target_offset"], m["method"]) for m in home) == [
        (remote, topic, p, cut[p], "exact") for p in range(PARTITIONS)
    ]
    billing_a = RecordingConsumer(src, a.bootstrap, group, topic, "billing-back-on-a")
    try:
        billing_a.consume(until_ends=end_offsets(a.bootstrap, topic))
    finally:
        billing_a.close()
    a_ids = [r.value or b"" for r in make_records(COPIED, partitions=PARTITIONS, seed=1) + tail]
    billing = on_a.processed + on_b.processed + billing_a.processed
    record_property("billing_a_b_a_twice_skipped", (len(on_a.processed), len(billing_a.processed)))
    assert once_per_group(billing, a_ids) == (0, 0) and len(billing_a.processed) == TAIL
    ledger_a = RecordingConsumer(src, a.bootstrap, ledger, f"{tgt}.{topic}", "ledger-on-a")
    try:
        ledger_a.consume(until_ends=end_offsets(a.bootstrap, f"{tgt}.{topic}"))
    finally:
        ledger_a.close()
    twice, skipped = once_per_group(ledger_b.processed + ledger_a.processed, [r.value or b"" for r in after])
    moved = (len(ledger_b.processed), len(ledger_a.processed), twice, skipped)
    record_property("ledger_on_b_on_a_twice_skipped", moved)
    assert moved == (LEDGER_ON_B, B_AFTER - LEDGER_ON_B, 0, 0), moved

    # Once is all: a second failback finds no mark and copies nothing.
    again = mm2py("failback", str(config), "--flow", flow)
    assert again.returncode == 1, again.stderr
    assert f"flow {flow} is not marked as cut over on {tgt}" in again.stderr, again.stderr
    assert end_offsets(b.bootstrap, side) == {p: TAIL // PARTITIONS for p in range(PARTITIONS)}


def test_under_identity_replication_failback_starts_b_to_a_where_a_stopped_giving_b_records(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """One topic name both ways: B's ``orders`` holds what A gave it and then what applications wrote on B. B->A
    must bring A only the latter, and A's tail is kept on B beside it."""
    a, b = real_kafka, real_kafka_target
    topic = unique_topic("orders")
    a.create_topic(topic, partitions=2)
    config, src, tgt = _both_ways(tmp_path / "mm2.properties", a, b, topic, f"replication.policy.class = {IDENTITY}\n")
    flow, reverse = f"{src}->{tgt}", f"{tgt}->{src}"
    first, tail, after = (make_records(n, partitions=2, seed=s) for n, s in ((2_000, 11), (1_000, 12), (500, 13)))
    produce(a.bootstrap, topic, first)
    assert mm2py("run", str(config), "--once", "--flows", flow).returncode == 0
    switched = mm2py("cutover", str(config), "--flow", flow, "--quiet-seconds", "2")
    assert switched.returncode == 0, switched.stderr
    cut_on_b = end_offsets(b.bootstrap, topic)
    produce(a.bootstrap, topic, tail)
    produce(b.bootstrap, topic, after)

    done = mm2py("failback", str(config), "--flow", flow, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tail_count"] == len(tail) and all(c["verified"] for c in report["preserved"])
    starts = [(s["topic"], s["partition"], s["offset"], s["reason"]) for s in report["reverse_starts"]]
    assert starts == [(topic, p, cut_on_b[p], "end at the cut-over (the mark)") for p in range(2)]
    assert {r.value for r in read_all(b.bootstrap, f"{topic}.failback-tail")} == {r.value for r in tail}

    back = mm2py("run", str(config), "--once", "--flows", reverse)
    assert back.returncode == 0, back.stderr
    values = [r.value for r in read_all(a.bootstrap, topic)]
    figures = {
        name: sum(v in {r.value for r in rows} for v in values)
        for name, rows in (("first", first), ("tail", tail), ("b_after", after))
    }
    record_property("identity_records_on_a", figures)
    assert figures == {"first": 2_000, "tail": 1_000, "b_after": 500} and len(values) == 3_500


def test_after_a_failover_the_tail_starts_at_bs_recovery_point(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """After ``failover`` the mark's positions are what B holds (its recovery point), not A's end: the tail is
    every record of A after it, those A had before the failover as well as those it took later."""
    a, b = real_kafka, real_kafka_target
    topic = unique_topic("orders")
    a.create_topic(topic, partitions=2)
    config, src, tgt = _both_ways(tmp_path / "mm2.properties", a, b, topic)
    flow = f"{src}->{tgt}"
    produce(a.bootstrap, topic, make_records(2_000, partitions=2, seed=21))
    assert mm2py("run", str(config), "--once", "--flows", flow).returncode == 0
    held = end_offsets(b.bootstrap, f"{src}.{topic}")
    unreplicated = make_records(600, partitions=2, seed=22)  # A has them when B fails over without it
    produce(a.bootstrap, topic, unreplicated)
    failed_over = mm2py("failover", str(config), "--flow", flow)
    assert failed_over.returncode == 0, failed_over.stderr
    later = make_records(200, partitions=2, seed=23)
    produce(a.bootstrap, topic, later)
    # As the runbook asks while B is primary: A->B disabled in the file; failback still finds its settings.
    config.write_text(config.read_text().replace(f"{flow}.enabled = true", f"{flow}.enabled = false"))

    drill = mm2py("failback", str(config), "--flow", flow, "--dry-run")  # the report for people
    assert drill.returncode == 0, drill.stderr
    assert f"failback {flow} (dry run: nothing changed)" in drill.stdout, drill.stdout
    assert "by `mm2py failover`" in drill.stdout and "tail: 800 record(s) over 2 partition(s)" in drill.stdout
    done = mm2py("failback", str(config), "--flow", flow, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mark"]["command"] == "failover"
    assert [(t["partition"], t["from"], t["count"]) for t in report["tail"]] == [(p, held[p], 400) for p in range(2)]
    kept = read_all(b.bootstrap, f"{src}.{topic}.failback-tail")
    assert [r.value for r in kept] == [r.value for r in sorted(unreplicated + later, key=lambda r: r.partition)]

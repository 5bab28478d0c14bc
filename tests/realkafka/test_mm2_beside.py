"""Apache Kafka's MirrorMaker 2 beside mm2py, on two real one-node Kafka clusters.

A flow hands over from MM2 to mm2py and from mm2py to MM2 with nothing lost and nothing copied twice, both
reading one `.properties` file; and MM2's own client (``RemoteClusterUtils.translateOffsets``) reads the
checkpoints mm2py writes as the same offsets ``mm2py translate-offsets`` prints.

Each test has a source alias of its own, so the internal topics it meets on the target
(``mm2-offsets.<alias>.internal``, ``mm2-configs.<alias>.internal``, checkpoints) start empty, as in a fresh
deployment, whatever ran before.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from mm2py.control.progress_store import read_replication_state, write_progress
from mm2py.mirror.loss import LossState
from tests.harness.kafka_harness import (
    Record,
    client_config,
    commit_group,
    end_offsets,
    make_records,
    produce,
    read_all,
)
from tests.harness.mirror_maker import (
    MirrorMaker,
    connect_offsets,
    prompt_herder,
    properties_text,
    translate_offsets,
)
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = pytest.mark.realkafka

PARTITIONS = 3


@pytest.fixture(scope="module")
def clusters(
    kafka_runtime: KafkaRuntime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """Two independent one-node clusters, source and target, started side by side."""
    work = tmp_path_factory.mktemp("mm2-beside")
    pair = (
        KafkaCluster(work / "source", 1, runtime=kafka_runtime),
        KafkaCluster(work / "target", 1, runtime=kafka_runtime),
    )
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(KafkaCluster.start, pair))  # list() re-raises a failed start
        yield pair
    finally:
        for cluster in pair:
            cluster.stop()


def write_properties(
    path: Path, source_alias: str, source: KafkaCluster, target: KafkaCluster, topic: str, groups: str | None = None
) -> Path:
    """One file for both tools: MM2 dedicated mode reads every key, mm2py reads every key too.

    ``mm2py.*`` keys are left in on purpose: MM2 must ignore them (it hands unknown keys to its connectors,
    which ignore them). ``prompt_herder`` puts MM2's offset flush interval and plugin discovery on the target
    cluster, where the herder src->dst reads them.
    """
    settings = {
        "clusters": f"{source_alias}, dst",
        f"{source_alias}.bootstrap.servers": source.bootstrap,
        "dst.bootstrap.servers": target.bootstrap,
        f"{source_alias}->dst.enabled": "true",
        f"{source_alias}->dst.topics": topic,
        # MM2 would otherwise run a heartbeats-only herder dst->src as well: internal topics on the source.
        f"dst->{source_alias}.emit.heartbeats.enabled": "false",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "emit.checkpoints.interval.seconds": "1",
        **prompt_herder("dst"),
        "mm2py.spark.master": "local[2]",
        "mm2py.lease.session.timeout.ms": "6000",
    }
    if groups is not None:
        settings["groups"] = groups
    path.write_text(properties_text(settings))
    return path


def run_once(config: Path) -> None:
    done = mm2py("run", str(config), "--once")
    assert done.returncode == 0, f"mm2py run --once exited {done.returncode}:\n{done.stderr[-4000:]}"


def _content(record: Record) -> tuple[object, ...]:
    return (record.partition, record.key, record.value, tuple(record.headers), record.timestamp)


def assert_exactly_once(source: list[Record], target: list[Record]) -> None:
    """Every source record on the target exactly once, in its partition's order."""
    sent, got = Counter(map(_content, source)), Counter(map(_content, target))
    lost, duplicated = sent - got, got - sent
    assert not lost and not duplicated, (
        f"{sum(lost.values())} lost, {sum(duplicated.values())} extra; "
        f"first lost {list(lost)[:2]}, first extra {list(duplicated)[:2]}"
    )
    assert len(target) == len(source)
    for partition in range(PARTITIONS):
        assert [_content(r) for r in target if r.partition == partition] == [
            _content(r) for r in source if r.partition == partition
        ], f"order of partition {partition}"


def ends_of(cluster: KafkaCluster, topic: str) -> dict[tuple[str, int], int]:
    return {(topic, p): end for p, end in end_offsets(cluster.bootstrap, topic).items()}


def test_mm2py_continues_a_flow_mirror_maker_started_without_loss_or_duplicates(
    clusters: tuple[KafkaCluster, KafkaCluster],
    kafka_runtime: KafkaRuntime,
    tmp_path: Path,
    unique_topic: Callable[..., str],
    record_property: Callable[[str, object], None],
) -> None:
    source, target = clusters
    topic = source.create_topic(unique_topic("mm2-first"), PARTITIONS)
    config = write_properties(tmp_path / "mm2.properties", "src", source, target, topic)
    first = make_records(600, partitions=PARTITIONS, seed=1)
    produce(source.bootstrap, topic, first)

    mirror_maker = MirrorMaker(kafka_runtime, config, tmp_path / "mm2")
    with mirror_maker:
        offsets = mirror_maker.await_progress(target.bootstrap, "src", ends_of(source, topic))
        code = mirror_maker.stop()
    record_property("mm2_exit_code", code)
    assert code is not None, f"MirrorMaker did not stop within its timeout after SIGTERM:\n{mirror_maker.log_tail()}"
    assert {tp: o for tp, o in connect_offsets(target.bootstrap, "src").items() if tp[0] == topic} == offsets
    assert_exactly_once(first, read_all(target.bootstrap, f"src.{topic}"))

    second = make_records(450, partitions=PARTITIONS, seed=2, base_timestamp=first[-1].timestamp + 1)
    produce(source.bootstrap, topic, second)
    run_once(config)

    assert_exactly_once(read_all(source.bootstrap, topic), read_all(target.bootstrap, f"src.{topic}"))
    # mm2py recorded its progress where MM2 keeps it, in MM2's format: MM2 would continue from there.
    assert connect_offsets(target.bootstrap, "src") == {tp: end - 1 for tp, end in ends_of(source, topic).items()}


def test_mirror_maker_continues_a_flow_mm2py_started_without_loss_or_duplicates(
    clusters: tuple[KafkaCluster, KafkaCluster],
    kafka_runtime: KafkaRuntime,
    tmp_path: Path,
    unique_topic: Callable[..., str],
) -> None:
    source, target = clusters
    topic = source.create_topic(unique_topic("mm2py-first"), PARTITIONS)
    config = write_properties(tmp_path / "mm2.properties", "src2", source, target, topic)
    first = make_records(600, partitions=PARTITIONS, seed=3)
    produce(source.bootstrap, topic, first)
    run_once(config)  # creates the remote topic and every internal topic MM2 will find
    assert_exactly_once(first, read_all(target.bootstrap, f"src2.{topic}"))
    # mm2py's loss records share MM2's offsets topic under a key of their own (mirror/loss.py): MM2 must
    # resume from mm2py's progress beside them, and leave them as they are.
    losses = {(topic, p): LossState(lost=10 * (p + 1), counted_to=0, end=200) for p in range(PARTITIONS)}
    write_progress("dst", {"bootstrap.servers": target.bootstrap}, "src2", {}, losses=losses)

    second = make_records(450, partitions=PARTITIONS, seed=4, base_timestamp=first[-1].timestamp + 1)
    produce(source.bootstrap, topic, second)
    mirror_maker = MirrorMaker(kafka_runtime, config, tmp_path / "mm2")
    with mirror_maker:
        # MM2 reads mm2py's progress in mm2-offsets.src2.internal and copies only the second batch; its
        # offsets reaching the end means everything it copied is acknowledged.
        mirror_maker.await_progress(target.bootstrap, "src2", ends_of(source, topic))
        code = mirror_maker.stop()
    assert code is not None, f"MirrorMaker did not stop within its timeout after SIGTERM:\n{mirror_maker.log_tail()}"

    assert_exactly_once(first + second, read_all(target.bootstrap, f"src2.{topic}"))
    state = read_replication_state("dst", {"bootstrap.servers": target.bootstrap}, "src2")
    assert state.losses == losses
    assert state.progress == {tp: end - 1 for tp, end in ends_of(source, topic).items()}  # MM2's, read beside them


def produce_in_transactions(cluster: KafkaCluster, topic: str, records: list[Record], transactions: int) -> None:
    """Each transaction's commit marker takes an offset on every partition it wrote to, so upstream and
    downstream offsets drift apart (MM2 copies records, not markers) and translation is not the identity."""
    producer = Producer(client_config(cluster.bootstrap, **{"transactional.id": f"tx-{topic}", "linger.ms": 5}))
    producer.init_transactions(30)
    size = -(-len(records) // transactions)
    for start in range(0, len(records), size):
        producer.begin_transaction()
        for r in records[start : start + size]:
            producer.produce(
                topic, r.value, r.key, partition=r.partition, timestamp=r.timestamp, headers=list(r.headers)
            )
        producer.commit_transaction(30)


def test_mirror_makers_translate_offsets_reads_mm2py_checkpoints_as_mm2py_translates(
    clusters: tuple[KafkaCluster, KafkaCluster],
    kafka_runtime: KafkaRuntime,
    tmp_path: Path,
    unique_topic: Callable[..., str],
    record_property: Callable[[str, object], None],
) -> None:
    source, target = clusters
    topic = source.create_topic(unique_topic("translate"), PARTITIONS)
    group_prefix = unique_topic("billing")
    lagging, caught_up = f"{group_prefix}-lagging", f"{group_prefix}-caught-up"
    config = write_properties(tmp_path / "mm2.properties", "src3", source, target, topic, groups=f"{group_prefix}-.*")
    produce_in_transactions(source, topic, make_records(900, partitions=PARTITIONS, seed=5), transactions=4)
    source_records = read_all(source.bootstrap, topic)
    ends = end_offsets(source.bootstrap, topic)
    # Lagging: one partition at its first record, one at a record in the second transaction, one just
    # after a commit marker. Caught up: at the log end, which is past the last marker.
    by_partition = {p: [r.offset for r in source_records if r.partition == p] for p in range(PARTITIONS)}
    marker_follower = next(n for o, n in zip(by_partition[2], by_partition[2][1:], strict=False) if n > o + 1)
    commit_group(source.bootstrap, lagging, topic, {0: 0, 1: by_partition[1][100], 2: marker_follower})
    commit_group(source.bootstrap, caught_up, topic, ends)

    run_once(config)  # copies, then checkpoints both groups (they match `groups`)

    for group in (lagging, caught_up):
        out = mm2py("translate-offsets", str(config), "--group", group, "--source", "src3", "--target", "dst", "--json")
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        ours = {(r["topic"], r["partition"]): r["offset"] for r in rows}
        theirs = translate_offsets(kafka_runtime, {"bootstrap.servers": target.bootstrap}, "src3", group)
        record_property(
            f"{group.rsplit('-', 2)[-1]}_translation",
            {f"{t}-{p}": [o, r["method"]] for (t, p), o, r in zip(ours, ours.values(), rows, strict=True)},
        )
        assert set(ours) == {(f"src3.{topic}", p) for p in range(PARTITIONS)}, rows
        assert theirs == ours, f"{group}: RemoteClusterUtils.translateOffsets {theirs}, mm2py {rows}"
    # The drift is real: upstream and downstream offsets differ, so equal answers are not a coincidence.
    downstream_ends = end_offsets(target.bootstrap, f"src3.{topic}")
    assert downstream_ends != ends
    assert translate_offsets(kafka_runtime, {"bootstrap.servers": target.bootstrap}, "src3", caught_up) == {
        (f"src3.{topic}", p): end for p, end in downstream_ends.items()
    }


def test_a_cut_over_of_a_flow_mm2_replicated_lands_its_group_exactly_where_mm2s_own_translation_re_reads(
    clusters: tuple[KafkaCluster, KafkaCluster],
    kafka_runtime: KafkaRuntime,
    tmp_path: Path,
    unique_topic: Callable[..., str],
    record_property: Callable[[str, object], None],
) -> None:
    """Java MM2 replicated the flow (its sparse syncs only) and is stopped; ``mm2py cutover`` moves a group that
    stands between MM2's syncs. MM2's ``RemoteClusterUtils.translateOffsets`` would resume it one past the sync
    below (re-reading an unknown number); the cut-over matches the records from that sync on and lands it right
    after the last record it processed: at or past MM2's offset on every partition, nothing read twice or
    skipped, counted by a consumer that records every record."""
    source, target = clusters
    topic = source.create_topic(unique_topic("mm2-cut"), PARTITIONS)
    group = unique_topic("billing")
    config = write_properties(tmp_path / "mm2.properties", "src4", source, target, topic, groups=group)
    records = make_records(3_000, partitions=PARTITIONS, seed=7)
    produce(source.bootstrap, topic, records)
    on_a = RecordingConsumer("src4", source.bootstrap, group, topic, "billing-on-a")
    try:
        # Every partition part way, between MM2's syncs (one per offset.lag.max = 100 records).
        on_a.consume(until_records=1_850)
    finally:
        on_a.close()

    remote = f"src4.{topic}"
    mirror_maker = MirrorMaker(kafka_runtime, config, tmp_path / "mm2")
    with mirror_maker:
        mirror_maker.await_progress(target.bootstrap, "src4", ends_of(source, topic))
        client = {"bootstrap.servers": target.bootstrap}
        poll_until(
            lambda: len(translate_offsets(kafka_runtime, client, "src4", group)) == len(committed_of(source, group)),
            120,
            "MM2's checkpoints of the group",
        )
        theirs = translate_offsets(kafka_runtime, client, "src4", group)
        assert mirror_maker.stop() is not None, mirror_maker.log_tail()

    cut = mm2py("cutover", str(config), "--flow", "src4->dst", "--groups", group, "--quiet-seconds", "1", "--json")
    assert cut.returncode == 0, cut.stderr
    moves = {m["partition"]: m for m in json.loads(cut.stdout)["groups"]}
    mm2_re_reads = 0
    for (remote_topic, partition), offset in theirs.items():
        assert remote_topic == remote
        m = moves[partition]
        assert m["method"] == "exact" and "found record by record" in m.get("reason", ""), m
        assert m["target_offset"] >= offset and m["read_again"] == 0 and m["skipped"] == 0, (m, offset)
        mm2_re_reads += m["target_offset"] - offset

    on_b = RecordingConsumer("dst", target.bootstrap, group, remote, "billing-on-b")
    try:
        on_b.consume(until_ends=end_offsets(target.bootstrap, remote))
    finally:
        on_b.close()
    twice, skipped = once_per_group(on_a.processed + on_b.processed, [r.value or b"" for r in records])
    record_property("mm2_would_re_read", mm2_re_reads)
    print(f"FIGURES MM2's translation would re-read {mm2_re_reads}; the cut-over: twice {twice}, skipped {skipped}")
    assert (twice, skipped) == (0, 0) and len(on_a.processed) + len(on_b.processed) == len(records)
    assert mm2_re_reads > 0  # the group stood between MM2's syncs: its rule alone would have re-read records


def committed_of(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets on ``cluster`` (partitions with none left out)."""
    admin = AdminClient(client_config(cluster.bootstrap))
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=30).topic_partitions if tp.offset >= 0}

"""Exactly-once mode on real Kafka: what tansu cannot show, because it hands aborted records to read_committed
consumers (docs/test-broker.md, *Transactions*). A real source hides aborted transactions from mm2py's
read_committed consumer, and a real target hides mm2py's own unfinished transactions from read_committed readers.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm2py.mirror.record_formats import parse_source_offset_key, parse_source_offset_value
from tests.harness.exactly_once import describe_transactions, log_batches
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import Record, client_config, consumer_config, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]


def _config(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, topic: str, extra: str = ""
) -> tuple[Path, str, str]:
    return one_flow_config(
        tmp_path / "mm2.properties", source.bootstrap, target.bootstrap, topic, extra, exactly_once=True
    )


def _produce_transactions(bootstrap: str, topic: str, outcomes: list[bool], per_partition: int) -> list[bytes]:
    """One transaction per outcome (True commits, False aborts), each writing ``per_partition`` records to
    partitions 0 and 1; returns the committed values in order."""
    producer = Producer(client_config(bootstrap, **{"transactional.id": f"eos-source-{topic}", "linger.ms": 5}))
    producer.init_transactions(30)
    committed: list[bytes] = []
    for n, commit in enumerate(outcomes):
        producer.begin_transaction()
        values = [
            f"{'committed' if commit else 'aborted'}-txn{n}-p{i % 2}-{i}".encode() for i in range(2 * per_partition)
        ]
        for i, value in enumerate(values):
            producer.produce(topic, value, key=value, partition=i % 2)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed.extend(values)
        else:
            producer.abort_transaction(30)
    return committed


@pytest.mark.parametrize("copy", ["batch", "record"])
def test_aborted_source_transactions_are_not_copied(
    copy: str,
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    topic = real_kafka.create_topic(unique_topic("eos-aborts"), partitions=2)
    # 41 offsets per transaction and partition (40 records, a marker); ranges of 100 end inside transactions.
    committed = _produce_transactions(real_kafka.bootstrap, topic, [True, False, True, False, False, True], 40)
    uncommitted_source = read_all(real_kafka.bootstrap, topic, isolation_level="read_uncommitted")
    assert len(uncommitted_source) == 6 * 80  # the aborted records are in the source log
    extra = f"mm2py.range.max.records = 100\nmm2py.copy.mode = {copy}\n"
    config, src, tgt = _config(tmp_path, real_kafka, real_kafka_target, topic, extra)

    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert f"flow={src}->{tgt} copied=" in result.stdout and f" path={copy}" in result.stdout, result.stdout

    remote = f"{src}.{topic}"
    for level in ("read_committed", "read_uncommitted"):
        copied = read_all(real_kafka_target.bootstrap, remote, isolation_level=level)
        assert Counter(r.value for r in copied) == Counter(committed), level
        for p in (0, 1):  # and in source order
            assert [r.value for r in copied if r.partition == p] == [v for v in committed if f"-p{p}-".encode() in v], (
                level,
                p,
            )
    # Progress ends at the last committed record of each partition, whatever aborted records and markers follow.
    committed_offsets = read_all(real_kafka.bootstrap, topic)
    assert _progress(real_kafka_target, src, topic) == {
        p: max(r.offset for r in committed_offsets if r.partition == p) for p in (0, 1)
    }
    # The target's log as the broker stored it: the source's control batches (three COMMIT and three ABORT markers
    # per partition) are not there; every control batch is a COMMIT marker the target's coordinator wrote
    # (sequence -1) for mm2py's own transactional producers, and the data batches hold the committed records only.
    # Both paths write under MM2's ids, one per task slot.
    ours = describe_transactions(real_kafka_target.bootstrap, [f"{src}-mm2-MirrorSourceConnector-{s}" for s in (0, 1)])
    producer_ids = {t.producer_id for t in ours.values()}
    markers: dict[int, int] = {}
    for p in (0, 1):
        in_source = Counter(b["marker"] for b in log_batches(real_kafka, 1, topic, p) if b["control"])
        assert in_source == {"COMMIT": 3, "ABORT": 3}, (p, in_source)  # what the reading below would see
        batches = log_batches(real_kafka_target, 1, remote, p)
        control = [b for b in batches if b["control"]]
        data = [b for b in batches if not b["control"]]
        assert {b["producer_id"] for b in batches} <= producer_ids, (p, producer_ids, batches[:3])
        assert control, p
        assert all(b["marker"] == "COMMIT" and b["base_sequence"] == -1 for b in control), (p, control)
        assert all(b["transactional"] for b in data), p
        assert sum(b["count"] for b in data) == len(committed) // 2, p
        markers[p] = len(control)
    record_property("target_commit_markers", markers)
    record_property("seconds", round(time.monotonic() - started, 1))


class _TransactionWatch:
    """Sees an open transaction in a target topic: the log end (read_uncommitted) is past the last stable
    offset (read_committed), which ListOffsets answers per isolation level."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 2) -> None:
        self._levels = [
            Consumer(consumer_config(bootstrap, **{"isolation.level": level}))
            for level in ("read_uncommitted", "read_committed")
        ]
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def open_now(self) -> bool:
        """A transaction is open: records sent, not committed yet."""
        try:
            ends = [
                [c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in self._partitions]
                for c in self._levels
            ]
        except KafkaException:  # the topic does not exist yet
            return False
        return any(end > stable for end, stable in zip(*ends, strict=True))

    def wait_open(self, run: MirrorRun, timeout: float) -> None:
        """Sample every few milliseconds (MirrorRun.wait_for's 0.2 s could miss a short transaction)."""
        deadline = time.monotonic() + timeout
        while not self.open_now():
            if run.proc.poll() is not None:
                pytest.fail(f"mm2py exited with {run.proc.returncode}:\n{run.log_text()[-5000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no open transaction within {timeout} s:\n{run.log_text()[-5000:]}")
            time.sleep(0.002)  # sampling interval

    def __enter__(self) -> _TransactionWatch:
        return self

    def __exit__(self, *_exc: object) -> None:
        for consumer in self._levels:
            consumer.close()


def _progress(target: KafkaCluster, source_alias: str, topic: str) -> dict[int, int]:
    """The newest stored progress (last replicated source offset) per partition of ``topic``."""
    progress: dict[int, int] = {}
    for r in read_all(target.bootstrap, f"mm2-offsets.{source_alias}.internal"):
        parsed = parse_source_offset_key(r.key) if r.key else None
        offset = parse_source_offset_value(r.value)
        if parsed is not None and parsed[2] == topic and offset is not None:
            progress[parsed[3]] = offset
    return progress


def _by_partition(records: list[Record]) -> dict[int, list[bytes | None]]:
    shaped: dict[int, list[bytes | None]] = {}
    for r in records:
        shaped.setdefault(r.partition, []).append(r.value)
    return shaped


def test_a_run_killed_mid_transaction_leaves_committed_prefixes_and_a_later_once_completes_exactly_once(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    topic = real_kafka.create_topic(unique_topic("eos-kill"), partitions=2)
    records = make_records(40_000, partitions=2, seed=21, value_size=64, with_headers=False)
    produce(real_kafka.bootstrap, topic, records)
    source = _by_partition(read_all(real_kafka.bootstrap, topic))
    # The batch path commits about every second: a transaction is open most of the time it copies, and the kill
    # is aimed at one.
    config, src, _tgt = _config(
        tmp_path,
        real_kafka,
        real_kafka_target,
        topic,
        "mm2py.range.max.records = 4000\nconsumer.poll.timeout.ms = 200\n",
    )
    remote = f"{src}.{topic}"

    # A kill aimed at an open transaction can still land just after its commit; then another run is killed.
    uncommitted, attempt = 0, 0
    while uncommitted == 0 and attempt < 5:
        attempt += 1
        with (
            MirrorRun(config, tmp_path / f"run-{attempt}.log") as run,
            _TransactionWatch(real_kafka_target.bootstrap, remote) as txn,
        ):
            txn.wait_open(run, timeout=180)
            run.kill()
        visible = _by_partition(read_all(real_kafka_target.bootstrap, remote))
        in_log = _by_partition(read_all(real_kafka_target.bootstrap, remote, isolation_level="read_uncommitted"))
        progress = _progress(real_kafka_target, src, topic)
        uncommitted = sum(map(len, in_log.values())) - sum(map(len, visible.values()))
        for p in (0, 1):
            # read_committed sees committed transactions only: a prefix of the source that ends where the progress
            # committed with it says (the batch path commits about every second, not per range).
            seen = visible.get(p, [])
            assert seen == source[p][: len(seen)], f"partition {p}: committed records are not a source prefix"
            assert progress.get(p, -1) == len(seen) - 1, f"partition {p}: progress {progress.get(p)}, {len(seen)} seen"
    killed = time.monotonic()
    record_property("kill_attempts", attempt)
    record_property("committed_at_kill", sum(map(len, visible.values())))
    record_property("uncommitted_at_kill", uncommitted)
    assert uncommitted > 0, "no kill landed inside a transaction (nothing uncommitted in the target log)"

    resumed = time.monotonic()
    result = mm2py("run", str(config), "--once", timeout=300)
    assert result.returncode == 0, result.stderr
    record_property("resume_once_seconds", round(time.monotonic() - resumed, 1))
    after = read_all(real_kafka_target.bootstrap, remote)  # read_committed: the killed transaction was aborted
    assert _by_partition(after) == source
    assert Counter(r.value for r in after) == Counter(r.value for r in records)
    record_property("seconds_after_kill", round(time.monotonic() - killed, 1))
    record_property("seconds", round(time.monotonic() - started, 1))

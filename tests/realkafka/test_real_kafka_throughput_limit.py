"""``mm2py.throughput.max.bytes.per.second`` with exactly-once on real Kafka (tansu's transactions cannot show
it, docs/test-broker.md): on both copy paths a limited ``--once`` run copies every record once and in order, no
faster than its limit, and the record path, whose transaction spans a range, commits a range early rather than let
a slow transaction outlive ``transaction.timeout.ms``: the target holds several commits per partition. Without
the early end, the broker would abort the transaction and the run would fail and retry for ever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.exactly_once import copy_faults, log_batches
from tests.harness.kafka_harness import make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

LIMIT = 1_000_000  # bytes per second
# 5 MB of values over two partitions: five seconds at the limit. A partition's 2.5 MB cannot go in one
# transaction: a first-round task's share is half the limit, and within the 2-s commit deadline it copies at most
# 1.5 MB (2 s at its rate and the one second's worth its bucket may have banked while its consumer started).
RECORDS, VALUE = 1000, 5000
TRANSACTION_TIMEOUT_MS = 4000  # the record path commits a range within half of it: 2 s, less than a range takes


@pytest.mark.parametrize("path", ["batch", "record"])
def test_a_limited_exactly_once_flow_copies_every_record_once_and_commits_before_its_transactions_time_out(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    path: str,
) -> None:
    topic = real_kafka.create_topic(unique_topic(f"limited-eos-{path}"), partitions=2)
    records = make_records(RECORDS, partitions=2, value_size=VALUE)
    produce(real_kafka.bootstrap, topic, records)
    extra = f"mm2py.copy.mode = {path}\nmm2py.throughput.max.bytes.per.second = {LIMIT}\n"
    config, src, tgt = one_flow_config(
        tmp_path / "mm2.properties", real_kafka.bootstrap, real_kafka_target.bootstrap, topic, extra, exactly_once=True
    )
    with config.open("a") as f:
        f.write(f"{tgt}.producer.transaction.timeout.ms = {TRANSACTION_TIMEOUT_MS}\n")

    started = time.monotonic()
    result = mm2py("run", str(config), "--once")
    took = time.monotonic() - started

    assert result.returncode == 0, result.stderr
    summary = [line for line in result.stdout.splitlines() if line.startswith(f"flow={src}->{tgt} copied=")]
    assert len(summary) == 1 and f" path={path}" in summary[0], result.stdout
    assert took >= 0.95 * RECORDS * VALUE / LIMIT, f"{took:.1f} s for {RECORDS * VALUE} bytes at {LIMIT} bytes/s"
    remote = f"{src}.{topic}"
    copied = read_all(real_kafka_target.bootstrap, remote, isolation_level="read_committed")
    faults = copy_faults(records, copied)
    assert faults == {**faults, "lost": 0, "duplicated": 0, "extra": 0, "reordered": 0}, faults
    if path == "record":  # 2.5 MB a partition: more than a first-round range copies within 2 s
        for p in (0, 1):
            commits = [b for b in log_batches(real_kafka_target, 1, remote, p) if b["control"]]
            assert len(commits) >= 2 and all(b["marker"] == "COMMIT" for b in commits), (p, commits)

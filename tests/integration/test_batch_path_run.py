"""``mm2py run --once`` takes the batch path by default: every record exact, whatever wrote the source.

One run copies several source topics at once, each written differently: each codec, an idempotent producer,
committed transactions, and a topic whose progress (written in MM2's format, as MM2 would) points into
the middle of a batch. Records are compared field by field (key, value, headers, timestamp, partition) and
in order. A flow that needs per-record work takes the record path and says why, in plan and in run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from mm2py.control.progress_store import write_progress
from mm2py.mirror.progress import progress_topic
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    client_config,
    create_topic,
    make_records,
    read_all,
)
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def fields(r: Record) -> tuple[Any, ...]:
    return r.partition, r.key, r.value, tuple(r.headers), r.timestamp


def produce_batched(bootstrap: str, topic: str, records: list[Record], **settings: Any) -> None:
    """Large batches (the point here), optionally inside transactions of 50 records.

    Without transactions each partition's last record goes in a batch of its own: tansu's ListOffsets
    answers the last batch's base offset + 1 (test-broker.md), so only then is the end a run sees the true
    end. After a commit marker it is exact anyway."""
    producer = Producer(client_config(bootstrap, **{"linger.ms": 50, "batch.num.messages": 10_000, **settings}))
    transactional = "transactional.id" in settings
    tails = (
        set()
        if transactional
        else {max(i for i, r in enumerate(records) if r.partition == p) for p in {r.partition for r in records}}
    )
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i, r in enumerate(records):
        if i in tails:
            continue
        producer.produce(topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers))
        if transactional and i % 50 == 49:
            producer.commit_transaction(30)
            producer.begin_transaction()
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0
    for i in sorted(tails):
        r = records[i]
        producer.produce(topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers))
        assert producer.flush(30) == 0


def summary_path(stdout: str, flow: str = "src->dst") -> str:
    match = re.search(rf"flow={re.escape(flow)} copied=.* path=(.*)$", stdout, re.MULTILINE)
    assert match, stdout
    return match.group(1)


@pytest.fixture
def pair(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    return kafka_cluster("src", "dst")


def test_run_once_forwards_batches_and_every_record_is_exact(pair: dict[str, TansuBroker], tmp_path: Path) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    written: dict[str, list[Record]] = {}
    for i, codec in enumerate(CODECS):
        written[f"codec-{codec}"] = make_records(
            900, partitions=PARTITIONS, seed=i, value_size=100, tombstone_every=17, null_key_every=13
        )
    written["idempotent"] = make_records(900, partitions=PARTITIONS, seed=10)
    written["transactions"] = make_records(600, partitions=PARTITIONS, seed=11)
    written["resumed"] = make_records(900, partitions=PARTITIONS, seed=12)
    for topic in written:
        create_topic(src, topic, PARTITIONS)
    for codec in CODECS:
        produce_batched(src, f"codec-{codec}", written[f"codec-{codec}"], **{"compression.type": codec})
    produce_batched(src, "idempotent", written["idempotent"], **{"enable.idempotence": True})
    produce_batched(src, "transactions", written["transactions"], **{"transactional.id": "tx-batch-path"})
    produce_batched(src, "resumed", written["resumed"], **{"compression.type": "lz4"})
    # MM2-format progress: partition p was replicated up to offset 100 + p, inside the first batch.
    create_topic(dst, progress_topic("src"), 5, {"cleanup.policy": "compact"})
    write_progress("dst", {"bootstrap.servers": dst}, "src", {("resumed", p): 100 + p for p in range(PARTITIONS)})

    config = write_config(tmp_path / "mm2.properties", pair, "src->dst.enabled = true\n")
    plan = json.loads(mm2py("plan", str(config), "--json").stdout)
    assert plan["flows"][0]["path"] == "batch"
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert summary_path(result.stdout) == "batch"

    for topic, records in written.items():
        source = read_all(src, topic)
        target = read_all(dst, f"src.{topic}")
        if topic == "resumed":
            source = [r for r in source if r.offset > 100 + r.partition]
        assert [fields(r) for r in target] == [fields(r) for r in source], topic
        if topic not in ("transactions", "resumed"):  # markers take source offsets; a resumed copy starts at 0
            assert [(r.partition, r.offset) for r in target] == [(r.partition, r.offset) for r in source]
        assert len(target) == (len(records) if topic != "resumed" else len(records) - 3 * 101 - 3), topic


def test_a_flow_that_needs_per_record_work_takes_the_record_path_and_says_why(
    pair: dict[str, TansuBroker], tmp_path: Path
) -> None:
    src, dst = pair["src"].bootstrap, pair["dst"].bootstrap
    create_topic(src, "orders", 2)
    records = make_records(300, partitions=2, seed=3)
    produce_batched(src, "orders", records, **{"compression.type": "gzip"})
    config = write_config(
        tmp_path / "mm2.properties", pair, "src->dst.enabled = true\ndst.producer.compression.type = zstd\n"
    )
    plan = mm2py("plan", str(config))
    assert "path=record (compression.type=zstd re-compresses every record)" in plan.stdout, plan.stdout
    result = mm2py("run", str(config), "--once")
    assert result.returncode == 0, result.stderr
    assert summary_path(result.stdout) == "record (compression.type=zstd re-compresses every record)"
    assert [fields(r) for r in read_all(dst, "src.orders")] == [fields(r) for r in read_all(src, "orders")]

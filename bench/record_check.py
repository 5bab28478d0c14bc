"""Record-by-record check of a copy: every source record on the target once, in its partition's order.

Why not only end offsets (as ``bench.run_bench`` checks on tansu): an exactly-once copy is only worth measuring
if it *is* exactly once, and a transactional target hides nothing from an end offset: aborted records and
commit markers take offsets too. So the target is read ``read_committed``, as its consumers read it, and each
partition is compared with the source's by an order-sensitive digest of (key, value, headers, timestamp) and a
count. Only a partition whose digest differs is read again in full, to count what went wrong: lost and
duplicated records (multisets of contents), extra ones (never in the source) and reordered ones (a record that
arrives after one that followed it in the source).

The source digests are taken once per topic and reused for every contender, which halves the reading.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from tests.harness.exactly_once import account
from tests.harness.kafka_harness import consumer_config

READ_TIMEOUT_S = 300.0
Content = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@dataclass(frozen=True)
class PartitionCheck:
    partition: int
    source_records: int
    target_records: int
    lost: int = 0
    duplicated: int = 0
    extra: int = 0
    reordered: int = 0

    @property
    def exact(self) -> bool:
        return self.source_records == self.target_records and not (
            self.lost or self.duplicated or self.extra or self.reordered
        )


def _records(bootstrap: str, topic: str, partitions: list[int], isolation: str) -> Iterator[tuple[int, Content]]:
    """(partition, content) of every record, each partition in offset order, to the end (read_committed: the
    last stable offset)."""
    consumer = Consumer(
        consumer_config(
            bootstrap,
            **{
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 100,
                "queued.max.messages.kbytes": 262144,
                "max.partition.fetch.bytes": 4194304,
            },
        )
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending = set(partitions)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} on {bootstrap}: no end of partitions {sorted(pending)}")
            for msg in consumer.consume(10_000, timeout=0.5):
                err = msg.error()
                if err is None:
                    yield msg.partition(), (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                else:
                    raise KafkaException(err)
    finally:
        consumer.close()


def digests(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> dict[int, tuple[int, str]]:
    """(record count, order-sensitive digest) per partition."""
    hashers = {p: hashlib.blake2b(digest_size=16) for p in range(partitions)}
    counts = dict.fromkeys(range(partitions), 0)
    for p, (key, value, headers, timestamp) in _records(bootstrap, topic, list(range(partitions)), isolation):
        h = hashers[p]
        for part in (key, value):
            h.update(b"\xff" if part is None else len(part).to_bytes(4, "big") + part)
        for name, hv in headers:
            h.update(name.encode() + b"\0" + (b"\xff" if hv is None else len(hv).to_bytes(4, "big") + hv))
        h.update(timestamp.to_bytes(8, "big", signed=True))
        counts[p] += 1
    return {p: (counts[p], hashers[p].hexdigest()) for p in range(partitions)}


def _contents(bootstrap: str, topic: str, partition: int) -> list[Content]:
    return [c for _p, c in _records(bootstrap, topic, [partition], "read_committed")]


def check_copy(
    source: str, topic: str, target: str, remote: str, source_digests: dict[int, tuple[int, str]]
) -> dict[str, Any]:
    """Compare ``remote`` (read_committed) on ``target`` with ``topic`` on ``source``; totals and per partition."""
    started = time.monotonic()
    partitions = len(source_digests)
    target_digests = digests(target, remote, partitions)
    checks = []
    for p in range(partitions):
        (n_src, d_src), (n_tgt, d_tgt) = source_digests[p], target_digests[p]
        if (n_src, d_src) == (n_tgt, d_tgt):
            checks.append(PartitionCheck(p, n_src, n_tgt))
            continue
        counted = account(_contents(source, topic, p), _contents(target, remote, p))
        checks.append(PartitionCheck(p, n_src, n_tgt, **counted))
    totals = {
        key: sum(getattr(c, key) for c in checks)
        for key in ("source_records", "target_records", "lost", "duplicated", "extra", "reordered")
    }
    return {
        **totals,
        "exact": all(c.exact for c in checks),
        "partitions": [asdict(c) for c in checks],
        "seconds": round(time.monotonic() - started, 1),
    }

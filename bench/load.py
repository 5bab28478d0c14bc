"""Load a benchmark topic fast: one producer process per slice of partitions (``python -m bench.load``).

Each record: key ``k<partition>-<seq>`` (about 10 B), value ``<seq as 8 bytes><random filler>`` of exactly
``--size`` bytes, ``--headers`` headers (``h0``, ``h1``, …, each the 8-byte sequence number; none by default),
CreateTime = now. One process per core is what feeds tansu fastest
(docs/test-broker.md, *Throughput*); payloads are cut from one random block because generating random
bytes per record in Python would be slower than the producer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from confluent_kafka import KafkaError, Producer

LOAD_PRODUCER = {
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
    "enable.idempotence": False,
}


def load_partitions(bootstrap: str, topic: str, partitions: list[int], count: int, size: int, headers: int = 0) -> int:
    """Write ``count`` records to each partition; returns the bytes of values written."""
    producer = Producer({"bootstrap.servers": bootstrap, **LOAD_PRODUCER})
    filler = os.urandom(size + 4096)
    failures: list[str] = []
    names = [f"h{i}" for i in range(headers)]

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    def send(partition: int, seq: int) -> None:
        start = seq % 4096
        seq_bytes = seq.to_bytes(8, "big")
        value = seq_bytes + filler[start : start + size - 8]
        extra = [(name, seq_bytes) for name in names] if names else None
        while True:
            try:
                producer.produce(
                    topic, value, f"k{partition}-{seq}".encode(), partition, on_delivery=on_error, headers=extra
                )
                return
            except BufferError:
                producer.poll(0.05)

    # Every partition's last record goes in a batch of its own, written after everything else is
    # acknowledged. Why: tansu answers ListOffsets LATEST with "base offset of the newest batch + 1"
    # (docs/test-broker.md, *ListOffsets*), which is the true end only when that batch holds one record;
    # `mm2py run --once` takes its end offsets from ListOffsets, so without this it would stop short and copy
    # less than the loop.
    # One process owns each partition, so nothing can be written to it after its tail record.
    for seq in range(count - 1):
        for partition in partitions:
            send(partition, seq)
        if seq % 1000 == 0:
            producer.poll(0)
    _flush(producer, failures)
    for partition in partitions:
        send(partition, count - 1)
    _flush(producer, failures)
    return count * size * len(partitions)


def _flush(producer: Producer, failures: list[str]) -> None:
    if (left := producer.flush(120)) or failures:
        raise RuntimeError(f"load failed: {left} undelivered, errors {failures[:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", required=True, help="comma-separated partition ids")
    parser.add_argument("--count", type=int, required=True, help="records per partition")
    parser.add_argument("--size", type=int, required=True, help="value size in bytes (>= 8)")
    parser.add_argument("--headers", type=int, default=0, help="headers per record (default 0)")
    args = parser.parse_args()
    started = time.monotonic()
    nbytes = load_partitions(
        args.bootstrap, args.topic, [int(p) for p in args.partitions.split(",")], args.count, args.size, args.headers
    )
    json.dump({"bytes": nbytes, "seconds": time.monotonic() - started}, sys.stdout)


if __name__ == "__main__":
    main()

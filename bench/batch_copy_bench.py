"""Batch copier vs record copier, as functions in one process (``python -m bench.batch_copy_bench``).

Starts a source and a target tansu broker, loads one topic (8 partitions, 100-byte values by default) with
the loaders of ``bench.load``, then copies it twice into the target, once with
:func:`mm2py.executor.record_copy.copy_partitions` and once with :func:`mm2py.executor.batch_copy.copy_partitions`, each
given all 8 ranges in one call (no Spark: this measures the copy functions, not the scheduling). The target
topic is deleted and re-created between the two (tansu frees its memory), and each copy is checked to end
with the source's last record of every partition. Prints one JSON line per contender and the ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run_bench import load
from mm2py.executor import batch_copy, record_copy
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.librdkafka.clients import drop_producer
from tests.harness.copy_specs import copy_spec
from tests.harness.kafka_harness import TansuBroker, create_topic, delete_topic, end_offsets, find_tansu_binary

PARTITIONS = 8


def spec_for(source: str, target: str) -> CopySpec:
    return copy_spec(
        flow="source->target",
        source="source",
        target="target",
        consumer_settings={
            "bootstrap.servers": source,
            "group.id": "bench",
            "enable.auto.commit": "false",
            "fetch.queue.backoff.ms": "10",
            "fetch.wait.max.ms": "10",
            "enable.partition.eof": "true",
        },
        producer_settings={
            "bootstrap.servers": target,
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": "10",
            "batch.size": "1000000",
            "partitioner": "murmur2_random",
            "queue.buffering.max.messages": "1000000",
        },
        syncs_producer_settings={"bootstrap.servers": source, "acks": "all"},
        target_consumer_settings={"bootstrap.servers": target},
        syncs_topic="mm2-offset-syncs.bench",
        progress_topic="mm2-offsets.source.internal",
        offset_lag_max=100,
    )


def run(name: str, copier: Any, spec: CopySpec, topic: str, ends: dict[int, int]) -> dict[str, Any]:
    ranges = [PartitionRange(topic, p, topic, 0, end) for p, end in ends.items()]
    started = time.monotonic()
    results = list(copier(spec, iter(ranges)))
    seconds = time.monotonic() - started
    drop_producer(spec.producer_settings)
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{name}: {errors[0]}")
    records = sum(r.records for r in results)
    return {
        "contender": name,
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000, help="in total, over 8 partitions")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--headers", type=int, default=2, help="headers per record (default 2)")
    args = parser.parse_args()
    binary = find_tansu_binary()
    work = Path(tempfile.mkdtemp(prefix="mm2py-batch-bench-"))
    source, target = TansuBroker("source", binary, log_dir=work), TansuBroker("target", binary, log_dir=work)
    try:
        source.start()
        target.start()
        topic = "bench"
        print(
            json.dumps(
                {"load": load(source.bootstrap, topic, args.records // PARTITIONS, args.size, args.headers, work)}
            )
        )
        create_topic(source.bootstrap, "mm2-offset-syncs.bench", 1)
        create_topic(target.bootstrap, "mm2-offsets.source.internal", 1)
        ends = end_offsets(source.bootstrap, topic)
        spec = spec_for(source.bootstrap, target.bootstrap)
        figures = {}
        for name, copier in (("record", record_copy.copy_partitions), ("batch", batch_copy.copy_partitions)):
            create_topic(target.bootstrap, topic, PARTITIONS)
            figures[name] = run(name, copier, spec, topic, ends)
            copied = end_offsets(target.bootstrap, topic)
            if copied != ends:
                raise RuntimeError(f"{name}: the target ends at {copied}, the source at {ends}")
            print(json.dumps(figures[name]))
            delete_topic(target.bootstrap, topic)
        print(json.dumps({"ratio": round(figures["batch"]["records_per_s"] / figures["record"]["records_per_s"], 2)}))
    finally:
        drop_producer(spec_for(source.bootstrap, target.bootstrap).syncs_producer_settings or {})
        source.stop()
        target.stop()


if __name__ == "__main__":
    main()

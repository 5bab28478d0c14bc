"""Where exactly-once time goes on the batch path: one copy task, in this process, timed step by step.

``python -m bench.eos_profile [--records N --value-bytes B --ranges K]`` starts a one-node source and target of
real Kafka (bench.exactly_once's brokers), loads one topic, then runs
:func:`mm2py.executor.batch_copy.copy_partitions` on ``K`` of its partitions twice: at-least-once and
exactly-once (one task slot, so one transactional.id). No Spark: the two figures differ only by the
transactions. The exactly-once run is instrumented from outside by wrapping mm2py's methods (nothing in mm2py is
changed): how many transactions, and the wall time spent

- draining the sender before a commit (from the moment a commit is due until every batch is acknowledged),
- committing (the progress records produced and acknowledged, then EndTxn),
- in AddPartitionsToTxn (every call, and the backoff sleeps of retried ones: CONCURRENT_TRANSACTIONS while the
  previous transaction's markers are written),

with the time during which nothing was sent. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.exactly_once import KAFKA_THREAD_DEFAULTS, PARTITIONS, BrokerRuntime
from bench.run_bench import load
from mm2py.executor import batch_copy, transactional_copy
from mm2py.executor.contract import CopyPath, CopySpec, PartitionRange
from mm2py.librdkafka.clients import drop_producer
from mm2py.librdkafka.defaults import copy_consumer_settings, copy_producer_settings
from mm2py.wire import transactions
from tests.harness.copy_specs import copy_spec
from tests.harness.real_kafka import KafkaCluster

PROGRESS = "mm2-offsets.source.internal"


class Timers:
    """Wall time and calls per name, collected by wrapping methods of mm2py's classes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.samples: dict[str, list[float]] = defaultdict(list)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds
        self.calls[name] += 1
        self.samples[name].append(seconds)

    def wrap(self, owner: Any, method: str, name: str) -> Callable[[], None]:
        original = getattr(owner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(name, time.monotonic() - started)

        setattr(owner, method, timed)
        return lambda: setattr(owner, method, original)

    def report(self) -> dict[str, Any]:
        out = {}
        for name, seconds in sorted(self.seconds.items()):
            samples = sorted(self.samples[name])
            out[name] = {
                "calls": self.calls[name],
                "seconds": round(seconds, 3),
                "mean_ms": round(1000 * seconds / max(1, self.calls[name]), 2),
                "median_ms": round(1000 * samples[len(samples) // 2], 2) if samples else None,
                "max_ms": round(1000 * samples[-1], 2) if samples else None,
            }
        return out


@contextmanager
def instrumented(timers: Timers) -> Iterator[None]:
    """Time the transaction steps of TransactionalCopy and TransactionManager, and the pre-commit drain."""
    undo = [
        timers.wrap(transactional_copy.TransactionalCopy, "commit", "commit (progress + EndTxn)"),
        timers.wrap(transactions.TransactionManager, "add", "AddPartitionsToTxn (with retries)"),
        timers.wrap(transactions.TransactionManager, "_end", "EndTxn"),
        timers.wrap(transactions.TransactionManager, "_sleep", "backoff sleeps"),
        timers.wrap(transactions.TransactionManager, "initialize", "InitProducerId"),
    ]
    due_since: dict[int, float] = {}
    original_due = transactional_copy.TransactionalCopy.due
    original_commit = transactional_copy.TransactionalCopy.commit  # already wrapped above

    def due(self: Any, copying_done: bool) -> bool:
        answer = original_due(self, copying_done)
        if answer and id(self) not in due_since:
            due_since[id(self)] = time.monotonic()
        return answer

    def commit(self: Any, sender: Any, timeout_s: float) -> None:
        if id(self) in due_since:
            timers.add("drain before commit", time.monotonic() - due_since.pop(id(self)))
        original_commit(self, sender, timeout_s)

    transactional_copy.TransactionalCopy.due = due  # type: ignore[method-assign]
    transactional_copy.TransactionalCopy.commit = commit  # type: ignore[method-assign]
    try:
        yield
    finally:
        transactional_copy.TransactionalCopy.due = original_due  # type: ignore[method-assign]
        transactional_copy.TransactionalCopy.commit = original_commit  # type: ignore[method-assign]
        for restore in reversed(undo):
            restore()


def spec_for(source: str, target: str, exactly_once: bool) -> CopySpec:
    return copy_spec(
        flow="source->target",
        source="source",
        target="target",
        consumer_settings=copy_consumer_settings({"bootstrap.servers": source}, "bench", exactly_once=exactly_once),
        producer_settings=copy_producer_settings({"bootstrap.servers": target}, exactly_once=exactly_once),
        syncs_producer_settings={"bootstrap.servers": source, "acks": "all"},
        target_consumer_settings={"bootstrap.servers": target},
        syncs_topic="mm2-offset-syncs.target.internal",
        progress_topic=PROGRESS,
        offset_lag_max=100,
        exactly_once=exactly_once,
        copy_path=CopyPath("batch"),
        exactly_once_slots=1 if exactly_once else 0,
    )


def copy(spec: CopySpec, topic: str, remote: str, ends: dict[int, int]) -> dict[str, Any]:
    ranges = [PartitionRange(topic, p, remote, 0, end) for p, end in ends.items()]
    started = time.monotonic()
    results = list(batch_copy.copy_partitions(spec, iter(ranges)))
    seconds = time.monotonic() - started
    drop_producer(spec.producer_settings)
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{remote}: {errors[0]}")
    records = sum(r.records for r in results)
    return {"records": records, "seconds": round(seconds, 3), "records_per_s": round(records / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--headers", type=int, default=2)
    parser.add_argument("--ranges", type=int, default=4, help="partitions one task copies (a 2-slot run: 4)")
    parser.add_argument("--repeat", type=int, default=2, help="copies per mode, alternating")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mm2py-eos-profile-"))
    runtime = BrokerRuntime.locate()
    clusters = [KafkaCluster(work / s, 1, runtime=runtime, broker_config=KAFKA_THREAD_DEFAULTS) for s in ("src", "tgt")]
    out: dict[str, Any] = {"records": args.records, "value_bytes": args.value_bytes, "ranges": args.ranges, "runs": []}
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(KafkaCluster.start, clusters))
        source, target = clusters
        per_partition = args.records // PARTITIONS
        out["load"] = load(source.bootstrap, "bench", per_partition, args.value_bytes, args.headers, work)
        source.create_topic("mm2-offset-syncs.target.internal")
        target.create_topic(PROGRESS, 5)
        ends = dict.fromkeys(range(args.ranges), per_partition)
        for n in range(args.repeat):
            for exactly_once in (False, True):
                remote = f"copy-{n}-{'eos' if exactly_once else 'alo'}"
                target.create_topic(remote, PARTITIONS)
                timers = Timers()
                with instrumented(timers):
                    figures = copy(spec_for(source.bootstrap, target.bootstrap, exactly_once), "bench", remote, ends)
                figures.update(mode="eos" if exactly_once else "alo", round=n, steps=timers.report())
                out["runs"].append(figures)
                print(json.dumps(figures), flush=True)
    finally:
        for cluster in clusters:
            cluster.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

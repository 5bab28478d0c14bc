"""The baseline: the "custom consumer" that guides weigh against MirrorMaker 2 (``python -m bench.loop``).

One Python process, confluent-kafka, every partition assigned to one consumer; consume a batch, produce
each record to the same partition of the target topic (key, value, headers, CreateTime kept), and every
``--commit-interval`` seconds flush the producer and then commit the consumed offsets, so a crash re-copies
at most one interval: at-least-once, like mm2py. It stops once it has copied ``--ends`` (known in advance;
nothing else writes to the source during the benchmark). Prints one JSON object with its timings.

Tuning (each setting is there for a measured reason; see docs/performance.md):
- consumer ``fetch.queue.backoff.ms=10``: librdkafka's 1000 ms default stalls the fetcher whenever the local
  queue is full, which with a fast consumer is most of the time (175k vs 1.39M msg/s; docs/test-broker.md,
  *Throughput*);
- consumer ``queued.max.messages.kbytes`` large and ``max.partition.fetch.bytes`` 4 MB, so prefetch is
  never what the loop waits for;
- producer ``linger.ms=10``, ``batch.size`` ~1 MB, ``batch.num.messages=10000``: few, large produce requests
  (the broker's cost is per batch);
- producer ``acks=all`` and ``enable.idempotence=true``: mm2py's defaults, so both give the same guarantees;
- producer ``delivery.report.only.error=true``: the loop needs no downstream offsets (mm2py does, for its
  offset syncs), so it asks librdkafka for failure reports only; ``flush()`` returning 0 with no failure
  reported means every record was acknowledged. ``--per-record-reports`` turns this off to measure its cost.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

CONSUME_BATCH = 10_000
CONSUMER = {
    "enable.auto.commit": False,
    "fetch.queue.backoff.ms": 10,
    "queued.max.messages.kbytes": 262_144,
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    "isolation.level": "read_uncommitted",
    "session.timeout.ms": 6000,
}
PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    "compression.type": "none",
    "delivery.report.only.error": True,
}


class ProducerReady:
    """Client start-up is not what is measured: wait until the idempotent producer has its producer id.

    librdkafka gets the id (InitProducerId) in the background and holds every record until then, about
    0.5 s against tansu; records consumed meanwhile would pile up and make the copy look slower.
    librdkafka's statistics are the only place that shows the idempotence state.
    """

    def __init__(self) -> None:
        self.assigned = False

    def on_stats(self, stats_json: str) -> None:
        if not self.assigned:
            self.assigned = json.loads(stats_json).get("eos", {}).get("idemp_state") == "Assigned"

    def wait(self, producer: Producer, topic: str, timeout_s: float = 30.0) -> None:
        producer.list_topics(topic, timeout=timeout_s)  # the topic's metadata, also fetched at start-up
        deadline = time.monotonic() + timeout_s
        while not self.assigned:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the producer got no producer id within {timeout_s} s")
            producer.poll(0.05)


def copy(
    source: str,
    target: str,
    topic: str,
    remote_topic: str,
    ends: list[int],
    commit_interval_s: float,
    per_record_reports: bool,
    consume_timeout_s: float = 1.0,
) -> dict[str, Any]:
    started = time.monotonic()
    group = f"bench-loop-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": source, "group.id": group, **CONSUMER})
    failures: list[str] = []
    ready = ProducerReady()

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    # One callback for the producer (not one per produce() call): less work per record.
    producer = Producer(
        {
            "bootstrap.servers": target,
            **PRODUCER,
            "on_delivery": on_delivery,
            "delivery.report.only.error": not per_record_reports,
            "statistics.interval.ms": 100,
            "stats_cb": ready.on_stats,
        }
    )
    ready.wait(producer, remote_topic)

    def checkpoint() -> None:
        """Flush, then commit what was consumed: the commit never runs ahead of acknowledged data."""
        while producer.flush(1.0):
            if failures:
                break
        if failures:
            raise RuntimeError(f"producing to {target} failed for {len(failures)} record(s): {failures[0]}")
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            # Nothing consumed since the last commit (the final one after a periodic one): nothing to commit.
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise

    consumer.assign([TopicPartition(topic, p, 0) for p in range(len(ends))])
    produce, poll, total = producer.produce, producer.poll, sum(ends)
    consumed, nbytes, first = 0, 0, 0.0
    samples: list[tuple[float, int]] = []  # (seconds since first record, records acknowledged so far)
    next_commit = 0.0
    while consumed < total:
        # Ask for no more than is left: consume() waits for a full batch until its timeout, so asking for
        # 10,000 when 5,000 remain would add the whole timeout to the measured time.
        messages = consumer.consume(min(CONSUME_BATCH, total - consumed), consume_timeout_s)
        if not messages:
            continue
        if not first:
            first = time.monotonic()
            next_commit = first + commit_interval_s
        for msg in messages:
            if (err := msg.error()) is not None:
                raise KafkaException(err)
            value = msg.value()
            kind, timestamp = msg.timestamp()
            while True:
                try:
                    produce(
                        remote_topic,
                        value,
                        msg.key(),
                        msg.partition(),  # type: ignore[arg-type]
                        timestamp=timestamp if kind else 0,
                        headers=msg.headers(),
                    )
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    poll(0.05)
            if value is not None:
                nbytes += len(value)
        consumed += len(messages)
        poll(0)
        now = time.monotonic()
        samples.append((now - first, consumed - len(producer)))
        if now >= next_commit:
            checkpoint()
            next_commit = time.monotonic() + commit_interval_s
    consumed_all = time.monotonic()
    checkpoint()
    last = time.monotonic()
    samples.append((last - first, consumed))
    consumer.close()
    to_wall = time.time() - time.monotonic()
    return {
        "group": group,
        "records": consumed,
        "bytes": nbytes,
        "startup_s": first - started,
        "copy_s": last - first,
        "copy_start_wall": to_wall + first,
        "copy_end_wall": to_wall + last,
        "consume_s": consumed_all - first,
        "final_checkpoint_s": last - consumed_all,
        "curve": samples[:: max(1, len(samples) // 50)],
        "records_per_s": consumed / (last - first),
        "mid80_records_per_s": middle_rate(samples, consumed),
        "per_record_reports": per_record_reports,
    }


def middle_rate(samples: list[tuple[float, int]], total: int) -> float | None:
    """Records/s between the moments 10% and 90% of the records were acknowledged (linear interpolation)."""

    def when(target: float) -> float | None:
        for (t0, n0), (t1, n1) in itertools.pairwise(samples):
            if n0 <= target <= n1 and n1 > n0:
                return t0 + (t1 - t0) * (target - n0) / (n1 - n0)
        return None

    t10, t90 = when(0.1 * total), when(0.9 * total)
    if t10 is None or t90 is None or t90 <= t10:
        return None
    return 0.8 * total / (t90 - t10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--remote-topic", required=True)
    parser.add_argument("--ends", required=True, help="JSON list: end offset of each partition (start is 0)")
    parser.add_argument("--commit-interval", type=float, default=1.0, help="seconds between flush+commit")
    parser.add_argument("--per-record-reports", action="store_true", help="a delivery report for every record")
    parser.add_argument(
        "--consume-timeout", type=float, default=1.0, help="how long consume() waits for a full batch (seconds)"
    )
    args = parser.parse_args()
    result = copy(
        args.source,
        args.target,
        args.topic,
        args.remote_topic,
        json.loads(args.ends),
        args.commit_interval,
        args.per_record_reports,
        args.consume_timeout,
    )
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()

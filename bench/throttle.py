"""``mm2py.throughput.max.bytes.per.second`` on a migration's initial sync: does the limit hold window by window,
does it leave an unlimited flow alone, and does removing it restore full speed?

Three one-node Apache Kafka clusters: ``dc1`` holds a backlog of ``--backlog-mb`` (2,000 MB by default) and
``dc2`` one of ``--other-mb``, both of ``VALUE_SIZE``-byte records over ``--partitions`` partitions of topic
``orders``; ``mm2py run`` (continuous) copies both to ``target`` (DefaultReplicationPolicy), the flow
``dc1->target`` limited to ``--limit`` bytes a second, ``dc2->target`` not limited.

1. Limited: for ``--seconds`` after dc1's first record lands, the target's end offsets are sampled every second
   (in this process, not in mm2py's); the report gives dc1's rate over each 10-s window, dc2's rate while it
   copies its backlog, and the run's ``mm2py_throttled_seconds_total`` per flow from its metrics port.
2. Unlimited: SIGTERM, the limit taken out of the file, the run started again: dc1's rate until it has copied the
   rest of its backlog, the same 10-s windows.
3. Every record of both flows read back from the target: lost, duplicated and reordered per partition (each value
   carries its partition and sequence number).

Rates are counted in value bytes (records x ``VALUE_SIZE``); the batch path's limit counts whole record batches,
about 1 % more for these records, so a limit held exactly shows about 1 % under it here.

    python -m bench.throttle [--limit 5000000] [--backlog-mb 2000] [--other-mb 500] [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from bench.contenders import REPO
from tests.harness.kafka_harness import consumer_config
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime

TOPIC = "orders"
VALUE_SIZE = 1000
WINDOW_S = 10
METRICS_PORT = 19_431


def value_of(partition: int, seq: int) -> bytes:
    return f"{partition:03d}{seq:012d}".encode().ljust(VALUE_SIZE, b".")


def fill(cluster: KafkaCluster, partitions: int, megabytes: int) -> int:
    """``megabytes`` of records spread evenly over the partitions; how many records."""
    per_partition = megabytes * 1_000_000 // VALUE_SIZE // partitions
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    for seq in range(per_partition):
        for p in range(partitions):
            while True:
                try:
                    producer.produce(TOPIC, value_of(p, seq), partition=p)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(300) == 0
    return per_partition * partitions


def config_text(dc1: KafkaCluster, dc2: KafkaCluster, target: KafkaCluster, limit: int) -> str:
    lines = [
        "clusters = dc1, dc2, target",
        f"dc1.bootstrap.servers = {dc1.bootstrap}",
        f"dc2.bootstrap.servers = {dc2.bootstrap}",
        f"target.bootstrap.servers = {target.bootstrap}",
        "dc1->target.enabled = true",
        "dc2->target.enabled = true",
        f"topics = {TOPIC}",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        f"mm2py.metrics.port = {METRICS_PORT}",
        "mm2py.metrics.host = 127.0.0.1",
    ]
    if limit:
        lines.append(f"dc1->target.mm2py.throughput.max.bytes.per.second = {limit}")
    return "\n".join(lines) + "\n"


class Ends:
    """The target's end offsets of both remote topics, summed per flow, sampled on demand."""

    def __init__(self, target: KafkaCluster, partitions: int) -> None:
        self.consumer = Consumer(consumer_config(target.bootstrap, **{"group.id": "bench-throttle-ends"}))
        self.partitions = partitions

    def total(self, remote: str) -> int:
        """The sum of the end offsets; 0 while the run has not created the topic yet."""
        try:
            return sum(
                self.consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=10, cached=False)[1]
                for p in range(self.partitions)
            )
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._UNKNOWN_PARTITION:
                return 0
            raise

    def close(self) -> None:
        self.consumer.close()


def sample(ends: Ends, seconds: float, stop_when: Any = None) -> list[tuple[float, int, int]]:
    """(time, dc1 records, dc2 records) on the target every second for ``seconds`` (or until ``stop_when``)."""
    samples: list[tuple[float, int, int]] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds + 0.5:  # the sample at ``seconds`` too
        tick = time.monotonic()
        samples.append((tick - started, ends.total(f"dc1.{TOPIC}"), ends.total(f"dc2.{TOPIC}")))
        if stop_when is not None and stop_when(samples[-1]):
            break
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))  # the sampling period, not a synchronisation
    return samples


def window_rates(samples: list[tuple[float, int, int]], column: int) -> list[float]:
    """MB/s of one flow over each whole ``WINDOW_S`` window of the samples."""
    rates = []
    for i in range(0, len(samples) - WINDOW_S, WINDOW_S):
        (t0, *a), (t1, *b) = samples[i], samples[i + WINDOW_S]
        rates.append((b[column] - a[column]) * VALUE_SIZE / (t1 - t0) / 1e6)
    return rates


def throttled_seconds() -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("mm2py_throttled_seconds_total{"):
            source = line.split('source="', 1)[1].split('"', 1)[0]
            out[source] = float(line.rsplit(" ", 1)[1])
    return out


def start(work: Path, text: str, name: str) -> subprocess.Popen[bytes]:
    config = work / "throttle.properties"
    config.write_text(text)
    log = (work / f"{name}.log").open("w")
    return subprocess.Popen([sys.executable, "-m", "mm2py", "run", str(config)], cwd=REPO, stdout=log, stderr=log)


def stop(run: subprocess.Popen[bytes]) -> int:
    run.send_signal(signal.SIGTERM)
    return run.wait(120)


def check(target: KafkaCluster, remote: str, partitions: int, expected_per_partition: int) -> dict[str, int]:
    """Every record of ``remote`` read back: lost, duplicated and reordered, counted per partition."""
    consumer = Consumer(consumer_config(target.bootstrap, **{"enable.partition.eof": True}))
    consumer.assign([TopicPartition(remote, p, 0) for p in range(partitions)])
    seen: list[list[int]] = [[] for _ in range(partitions)]
    at_eof: set[int] = set()
    while len(at_eof) < partitions:
        for msg in consumer.consume(10_000, timeout=5):
            if msg.error() is not None:
                at_eof.add(msg.partition())
                continue
            value = msg.value()
            assert int(value[:3]) == msg.partition(), value[:15]
            seen[msg.partition()].append(int(value[3:15]))
    consumer.close()
    counts = {"records": 0, "lost": 0, "duplicated": 0, "reordered": 0}
    for seqs in seen:
        distinct = set(seqs)
        counts["records"] += len(seqs)
        counts["lost"] += expected_per_partition - len(distinct & set(range(expected_per_partition)))
        counts["duplicated"] += len(seqs) - len(distinct)
        counts["reordered"] += reordered(seqs)
    return counts


def reordered(seqs: list[int]) -> int:
    """Records that arrive, for the first time, after a record that followed them (a re-copy is a duplicate)."""
    seen: set[int] = set()
    highest, count = -1, 0
    for seq in seqs:
        if seq not in seen and seq < highest:
            count += 1
        seen.add(seq)
        highest = max(highest, seq)
    return count


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="mm2py-throttle-"))
    runtime = KafkaRuntime.locate()
    with ExitStack() as stack:
        dc1, dc2, target = (
            stack.enter_context(KafkaCluster(work / n, 1, runtime=runtime)) for n in ("dc1", "dc2", "t")
        )
        for cluster in (dc1, dc2):
            cluster.create_topic(TOPIC, args.partitions)
        filled = time.monotonic()
        records = {"dc1": fill(dc1, args.partitions, args.backlog_mb), "dc2": fill(dc2, args.partitions, args.other_mb)}
        fill_s = time.monotonic() - filled
        ends = Ends(target, args.partitions)
        stack.callback(ends.close)

        limited = start(work, config_text(dc1, dc2, target, args.limit), "limited")
        stack.callback(lambda: limited.poll() is None and limited.kill())
        started = sample(ends, 600, stop_when=lambda s: s[1] > 0)  # dc2 may be copying already
        phase1 = started[:-1] + [(t + started[-1][0], a, b) for t, a, b in sample(ends, args.seconds)]
        first = len(started) - 1  # dc1's first records are on the target
        throttled = throttled_seconds()
        code1 = stop(limited)

        unlimited = start(work, config_text(dc1, dc2, target, 0), "unlimited")
        stack.callback(lambda: unlimited.poll() is None and unlimited.kill())
        copied = phase1[-1][1]
        poll_until(lambda: ends.total(f"dc1.{TOPIC}") > copied, 300, "dc1's copy going on after the restart")
        phase2 = sample(ends, 600, stop_when=lambda s: s[1] >= records["dc1"] and s[2] >= records["dc2"])
        code2 = stop(unlimited)

        dc2_began = next(t for t, _a, b in phase1 if b > 0)
        dc2_done = next((t - dc2_began for t, _a, b in phase1 if b >= records["dc2"]), None)
        dc1 = phase1[first:]
        per_partition = {k: v // args.partitions for k, v in records.items()}
        return {
            "limit_bytes_per_s": args.limit,
            "backlog_mb": {"dc1": args.backlog_mb, "dc2": args.other_mb},
            "fill_s": round(fill_s, 1),
            "limited": {
                "dc1_mb_per_s_per_window": [round(r, 3) for r in window_rates(dc1, 0)],
                "dc1_mb_per_s_whole": round((dc1[-1][1] - dc1[0][1]) * VALUE_SIZE / (dc1[-1][0] - dc1[0][0]) / 1e6, 3),
                "dc2_backlog_copied_s": dc2_done,  # from its first record on the target to its last
                "dc2_mb_per_s_while_copying": round(args.other_mb / dc2_done, 1) if dc2_done else None,
                "throttled_seconds_total": throttled,
                "exit_code": code1,
            },
            "unlimited": {
                "dc1_mb_per_s_per_window": [round(r, 2) for r in window_rates(phase2, 0)],
                "dc1_rest_copied_s": phase2[-1][0],
                "dc1_mb_per_s_whole": round(
                    (phase2[-1][1] - phase2[0][1]) * VALUE_SIZE / max(phase2[-1][0], 1e-9) / 1e6, 1
                ),
                "exit_code": code2,
            },
            "checked": {
                flow: check(target, f"{flow}.{TOPIC}", args.partitions, per_partition[flow]) for flow in ("dc1", "dc2")
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=5_000_000, help="dc1->target's limit, bytes per second")
    parser.add_argument("--backlog-mb", type=int, default=2000, help="dc1's backlog")
    parser.add_argument("--other-mb", type=int, default=500, help="dc2's backlog (no limit)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long the limited phase is sampled")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

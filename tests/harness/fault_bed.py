"""What every broker-failure scenario (``fault_scenarios``) stands on: a source and a target cluster with loaded
source topics (:class:`Bed`), a new flow per run, a watch on how much of a copy landed, and the
:class:`Outcome` of a run: its exit code and seconds, the record comparison (lost, duplicated, reordered,
unexpected), what was done to which node at what share of the copy, and the Spark task attempts that failed (from
Spark's event log). Nothing here asserts; the caller decides what must hold.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.harness.broker_faults import await_in_sync
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import consumer_config
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import unique_alias, write_real_config
from tests.harness.record_check import Comparison, Digest, compare, digest_topic, high_watermarks, load

_log = logging.getLogger(__name__)
PARTITIONS = 8
VALUE_SIZE = 100
# mm2py's settings for three-node clusters: its own topics RF 3 as the copies are. The lease session is Kafka's
# group.min.session.timeout.ms, continuous jobs follow their partitions for 3 s (as the other real-Kafka tests).
THREE_NODE_SETTINGS = """\
replication.factor = 3
checkpoints.topic.replication.factor = 3
heartbeats.topic.replication.factor = 3
offset-syncs.topic.replication.factor = 3
offset.storage.replication.factor = 3
offset.storage.partitions = 5
mm2py.spark.master = local[2]
mm2py.lease.session.timeout.ms = 6000
mm2py.continuous.follow.ms = 3000
"""


@dataclass
class Event:
    """Something done to a cluster during a run: when, at what share of the copy, to which node."""

    at_s: float
    copied: float  # records on the target / records to copy, when it was done (0..1; more with duplicates)
    cluster: str  # "source" or "target"
    node: int
    action: str  # "sigkill", "sigterm", "restart", "sigstop", "sigcont", "in sync", "churn ..."

    def describe(self) -> str:
        return f"{self.action} {self.cluster} node {self.node} at {self.copied:.0%} ({self.at_s:.0f} s)"


@dataclass
class Outcome:
    scenario: str
    records: int
    exit_code: int | None  # None: still running when the scenario gave up on it (then killed)
    seconds: float  # from starting the run to its exit
    comparison: Comparison
    events: list[Event] = field(default_factory=list)
    failed_tasks: list[str] = field(default_factory=list)
    log: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    def row(self) -> str:
        c = self.comparison
        done = "; ".join(e.describe() for e in self.events if e.action in ("sigkill", "sigterm", "sigstop"))
        return (
            f"{self.scenario:<22} exit={self.exit_code!s:<4} {self.seconds:7.1f} s  records={self.records:<8} "
            f"lost={c.lost:<6} dup={c.duplicated:<6} reordered={c.reordered:<4} unexpected={c.unexpected:<4} "
            f"failed_tasks={len(self.failed_tasks):<2} {done}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "records": self.records,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "comparison": self.comparison.as_dict(),
            "events": [vars(e) for e in self.events],
            "failed_tasks": self.failed_tasks,
            "log": self.log,
            "notes": self.notes,
        }


@dataclass
class Flow:
    config: Path
    log: Path
    source_topic: str
    remote_topic: str


class Bed:
    """A source and a target cluster, and the loaded source topics the ``--once`` scenarios copy.

    A dataset is loaded (and its digest taken) once per size and reused: each run copies it under new cluster
    aliases, so into a new remote topic with new progress, as a first run of a new flow does."""

    def __init__(self, source: KafkaCluster, target: KafkaCluster, work_dir: Path) -> None:
        self.source, self.target, self.work_dir = source, target, work_dir
        self._datasets: dict[int, tuple[str, Digest]] = {}
        self.started = time.monotonic()
        self.events: list[Event] = []

    def with_target(self, target: KafkaCluster, work_dir: Path) -> Bed:
        """The same source (and its loaded datasets) copied to another target."""
        bed = Bed(self.source, target, work_dir)
        bed._datasets = self._datasets
        return bed

    def cluster(self, side: str) -> KafkaCluster:
        return {"source": self.source, "target": self.target}[side]

    def dataset(self, records: int) -> tuple[str, Digest]:
        if records not in self._datasets:
            topic = self.new_source_topic("faults")
            load(self.source.bootstrap, topic, records, partitions=PARTITIONS, value_size=VALUE_SIZE)
            self._datasets[records] = (topic, digest_topic(self.source.bootstrap, topic, PARTITIONS))
        return self._datasets[records]

    def new_source_topic(self, prefix: str, config: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{unique_alias('t')}"
        return self.source.create_topic(name, PARTITIONS, 3, config)

    def flow(self, topic: str, name: str, extra: str = "", target: Mapping[str, str] | None = None) -> Flow:
        """A properties file of a new flow copying ``topic``; unique aliases, so its remote topic and progress
        are new (the clusters outlive a scenario). ``target``: settings of the target cluster (``<alias>.KEY``)."""
        src, tgt = unique_alias("src"), unique_alias("tgt")
        run_dir = self.work_dir / f"{name}-{src}"
        run_dir.mkdir(parents=True)
        target_lines = "".join(f"{tgt}.{key} = {value}\n" for key, value in (target or {}).items())
        config = write_real_config(
            run_dir / "mm2.properties",
            {src: self.source.bootstrap, tgt: self.target.bootstrap},
            f"{src}->{tgt}.enabled = true\ntopics = {topic}\n" + target_lines + extra,
            cluster_settings=THREE_NODE_SETTINGS,
        )
        return Flow(config, run_dir / "run.log", topic, f"{src}.{topic}")

    def begin(self) -> None:
        self.started = time.monotonic()
        self.events = []

    def event(self, copied: float, side: str, node: int, action: str) -> None:
        self.events.append(Event(time.monotonic() - self.started, copied, side, node, action))
        _log.info("%s", self.events[-1].describe())


class Landed:
    """How much of a copy is on the target: the remote topic's high watermarks, sampled every few milliseconds.

    Kafka's high watermark counts records every in-sync replica has, so it never runs ahead of what a consumer
    can read. A partition whose leader is away keeps its last sample."""

    def __init__(self, target: KafkaCluster, topic: str, total: int) -> None:
        self.topic, self.total = topic, total  # in continuous mode, the caller moves ``total`` as it produces
        self._consumer = Consumer(consumer_config(target.bootstrap))
        self._last: dict[int, int] = {}

    def records(self) -> int:
        for p in range(PARTITIONS):
            with contextlib.suppress(KafkaException):  # no such topic yet, or its leader is away
                self._last[p] = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=1.0)[1]
        return sum(self._last.values())

    def fraction(self) -> float:
        return self.records() / max(1, self.total)

    def wait_for(self, run: MirrorRun, share: float, timeout: float) -> float:
        """Return the copied share as soon as it reaches ``share``.

        Every 20 ms until the first record lands (while the run starts: 5-18 s under the suite's load, each look
        eight ListOffsets to the target), then every 5 ms: a full-speed copy moves about 1% in 10 ms."""
        deadline = time.monotonic() + timeout
        poll_until(
            lambda: self.records() > 0, timeout, "a first record copied", process=run.proc, log=run.log, interval=0.02
        )
        reached = poll_until(
            lambda: (f := self.fraction()) >= share and f,
            max(0.0, deadline - time.monotonic()),
            f"{share:.0%} copied",
            process=run.proc,
            log=run.log,
            interval=0.005,
        )
        return float(reached)

    def close(self) -> None:
        self._consumer.close()


def wait_exit(run: MirrorRun, timeout: float) -> int | None:
    """The run's exit code once it exits by itself; None (and the run killed) if it is still running at ``timeout``."""
    try:
        return run.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        return None


def failed_tasks(run: MirrorRun) -> list[str]:
    return [
        f"stage {t.stage} task {t.index}.{t.attempt}: {t.reason} {t.description[:300]}"
        for t in run.task_ends()
        if t.failed
    ]


def caught_up(source: KafkaCluster, source_topic: str, target: KafkaCluster, remote_topic: str) -> bool:
    """Every partition of the remote topic holds at least as many records as the source partition."""
    try:
        ends = high_watermarks(source.bootstrap, source_topic, range(PARTITIONS))
        copied = high_watermarks(target.bootstrap, remote_topic, range(PARTITIONS))
    except KafkaException:
        return False
    return all(copied[p] >= ends[p] for p in ends)


def pause(run: MirrorRun, seconds: float) -> None:
    """Let ``seconds`` pass (the spacing of a scenario's faults, not a synchronisation), less if the run exits."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        run.proc.wait(max(0.0, seconds))


def outcome(
    bed: Bed, name: str, flow: Flow, run: MirrorRun, exit_code: int | None, source: Digest, seconds: float
) -> Outcome:
    """Compare the copy with its source once every node is back and in sync (what a consumer reads then)."""
    records = sum(len(hashes) for hashes in source.values())
    await_in_sync(bed.source)
    await_in_sync(bed.target)
    comparison = compare(source, digest_topic(bed.target.bootstrap, flow.remote_topic, PARTITIONS))
    notes: dict[str, Any] = {"remote_topic": flow.remote_topic}
    return Outcome(
        name, records, exit_code, seconds, comparison, list(bed.events), failed_tasks(run), str(flow.log), notes
    )

"""An executor JVM lost in the middle of ``mm2py run`` on a Spark standalone cluster, three real Kafka sources
merged into one real Kafka target (IdentityReplicationPolicy): the scenario of ``bench/executor_loss.py`` and
``tests/realkafka/test_executor_loss.py``.

Why: on a cluster an executor is a machine that can die. Spark then runs the lost tasks again elsewhere; mm2py's
promise is that the run carries on (continuous) or finishes (``--once``) with exit 0, nothing lost, each source
partition's order kept, and no more copied twice than the lost task copied after it last recorded progress
(a retried attempt resumes from that progress). This module sets the scene up (:class:`Scene`), runs one
scenario (:func:`run_scenario`) and returns its numbers; what the records say is counted by
:mod:`tests.harness.sequenced`, what Spark did is read from its event log (:mod:`tests.harness.faults`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mm2py.mirror.progress import progress_of, progress_topic
from tests.harness.faults import MirrorRun, cpu_ticks, is_worker_daemon
from tests.harness.kafka_harness import consumer_config, read_all
from tests.harness.mm2py_cli import mm2py_argv
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import IDENTITY
from tests.harness.sequenced import SourceLoad, Stream, TargetCheck
from tests.harness.spark_cluster import ExecutorProcess, StandaloneCluster

DCS = ("dc1", "dc2", "dc3")
TOPIC = "orders"
SETTINGS = f"""\
replication.policy.class = {IDENTITY}
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
offset.storage.partitions = 5
mm2py.lease.session.timeout.ms = 6000
"""


@dataclass(frozen=True)
class Params:
    """One scenario: ``once`` (``--once``) or ``continuous``; sizes per source cluster."""

    mode: str  # once | continuous | stop-at-loss (continuous, SIGTERM as soon as the executor is lost)
    records: int = 300_000  # the backlog each DC holds before mm2py starts
    partitions: int = 4
    value_size: int = 1000
    kill_at: float = 0.25  # share of the backlog on the target when the executor is killed
    worker_cores: int = 1
    rate: int = 2000  # continuous: records/s per DC while mm2py runs
    after_kill_s: float = 15.0  # continuous: how long the load goes on once a task copies again after the kill
    timeout_s: float = 900.0


class Scene:
    """Three one-node source clusters, one target cluster, and a master with two one-``worker_cores`` workers;
    a context manager that stops them all."""

    def __init__(
        self, work: Path, worker_cores: int = 1, partitions: int = 4, runtime: KafkaRuntime | None = None
    ) -> None:
        self.work = work
        self.partitions = partitions
        self._stack = ExitStack()
        runtime = runtime or KafkaRuntime.locate()
        self.clusters = {name: KafkaCluster(work / name, 1, runtime=runtime) for name in (*DCS, "target")}
        self.spark = StandaloneCluster(work / "spark", cores=worker_cores, memory="1g", workers=2, start_timeout=240)

    def __enter__(self) -> Scene:
        try:
            with ThreadPoolExecutor(len(self.clusters)) as pool:
                for cluster in pool.map(self._start, self.clusters.values()):
                    self._stack.callback(cluster.stop)
            self._stack.callback(self.spark.stop)
            self.spark.start()
            for dc in DCS:
                self.clusters[dc].create_topic(TOPIC, self.partitions)
        except BaseException:
            self._stack.close()
            raise
        return self

    @staticmethod
    def _start(cluster: KafkaCluster) -> KafkaCluster:
        cluster.start(timeout=240)  # four JVMs at once on a busy machine
        return cluster

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def target(self) -> str:
        return self.clusters["target"].bootstrap

    def config(self, path: Path) -> Path:
        lines = [f"clusters = {', '.join(self.clusters)}"]
        lines += [f"{name}.bootstrap.servers = {c.bootstrap}" for name, c in self.clusters.items()]
        lines += [f"{dc}->target.enabled = true" for dc in DCS]
        lines += [f"topics = {TOPIC}", f"mm2py.spark.master = {self.spark.master_url}"]
        path.write_text("\n".join(lines) + "\n" + SETTINGS)
        return path


# What a ListOffsets may answer while a topic just created has leaders not yet known to every listener.
_LEADERS_NOT_SETTLED = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
}


class TargetCount:
    """Records in the target topic (end offsets, duplicates included), through one consumer kept open: counting
    must be quick, or the kill lands after the copy it should interrupt."""

    def __init__(self, bootstrap: str) -> None:
        self._consumer = Consumer(consumer_config(bootstrap))
        self._partitions: list[int] = []

    def __call__(self) -> int:
        if not self._partitions:
            topic = self._consumer.list_topics(TOPIC, timeout=10).topics[TOPIC]
            if topic.error is not None or not topic.partitions:
                return 0  # not created yet
            self._partitions = sorted(topic.partitions)
        try:
            return sum(
                self._consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in self._partitions
            )
        except KafkaException as exc:
            if exc.args[0].code() not in _LEADERS_NOT_SETTLED:
                raise
            return 0  # a topic just created: its leaders are not known everywhere yet; ask again

    def close(self) -> None:
        self._consumer.close()


def python_workers_of(executor: ExecutorProcess) -> list[int]:
    """The forked Python workers below an executor JVM (daemon processes whose parent is a daemon)."""
    parents, commands = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            commands[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
    daemons = {pid for pid, cmd in commands.items() if is_worker_daemon(cmd.decode(errors="replace"))}
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    # Down the tree by parent, not by pid order: pids wrap around at pid_max (32,768 here), after which a child
    # can have a lower pid than its parent, and a long suite starts that many processes.
    under, todo = {executor.pid}, [executor.pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in under:
                under.add(child)
                todo.append(child)
    return sorted(pid for pid in daemons & under if parents[pid] in daemons)


def kill_busiest_executor(spark: StandaloneCluster, run: MirrorRun) -> dict[str, Any]:
    """SIGKILL the executor JVM whose Python workers (the copy tasks) used the most CPU over the last 0.3 s; what
    was killed, and when. Measured here, from /proc: the driver's own REST API answers in seconds on a busy
    machine, by when the copy it should interrupt may be over (Spark's event log says afterwards which task
    attempts the kill failed)."""
    chosen: list[tuple[int, ExecutorProcess]] = []

    def pick() -> bool:
        workers = {e: python_workers_of(e) for e in spark.executors()}
        before = {pid: cpu_ticks(pid) for pids in workers.values() for pid in pids}
        time.sleep(0.3)  # the measuring window
        used = sorted((-sum(cpu_ticks(p) - before[p] for p in pids), e.pid, e) for e, pids in workers.items())
        if used and used[0][0] < 0:
            chosen.append((-used[0][0], used[0][2]))
        return bool(chosen)

    run.wait_for(pick, 120, "an executor running a copy task")
    ticks, victim = chosen[0]
    workers = python_workers_of(victim)
    spark.kill_executor(victim)
    killed, killed_wall = time.monotonic(), time.time()
    # Its Python workers see their JVM's pipe close and exit: none may go on copying beside the retried task.
    gone = poll_until(
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic(),
        60,
        "the lost executor's Python workers to exit",
        interval=0.01,
    )
    return {
        "executor_id": victim.executor_id,
        "pid": victim.pid,
        "worker": victim.worker,
        "cpu_ticks_in_window": ticks,
        "python_workers": len(workers),
        "python_workers_gone_s": round(gone - killed, 2),
        "killed_monotonic": killed,
        "killed_wall": killed_wall,
    }


def progress_before(bootstrap: str, dc: str, before_ms: float) -> dict[int, int]:
    """The progress of ``dc``'s partitions of ``orders`` recorded on the target before ``before_ms`` (wall clock):
    the progress topic keeps every record (it is far below a segment, so never compacted), each with the time
    its copy task produced it."""
    records = [r for r in read_all(bootstrap, progress_topic(dc)) if r.timestamp <= before_ms]
    return {p: offset for (t, p), offset in progress_of(((r.key, r.value) for r in records), dc).items() if t == TOPIC}


def explain_duplicates(
    runs: dict[Stream, tuple[int, int, int]],
    executor_logs: str,
    lost_flows: set[str],
    recorded_at_kill: dict[Stream, int],
) -> dict[str, Any]:
    """Whether every duplicate is a re-copy by the retried attempt of a lost task, from the progress its
    predecessor recorded: per source partition of a flow that lost a task, one run of records each copied once
    more, starting after the progress recorded when the executor was killed (a source offset is the record's
    sequence, the sources holding nothing else). A retry that did not resume would start at its range's start,
    below that. Where the retried attempt logged that it resumed (``batch_copy``), the run starts right there;
    where the lost task had recorded nothing yet, there is no such line and the run starts at its range's start."""
    resumed: dict[Stream, set[int]] = {}
    for dc, partition, offset in re.findall(
        rf"flow=(\S+)->target topic={TOPIC} partition=(\d+): resuming at offset (\d+)", executor_logs
    ):
        resumed.setdefault((dc, int(partition)), set()).add(int(offset))
    explained = all(
        f"{stream[0]}->target" in lost_flows
        and high - low + 1 == copies
        and low > recorded_at_kill.get(stream, -1)
        and (low in resumed[stream] if stream in resumed else True)
        for stream, (low, high, copies) in runs.items()
    )
    return {
        "explained_by_lost_tasks": explained,
        "runs": [
            {
                "dc": dc,
                "partition": p,
                "first": low,
                "last": high,
                "copies": copies,
                "recorded_at_kill": recorded_at_kill.get((dc, p)),
                "resumed_at": sorted(resumed.get((dc, p), ())),
            }
            for (dc, p), (low, high, copies) in runs.items()
        ],
        "resumed_partitions": sum(len(offsets) for offsets in resumed.values()),
    }


def flows_following(log: str) -> bool:
    """Every flow has copied, and none copies in rounds any more (``copy_rounds.follows`` says both)."""
    copied = {dc for dc in DCS if re.search(rf"flow={dc}->target records=[1-9]", log)}
    in_rounds = set(re.findall(r"flow=(\S+)->target copies in rounds", log))
    following = set(re.findall(r"flow=(\S+)->target: \d+ Spark task slots now", log))
    return copied == set(DCS) and in_rounds <= following


def spark_attempts(run: MirrorRun) -> dict[str, Any]:
    """What Spark did, from its event log: jobs, task attempts, the failed ones (their flow, and when and where
    their next attempt started), executors added and removed."""
    events = run.spark_events()
    flow_of = {
        stage: str(e["Properties"].get("spark.job.description", "")).removeprefix("mm2py ").split(":")[0]
        for e in events
        if e.get("Event") == "SparkListenerJobStart"
        for stage in e["Stage IDs"]
    }
    starts = {
        (e["Stage ID"], e["Task Info"]["Index"], e["Task Info"]["Attempt"]): e["Task Info"]
        for e in events
        if e.get("Event") == "SparkListenerTaskStart"
    }
    ends = [e for e in events if e.get("Event") == "SparkListenerTaskEnd"]
    failed = []
    for e in ends:
        info, reason = e["Task Info"], e["Task End Reason"]["Reason"]
        if reason == "Success":
            continue
        key = (e["Stage ID"], info["Index"], info["Attempt"])
        following = starts.get((key[0], key[1], key[2] + 1))
        failed.append(
            {
                "flow": flow_of.get(key[0], "?"),
                "stage": key[0],
                "task": key[1],
                "attempt": key[2],
                "executor": info["Executor ID"],
                "reason": reason,
                "ran_s": round((info["Finish Time"] - info["Launch Time"]) / 1000, 1),
                "next_attempt_on": following["Executor ID"] if following else None,
                "next_attempt_after_s": (
                    round((following["Launch Time"] - info["Finish Time"]) / 1000, 1) if following else None
                ),
            }
        )
    return {
        "jobs": sum(1 for e in events if e.get("Event") == "SparkListenerJobStart"),
        "task_attempts": len(starts),
        "retried_attempts": sum(1 for key in starts if key[2] > 0),
        "failed_attempts": failed,
        "executors_added": [e["Executor ID"] for e in events if e.get("Event") == "SparkListenerExecutorAdded"],
        "executors_removed": [
            {"executor": e["Executor ID"], "reason": e.get("Removed Reason", "")}
            for e in events
            if e.get("Event") == "SparkListenerExecutorRemoved"
        ],
    }


def progress_lag(config: Path) -> int:
    """Records between the source ends and the progress mm2py recorded (``mm2py lag --json``), summed."""
    done = subprocess.run(
        [*mm2py_argv(), "lag", str(config), "--json", "--topics", TOPIC],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"mm2py lag failed ({done.returncode}): {done.stderr}")
    return sum(int(row["lag_records"]) for row in json.loads(done.stdout))


def expected_of(loads: dict[str, SourceLoad]) -> dict[Stream, int]:
    return {stream: n for load in loads.values() for stream, n in load.expected().items()}


def run_scenario(scene: Scene, params: Params, work: Path) -> dict[str, Any]:
    """Load the sources, run mm2py, kill the busiest executor mid-copy, and count what reached the target."""
    loads = {dc: SourceLoad(dc, scene.clusters[dc].bootstrap, TOPIC, scene.partitions, params.value_size) for dc in DCS}
    per_partition = params.records // scene.partitions
    with ThreadPoolExecutor(len(loads)) as pool:
        list(pool.map(lambda load: load.bulk(per_partition), loads.values()))
    backlog = sum(expected_of(loads).values())
    config = scene.config(work / "mm2.properties")
    options = ["--master", scene.spark.master_url, "--conf", "spark.driver.host=127.0.0.1"]
    options += ["--conf", "spark.driver.bindAddress=127.0.0.1"]
    once = params.mode == "once"
    count = TargetCount(scene.target)
    with MirrorRun(config, work / "run.log", *(["--once"] if once else []), *options) as run:
        started = time.monotonic()
        if not once:
            for load in loads.values():
                load.start_steady(params.rate)
        try:
            threshold = int(params.kill_at * backlog)
            run.wait_for(lambda: count() >= threshold, params.timeout_s, f"{threshold} records on the target")
            if not once:  # the tasks lost must be following ones, not those of a round
                run.wait_for(lambda: flows_following(run.log_text()), params.timeout_s, "every flow following")
            at_kill, reached = count(), time.monotonic()
            killed = kill_busiest_executor(scene.spark, run)
            killed_at = killed.pop("killed_monotonic")
            killed.update(at_s=round(killed_at - started, 1), decided_to_kill_s=round(killed_at - reached, 2))
            killed["target_records_at_kill"] = at_kill
            result = (
                _finish_once(run, params)
                if once
                else _stop_at_loss(run, loads, params, config, options)
                if params.mode == "stop-at-loss"
                else _finish_continuous(scene, run, loads, params, count, at_kill)
            )
        finally:
            count.close()
            for load in loads.values():
                load.stop_steady()
    check = TargetCheck(scene.target, TOPIC, scene.partitions)
    try:
        check.read_to_end()
        counts = check.counts(expected_of(loads))
        runs = check.duplicate_runs()
    finally:
        check.close()
    logs = "\n".join(scene.spark.executor_logs().values())
    spark = spark_attempts(run)
    kill_ms = killed.pop("killed_wall") * 1000
    recorded = {(dc, p): offset for dc in DCS for p, offset in progress_before(scene.target, dc, kill_ms).items()}
    return {
        "scenario": params.mode,
        "records_per_dc": {dc: sum(load.counts) for dc, load in loads.items()},
        "backlog_per_dc": per_partition * scene.partitions,
        **counts,
        **result,
        "progress_lag_after_exit": progress_lag(config),
        "killed": killed,
        "duplicates": explain_duplicates(runs, logs, {a["flow"] for a in spark["failed_attempts"]}, recorded),
        "spark": spark,
        "log": str(run.log),
    }


def _finish_once(run: MirrorRun, params: Params) -> dict[str, Any]:
    code = run.proc.wait(params.timeout_s)
    return {"exit_code": code}


def _finish_continuous(
    scene: Scene, run: MirrorRun, loads: dict[str, SourceLoad], params: Params, count: TargetCount, at_kill: int
) -> dict[str, Any]:
    """The run goes on after the kill: load for ``after_kill_s`` more once records land again, then stop the load,
    wait until the target holds every record, SIGTERM mm2py and time its exit."""
    run.wait_for(lambda: count() > at_kill, params.timeout_s, "records landing after the kill")
    run.assert_alive_for(params.after_kill_s, "the load after the kill")
    for load in loads.values():
        load.stop_steady()
    expected = expected_of(loads)
    check = TargetCheck(scene.target, TOPIC, scene.partitions)
    try:
        run.wait_for(
            lambda: check.read_available(timeout=5.0) >= 0 and check.complete(expected),
            params.timeout_s,
            "every produced record on the target",
        )
    finally:
        check.close()
    signalled = time.monotonic()
    run.proc.send_signal(signal.SIGTERM)
    try:
        code = run.proc.wait(params.timeout_s)
    except subprocess.TimeoutExpired:
        code = -1  # still running: the MirrorRun's exit kills it
    return {"exit_code": code, "sigterm_to_exit_s": round(time.monotonic() - signalled, 2)}


def _stop_at_loss(
    run: MirrorRun, loads: dict[str, SourceLoad], params: Params, config: Path, options: list[str]
) -> dict[str, Any]:
    """SIGTERM as soon as the driver noticed the lost executor, while the lost tasks' next attempts wait for a task
    slot (or have just started): the run must still exit 0 within seconds. Then the load stops and ``--once``
    copies what is left, from the progress recorded, on the same cluster."""
    run.wait_for(lambda: "Lost executor" in run.log_text(), 120, "the driver noticing the lost executor")
    signalled = time.monotonic()
    run.proc.send_signal(signal.SIGTERM)
    try:
        code = run.proc.wait(params.timeout_s)
    except subprocess.TimeoutExpired:
        code = -1  # still running: the MirrorRun's exit kills it
    exited = time.monotonic()
    for load in loads.values():
        load.stop_steady()
    with (run.log.parent / "once-after.log").open("w") as log:
        rest = subprocess.run(
            [*mm2py_argv(), "run", str(config), "--once", *options],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=params.timeout_s,
            check=False,
        )
    return {
        "exit_code": code,
        "sigterm_to_exit_s": round(exited - signalled, 2),
        "once_after_exit_code": rest.returncode,
    }

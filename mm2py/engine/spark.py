"""Spark for mm2py: the one module that imports pyspark.

It starts a SparkContext that works from any virtualenv (executors run this interpreter unless told
otherwise), ships the mm2py package to executors on real clusters, and runs one copy job: a list of offset
ranges in, a list of CopyResults out. Records stay inside the Python workers (``mm2py.executor.batch_copy`` or
``mm2py.executor.record_copy``, as the flow's CopySpec says).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mm2py.engine import class_data
from mm2py.errors import AUTHORIZATION_ERRORS, Failure, ReplicationError, UsageError
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.librdkafka.principals import principal_of

log = logging.getLogger(__name__)

_LOG4J = Path(__file__).with_name("log4j2.properties")
_LOCAL = re.compile(r"^local(\[(?P<threads>[^,\]]+)\])?$")
_LOCAL_WITH_FAILURES = re.compile(r"^local\[[^,\]]+,\s*(?P<failures>\d+)\]$")


def effective_master(master: str, flows: int = 1) -> str:
    """``local``/``local[N]`` retry nothing by default; give failed copy tasks Spark's usual 4 attempts.

    ``local[*]`` gets at least one thread per flow: a continuous run's copy tasks follow their partitions until
    the run stops, mostly waiting on brokers, and a flow without a free task slot would copy in rounds."""
    match = _LOCAL.match(master.strip())
    if match:
        threads = match.group("threads") or "1"
        if threads == "*" and flows > (os.cpu_count() or 1):
            threads = str(flows)
        return f"local[{threads},4]"
    return master.strip()


def task_attempts(master: str, conf: Mapping[str, str]) -> int:
    """How many times Spark runs a failing task: ``local[N,F]`` says F (plain ``local`` never retries),
    any other master ``spark.task.maxFailures``. The copy task reports failures as data on the last one."""
    match = _LOCAL_WITH_FAILURES.match(master)
    if match:
        return max(1, int(match.group("failures")))
    if master.startswith("local"):
        return 1
    try:
        return max(1, int(conf.get("spark.task.maxFailures", "4")))
    except ValueError:
        return 4


def _package_zip() -> str:
    """A zip of the mm2py package, for executors on hosts where mm2py is not installed."""
    root = Path(__file__).resolve().parents[1]
    handle, path = tempfile.mkstemp(prefix="mm2py-", suffix=".zip")
    os.close(handle)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in root.rglob("*.py"):
            archive.write(file, Path("mm2py") / file.relative_to(root))
    return path


class JobsCancelled(Exception):
    """A copy job ended by :meth:`SparkRunner.cancel_jobs`: the run is stopping, not failing."""


class SparkRunner:
    """Copy jobs through one SparkContext: one per ``mm2py run`` (:meth:`start`); each flow submits its jobs to
    it from its own thread. ``flows`` is how many flows share it at once; ``task_attempts`` how often Spark runs
    a failing task. A runner stops the context at the end only if it started it (``owns_context``)."""

    def __init__(
        self,
        sc: Any,
        *,
        flows: int,
        task_attempts: int,
        owns_context: bool = True,
        package_zip: str | None = None,
        jvm: subprocess.Popen[bytes] | None = None,
        archive_write: tuple[class_data.Archive, Path] | None = None,
    ) -> None:
        self.sc = sc
        self.flows = max(1, flows)  # flows that submit jobs to this context at the same time
        self.task_attempts = task_attempts
        self.owns_context = owns_context
        self._zip = package_zip
        self._jvm = jvm
        self._archive_write = archive_write
        self.cancelled = False

    @classmethod
    def start(
        cls, app_name: str, master: str, deploy_mode: str, conf: Mapping[str, str], flows: int = 1
    ) -> SparkRunner:
        """Start the SparkContext of a run (its JVM, with the driver-side defaults mm2py needs)."""
        if deploy_mode not in ("client", "cluster"):
            raise UsageError(f"--deploy-mode {deploy_mode}: use client or cluster")
        if deploy_mode == "cluster":
            raise UsageError(
                "--deploy-mode cluster runs the driver inside the cluster, so mm2py must be started there by "
                "spark-submit (see docs/operations.md, 'Running on a Spark cluster'); from this process use client mode"
            )
        # Executors and the driver use this interpreter unless the user chose one: local mode then works
        # from any virtualenv without PYSPARK_PYTHON.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark import SparkConf, SparkContext  # the only pyspark import in mm2py

        master = effective_master(master, flows)
        local = master.startswith("local")
        if local:
            # Spark would otherwise bind to the address the host name resolves to; a local run stays on loopback.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        spark_conf = SparkConf().setAppName(app_name).setMaster(master)
        archive = class_data.driver_archive()
        # No archive yet: this run's JVM writes it, unless the run's own driver options replace mm2py's.
        writing = None
        if archive is not None and not archive.exists and "spark.driver.extraJavaOptions" not in conf:
            writing = archive.new_writing_path()
        settings = {**spark_defaults(local, archive, writing), **conf}
        for key, value in settings.items():
            spark_conf.set(key, value)
        # The JVM's stderr is relayed through Python logging, so it is redacted like every other line, and the
        # JVM's one-off notice about incubator modules is dropped.
        from pyspark.java_gateway import launch_gateway

        # The JVM (and the Python workers it forks) get a process group of their own: Ctrl-C on a terminal
        # signals the foreground group, which must reach only this driver, so it can let the batch in flight
        # finish; a killed session (a crash, systemd's stop) still takes them all.
        group: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE, **group})  # type: ignore[no-untyped-call]
        threading.Thread(
            target=_relay_jvm_output, args=(gateway.proc.stderr,), name="spark-jvm-stderr", daemon=True
        ).start()
        sc = SparkContext(conf=spark_conf, gateway=gateway)
        sc.setLogLevel("WARN")
        package_zip = None
        if not local:
            package_zip = _package_zip()
            sc.addPyFile(package_zip)
        log.info("spark started master=%s parallelism=%s", master, sc.defaultParallelism)
        return cls(
            sc,
            flows=flows,
            task_attempts=task_attempts(master, settings),
            package_zip=package_zip,
            jvm=gateway.proc,
            archive_write=(archive, writing) if archive is not None and writing is not None else None,
        )

    @property
    def parallelism(self) -> int:
        return int(self.sc.defaultParallelism)

    @property
    def driver_host(self) -> str:
        """The address executors reach the driver at (where the task-control endpoint listens)."""
        return str(self.sc.getConf().get("spark.driver.host", "127.0.0.1"))

    def settings(self, keys: Iterable[str]) -> dict[str, str]:
        """The values of ``keys`` Spark runs with (the run's, spark-defaults.conf's, spark-submit's), where set."""
        conf = self.sc.getConf()
        return {key: str(conf.get(key)) for key in keys if conf.get(key, None) is not None}

    @property
    def driver_bind_address(self) -> str | None:
        """Where the driver listens when that is not the address executors reach (``spark.driver.bindAddress``)."""
        address = self.sc.getConf().get("spark.driver.bindAddress", None)
        return str(address) if address else None

    @property
    def exactly_once_slots(self) -> int:
        """Task slots of an exactly-once flow: one transactional producer each."""
        return max(1, self.parallelism // self.flows)

    @property
    def follow_tasks(self) -> int:
        """Task slots each flow whose tasks follow their partitions gets, as every flow's job must run at once; its
        job runs at most ``tasks.max`` of them (0: there are fewer task slots than flows, so the flows copy in
        rounds)."""
        return self.parallelism // self.flows

    def copy(self, spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        """Run one copy job; a range that stopped early says why in its result (``raise_failure`` raises it),
        after what it copied before, which the caller counts first."""
        return self._run(spec, ranges, tasks)

    def _run(self, spec: CopySpec, ranges: list[PartitionRange], tasks: int) -> list[CopyResult]:
        """Run one copy job: at most ``tasks`` tasks (exactly-once: one per task slot), each copying a group of
        ranges."""
        if not ranges:
            return []
        groups = group_by_slot(ranges, spec) if spec.exactly_once_slots else group_ranges(ranges, tasks)
        self.sc.setLocalProperty(
            "spark.job.description", f"mm2py {spec.flow}: {len(ranges)} partition ranges in {len(groups)} tasks"
        )
        rdd = self.sc.parallelize(groups, len(groups))
        spec = dataclasses.replace(spec, job_ranges=len(ranges))  # the tasks' shares of the throughput limit
        try:
            task = functools.partial(_copy_task, spec, self.task_attempts)
            results: list[CopyResult] = rdd.mapPartitions(task).collect()
        except Exception as exc:  # only a task that died without reporting (see died_task_failure)
            if self.cancelled:
                raise JobsCancelled(f"flow {spec.flow}: copy job cancelled as the run stops") from None
            raise ReplicationError.of_failure(died_task_failure(exc), f"flow {spec.flow}: copy job failed: ") from None
        return results

    def cancel_jobs(self) -> None:
        """Cancel every job in flight (their Python workers are killed): a stopping run whose tasks did not end
        within the grace period, as Connect abandons a task after ``task.shutdown.graceful.timeout.ms``. What the
        cancelled tasks copied since their last progress record is copied again by the next run."""
        self.cancelled = True
        self.sc.cancelAllJobs()

    def stop(self) -> None:
        """Stop the context and, if this runner started it, its JVM (which then writes the class-data archive,
        if this run is the first on its JVM and classpath)."""
        if self.owns_context:
            self.sc.stop()
            self._end_jvm()
        if self._zip is not None:  # executors fetched their own copies
            Path(self._zip).unlink(missing_ok=True)

    def _end_jvm(self, timeout_s: float = 120.0) -> None:
        """The driver JVM exits once its standard input closes (Spark's gateway server watches it). PySpark would
        otherwise keep it for the next context of this process, and ignore the JVM a next run starts with its own
        settings: the class keeps its gateway, so that is forgotten here too."""
        from pyspark import SparkContext

        if self._jvm is None:
            return
        if self._jvm.stdin is not None:
            self._jvm.stdin.close()
        try:
            code: int | None = self._jvm.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._jvm.kill()
            code = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        if self._archive_write is not None:
            archive, written = self._archive_write
            archive.publish(written, code)


def spark_defaults(local: bool, archive: class_data.Archive | None, writing: Path | None) -> dict[str, str]:
    """The Spark settings mm2py starts a context with; the run's own (``mm2py.spark.conf.*``, ``--conf``) win.
    The driver JVM maps the class-data-sharing ``archive`` (engine/class_data.py), or writes it to ``writing``."""
    sharing = f" {archive.java_options(writing)}" if archive is not None and (writing or archive.exists) else ""
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.worker.reuse": "true",
        "spark.log.level": "WARN",
        "spark.task.maxFailures": "4",
        # The driver JVM only schedules tasks (records stay in the Python workers), so its JIT's top tier
        # never pays off; compiling with C1 alone starts a local SparkContext 3-4 s sooner on 2 cores
        # (5.7-6.2 s instead of 7.7-9.8 s to a live context, measured with pyspark 4.3 and Java 17).
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG4J} -XX:TieredStopAtLevel=1{sharing}",
    }
    if local:
        defaults.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        # The Python workers import pyspark as installed, compiled, not from Spark's zips (engine/python_daemon.py).
        defaults["spark.python.daemon.module"] = "mm2py.engine.python_daemon"
    return defaults


def group_ranges(ranges: list[PartitionRange], tasks: int) -> list[list[PartitionRange]]:
    """Split a job's ranges into at most ``tasks`` groups of about equal record counts (driver side).

    The task count follows Spark's parallelism, not the partition count: every task pays for its start,
    its connections and its metadata, so 800 partitions in 800 tasks would cost far more than the copying.
    All ranges of one partition land in the same group, in their order, so a partition is never copied by
    two tasks at once.
    """
    by_partition: dict[tuple[str, int], list[PartitionRange]] = {}
    for rng in ranges:
        by_partition.setdefault((rng.topic, rng.partition), []).append(rng)
    slots = max(1, min(tasks, len(by_partition)))
    groups: list[list[PartitionRange]] = [[] for _ in range(slots)]
    load = [0] * slots
    # Largest first into the least loaded group: a greedy split within 4/3 of the best possible.
    for members in sorted(by_partition.values(), key=lambda ms: -sum(r.end - r.start for r in ms)):
        slot = load.index(min(load))
        groups[slot].extend(members)
        load[slot] += sum(r.end - r.start for r in members)
    return [g for g in groups if g]


def group_by_slot(ranges: list[PartitionRange], spec: CopySpec) -> list[list[PartitionRange]]:
    """Exactly-once: one group per task slot (:meth:`CopySpec.slot_of`), so each task writes
    under its slot's transactional.id, whichever job, host or run copies the partitions."""
    by_slot: dict[int, list[PartitionRange]] = {}
    for rng in ranges:
        by_slot.setdefault(spec.slot_of(rng.topic, rng.partition), []).append(rng)
    return [by_slot[slot] for slot in sorted(by_slot)]


def _relay_jvm_output(stream: Any) -> None:
    jvm_log = logging.getLogger("mm2py.spark")
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip()
        if line and not line.startswith("WARNING: Using incubator modules"):
            jvm_log.warning("%s", line)


def _copy_task(spec: CopySpec, attempts: int, groups: Iterator[list[PartitionRange]]) -> Iterator[CopyResult]:
    """The Spark task (executor side): its groups of ranges copied together, the copier told which attempt this is
    (a later one resumes from what the earlier one recorded) and whether Spark will run it again if it raises.

    The copy path's module is imported here, on the executor, and only the one the flow takes: a batch-path
    worker loads no librdkafka (this module imports neither copy path at its top)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    ranges = (rng for group in groups for rng in group)
    if spec.copy_path.batch:
        from mm2py.executor import batch_copy

        return batch_copy.copy_partitions(spec, ranges, attempt=attempt)
    from mm2py.executor import record_copy

    last_attempt = context is None or attempt + 1 >= attempts
    return record_copy.copy_partitions(spec, ranges, last_attempt=last_attempt, retried=attempt > 0)


def raise_failure(flow: str, results: list[CopyResult], spec: CopySpec | None = None) -> None:
    """Raise the failure the tasks reported, a permanent one first: retrying the job cannot help it. Call it
    once the results' progress is counted: a failed range may still have copied part of itself. An ACL's
    refusal names who the tasks connect as (``spec``'s clients), which the tasks' own clients do not say."""
    failures = [r.error for r in results if r.error is not None]
    if failures:
        failure = next((f for f in failures if not f.retriable), failures[0])
        if failure.code in AUTHORIZATION_ERRORS and spec is not None:
            principals = (
                f"principal {principal_of(spec.consumer_settings)} on {spec.source}, "
                f"{principal_of(spec.producer_settings)} on {spec.target}"
            )
            failure = replace(failure, message=f"{failure.message} ({principals})")
        raise ReplicationError.of_failure(failure, f"flow {flow}: ")


def died_task_failure(exc: BaseException) -> Failure:
    """Why a Spark task died without returning its CopyResult (its Python worker was killed, it ran out of
    memory, or a bug raised): the Python error line in the JVM's text, without the stack around it.

    The one place mm2py reads an error from text; the failure is retried, since a new worker may succeed.
    """
    text = str(exc)
    log.info("copy job failed: %s", text)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith(("mm2py.errors.", "ReplicationError", "confluent_kafka.")) or "Error:" in line:
            return Failure(line.split(": ", 1)[1] if line.startswith("mm2py.errors.") else line)
    lines = [x for x in text.splitlines() if x.strip()]
    return Failure(lines[0] if lines else type(exc).__name__)

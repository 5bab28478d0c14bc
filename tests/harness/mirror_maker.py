"""Apache Kafka's own MirrorMaker 2 beside mm2py: dedicated mode as a process, and MM2's offset translation.

Why: mm2py claims to keep MM2's internal topics in MM2's byte formats, so that a flow can move between the two
in either direction and MM2's own client reads what mm2py wrote. Only MM2 itself can confirm that.

- ``MirrorMaker`` runs ``org.apache.kafka.connect.mirror.MirrorMaker FILE`` (what ``connect-mirror-maker.sh``
  runs) from the jars ``make install`` resolves, logging to a file. It is ready when its effect is seen, not
  when it says so: ``await_progress`` polls the Connect offsets it commits to ``mm2-offsets.<source>.internal``.
  It stops with SIGTERM (its shutdown hook stops the herders and commits their offsets one last time).
- ``connect_offsets`` reads those Connect offsets with a parser of its own (not mm2py's), so a test compares
  MM2's record of its progress with an independent reading of the bytes.
- ``translate_offsets`` calls ``RemoteClusterUtils.translateOffsets`` through ``tests/java/TranslateOffsets.java``,
  compiled once with the JDK's ``javac`` against the same jars and cached under ``.kafka-libs/``.

Nothing here downloads anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.harness.kafka_harness import consumer_config
from tests.harness.real_kafka import FILE_LOG4J, JVM_FLAGS, LIBS_DIR, REPO_ROOT, KafkaRuntime

MIRROR_MAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
SOURCE_CONNECTOR = "MirrorSourceConnector"
STOP_TIMEOUT = 60.0
JAVA_HELPER_SOURCE = REPO_ROOT / "tests" / "java" / "TranslateOffsets.java"
_STDERR_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


class MirrorMakerExited(RuntimeError):
    """MM2 ended while a test still needed it; the message carries its log tail."""


class MirrorMaker:
    """One MM2 dedicated-mode process; a context manager that always stops it.

    ``jvm_flags`` default to the test brokers' small, fast-starting JVM; a benchmark passes its own.
    """

    def __init__(
        self,
        runtime: KafkaRuntime,
        properties: Path,
        work_dir: Path,
        *,
        clusters: Sequence[str] = (),
        jvm_flags: Sequence[str] = JVM_FLAGS,
    ) -> None:
        self.runtime = runtime
        self.properties = properties
        self.work_dir = work_dir
        self.clusters = tuple(clusters)
        self.jvm_flags = tuple(jvm_flags)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mirror-maker.log"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("MirrorMaker was not started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        log4j = self.work_dir / "mirror-maker-log4j2.properties"
        clusters = ["--clusters", *self.clusters] if self.clusters else []
        return [
            str(self.runtime.java),
            *self.jvm_flags,
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dmm2py.test.log={self.log_path}",
            "-cp",
            os.pathsep.join(map(str, self.runtime.classpath)),
            MIRROR_MAKER_MAIN,
            str(self.properties),
            *clusters,
        ]

    def start(self) -> None:
        if self.running:
            raise RuntimeError("MirrorMaker is already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "mirror-maker-log4j2.properties").write_text(FILE_LOG4J)
        with (self.work_dir / "mirror-maker.stdout").open("ab") as out:
            # Own session: Ctrl-C reaches pytest only, and stop() ends MM2.
            self._process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, else SIGKILL. The exit code, or None if it had to be killed."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                return self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
                return None
        return self._process.returncode

    def __enter__(self) -> MirrorMaker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_running(self) -> None:
        if not self.running:
            code = self._process.returncode if self._process is not None else None
            raise MirrorMakerExited(f"MirrorMaker exited with {code}; log {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        parts = []
        for path in (self.work_dir / "mirror-maker.stdout", self.log_path):
            try:
                parts.append(path.read_text(errors="replace")[-chars:])
            except OSError as exc:
                parts.append(f"<no {path.name}: {exc}>")
        return "\n".join(parts)

    def await_progress(
        self, target_bootstrap: str, source_alias: str, ends: Mapping[tuple[str, int], int], timeout: float = 180.0
    ) -> dict[tuple[str, int], int]:
        """Wait until MM2's committed Connect offsets say every (topic, partition) was copied up to its end.

        ``ends`` are source end offsets; MM2 stores the offset of the last replicated record, so the wait is
        for ``end - 1``. Fails at once, with MM2's log, if the process exits meanwhile.
        """
        wanted = {tp: end - 1 for tp, end in ends.items()}
        deadline = time.monotonic() + timeout
        seen: dict[tuple[str, int], int] = {}
        while True:
            self.check_running()
            seen = connect_offsets(target_bootstrap, source_alias)
            if all(seen.get(tp) == offset for tp, offset in wanted.items()):
                return seen
            if time.monotonic() > deadline:
                got = {tp: seen.get(tp) for tp in wanted}
                raise TimeoutError(
                    f"MirrorMaker's offsets after {timeout} s: {got}, wanted {wanted}; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.5)  # poll interval: MM2 commits offsets every offset.flush.interval.ms


def offsets_topic(source_alias: str) -> str:
    return f"mm2-offsets.{source_alias}.internal"


def connect_offsets(
    bootstrap: str, source_alias: str, connector: str = SOURCE_CONNECTOR, timeout: float = 30.0
) -> dict[tuple[str, int], int]:
    """Last replicated offset per (source topic, partition) in ``mm2-offsets.<source>.internal``.

    Kafka Connect's format: key ``[connector, {"cluster": A, "partition": P, "topic": T}]`` and value
    ``{"offset": N}``, JSON; a null value (tombstone) removes the entry. Empty if the topic does not exist yet.
    """
    result: dict[tuple[str, int], int] = {}
    for key, value in _read_to_end(bootstrap, offsets_topic(source_alias), timeout):
        try:
            name, partition = json.loads(key or b"null")
        except (TypeError, ValueError):
            continue
        if name != connector or not isinstance(partition, dict) or partition.get("cluster") != source_alias:
            continue
        tp = (partition["topic"], partition["partition"])
        if value is None:
            result.pop(tp, None)
        else:
            result[tp] = json.loads(value)["offset"]
    return result


def _read_to_end(bootstrap: str, topic: str, timeout: float) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of ``topic``, in offset order per partition; [] if there is no topic."""
    consumer = Consumer(consumer_config(bootstrap, **{"enable.partition.eof": True}))
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return []
        partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} on {bootstrap}: no end on partitions {sorted(pending)}")
            for msg in consumer.consume(1000, timeout=0.2):
                if (err := msg.error()) is None:
                    records.append((msg.key(), msg.value()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                else:
                    raise KafkaException(err)
        return records
    finally:
        consumer.close()


def prompt_herder(target_alias: str) -> dict[str, str]:
    """MM2 settings that make a test's MM2 show its progress in seconds instead of a minute: Connect's plugin scan
    by ServiceLoader manifests (the classpath scan takes 5-10 s here, twice), and the herder into
    ``target_alias`` committing its Connect offsets every second (Connect's default, 60 s, is what
    ``await_progress`` would wait for). The herder reads both from the target cluster's settings (a top-level
    ``offset.flush.interval.ms`` would be ignored); MirrorMaker reads the plugin key from the top level too."""
    return {
        "plugin.discovery": "service_load",
        f"{target_alias}.plugin.discovery": "service_load",
        f"{target_alias}.offset.flush.interval.ms": "1000",
    }


def properties_text(settings: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    items = settings.items() if isinstance(settings, Mapping) else settings
    return "".join(f"{key} = {value}\n" for key, value in items)


# --- RemoteClusterUtils.translateOffsets through the Java helper ----------------------------------------------


def java_helper_classes(
    runtime: KafkaRuntime, source: Path = JAVA_HELPER_SOURCE, class_file: str = "TranslateOffsets.class"
) -> Path:
    """The directory holding a compiled helper (``class_file`` is its path in there); compiled at most once per
    source and classpath."""
    digest = hashlib.sha256(source.read_bytes())
    digest.update("\n".join(p.name for p in runtime.classpath).encode())
    classes = LIBS_DIR / "java-helpers" / digest.hexdigest()[:16]
    if (classes / class_file).is_file():
        return classes
    javac = runtime.java.with_name("javac")
    if not javac.is_file():
        found = shutil.which("javac")
        if found is None:
            raise RuntimeError("no javac next to java or on PATH: the MM2 helper needs a JDK, not a JRE")
        javac = Path(found)
    staging = classes.with_name(f"{classes.name}.{uuid.uuid4().hex[:8]}.tmp")
    staging.mkdir(parents=True)
    try:
        done = subprocess.run(
            [
                str(javac),
                "-d",
                str(staging),
                "-cp",
                os.pathsep.join(map(str, runtime.classpath)),
                str(source),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"javac {source.name} failed:\n{done.stdout}{done.stderr}")
        try:
            staging.rename(classes)  # atomic; a concurrent session may have won, which is as good
        except OSError:
            if not (classes / class_file).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return classes


def translate_offsets(
    runtime: KafkaRuntime,
    client_properties: Mapping[str, str],
    remote_cluster_alias: str,
    group: str,
    timeout_ms: int = 30_000,
) -> dict[tuple[str, int], int]:
    """``RemoteClusterUtils.translateOffsets(props, remoteClusterAlias, group, timeout)``: MM2's own reading of
    the checkpoints on the cluster ``client_properties`` point at, as {(local topic, partition): offset}."""
    classes = java_helper_classes(runtime)
    log4j = classes / "log4j2-stderr.properties"
    if not log4j.is_file():
        log4j.write_text(_STDERR_LOG4J)
    classpath = os.pathsep.join([str(classes), *map(str, runtime.classpath)])
    cmd = [
        str(runtime.java),
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        classpath,
        "TranslateOffsets",
        remote_cluster_alias,
        group,
        str(timeout_ms),
        *(f"{k}={v}" for k, v in client_properties.items()),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_ms / 1000 + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"TranslateOffsets exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return {(row["topic"], row["partition"]): row["offset"] for row in json.loads(done.stdout)}

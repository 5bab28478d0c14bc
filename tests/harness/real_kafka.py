"""Real Apache Kafka for tests: KRaft clusters of 1 or 3 nodes run from the jars `make kafka-libs` resolves.

Why: tansu (the broker of the other tests) never compacts, has one node and no SASL, TLS, ACLs or
CreatePartitions. These brokers are the real thing, so what passes here holds on a production cluster.

Each node runs in combined mode (broker and controller in one JVM) on loopback ports, with its own log dir
formatted by Kafka's own StorageTool. Start-up is kept short with a small serial-GC heap, C1-only JIT and a
class-data-sharing archive that the first clean broker exit of a session writes into the jar cache; it
halves JVM start-up on later runs. Nothing here downloads anything: missing jars are a loud failure.

Versions: the pinned one (``PINNED_VERSION``, also MirrorMaker 2's) and broker-only jar sets of others
(``OTHER_VERSIONS``: a 3.x and the newest 4.x), so the batch path is proven against each;
``KafkaRuntime.locate(version)`` picks one. A 3.x broker logs through log4j 1.x, a 4.x one through log4j 2.

Listeners: every node has CONTROLLER (the KRaft quorum) and PLAINTEXT (clients and inter-broker
replication). Further client listeners (SASL_PLAINTEXT, SSL, SASL_SSL) come from ``real_kafka_security``;
a listener's name is its security protocol, so one listener per protocol.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.harness.kafka_harness import HOST, client_config, forget_producer, free_port
from tests.harness.metadata_probe import brokers_listed_by
from tests.harness.polling import poll_until
from tests.harness.real_kafka_compaction import COMPACTED_TOPIC_CONFIG
from tests.harness.real_kafka_security import CLIENT_LISTENERS, Security

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBS_DIR = REPO_ROOT / ".kafka-libs"
JARS_DIR = LIBS_DIR / "jars"
LIBS_STAMP = LIBS_DIR / ".resolved"
# Keep in step with tests/kafka-libs/pom.xml (the pinned version) and KAFKA_VERSIONS in the Makefile (the others,
# each from tests/kafka-libs/<version>/pom.xml into .kafka-libs/<version>/jars).
PINNED_VERSION = "4.3.1"
OTHER_VERSIONS = ("3.9.2", "4.4.0")
START_TIMEOUT = 90.0  # three JVMs starting at once on two busy cores can take a while
STOP_TIMEOUT = 15.0
# Small heap (the cleaner's dedupe buffer is shrunk to match), serial GC and C1 only: faster start-up and
# less CPU for short-lived test brokers; throughput is still far above what the tests need.
JVM_FLAGS = (
    "-Xmx384m",
    "-Xms128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
FILE_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:mm2py.test.log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
# Config dumps run to hundreds of lines per start (and per herder, for MM2) and bury what a failing test needs.
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
"""
# The same for a 3.x broker (reload4j fills in ${mm2py.test.log} from the system properties). 3.x also dumps its
# KafkaConfig at INFO under its own class name: about 280 lines per start.
FILE_LOG4J_1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${mm2py.test.log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.common.config=WARN
log4j.logger.org.apache.kafka.common.utils.AppInfoParser=WARN
log4j.logger.kafka.server.KafkaConfig=WARN
"""
_log = logging.getLogger(__name__)


class KafkaJarsMissing(RuntimeError):
    """The jar cache is absent; tests must fail with the fix, never skip or download."""


def _cluster_id() -> str:
    """A random Kafka Uuid in its base64 form; like Kafka's own, never starting with '-' (read as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cluster_id


@dataclass(frozen=True)
class KafkaRuntime:
    """The java binary and the Kafka + MirrorMaker 2 classpath; builds JVM command lines for both."""

    java: Path
    classpath: tuple[Path, ...]

    @classmethod
    def locate(cls, version: str | None = None) -> KafkaRuntime:
        """The pinned version's jars (brokers and MirrorMaker 2), or a broker-only set of ``version``."""
        hint = "run `make install` (it resolves the Kafka jars once with Maven into .kafka-libs/)"
        if version is None or version == PINNED_VERSION:
            jars_dir, stamp, version = JARS_DIR, LIBS_STAMP, PINNED_VERSION
        elif version in OTHER_VERSIONS:
            jars_dir, stamp = LIBS_DIR / version / "jars", LIBS_DIR / version / ".resolved"
        else:
            raise KafkaJarsMissing(
                f"Kafka {version} is not resolved for tests (known: {PINNED_VERSION}, {OTHER_VERSIONS})"
            )
        if not stamp.is_file():
            raise KafkaJarsMissing(f"no Kafka {version} jars in {jars_dir}; {hint}")
        jars = tuple(sorted(jars_dir.glob("*.jar")))
        if not any(j.name == f"kafka_2.13-{version}.jar" for j in jars):
            raise KafkaJarsMissing(f"{jars_dir} holds no kafka_2.13-{version} jar; {hint}")
        java = shutil.which("java")
        if java is None:
            raise KafkaJarsMissing("no `java` on PATH; the Kafka test brokers need Java 17 or newer")
        return cls(Path(java).resolve(), jars)

    @property
    def version(self) -> str:
        jar = next(j for j in self.classpath if j.name.startswith("kafka_2.13-"))
        return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def log4j_file_name(self) -> str:
        return "log4j2.properties" if self.major >= 4 else "log4j.properties"

    @property
    def log4j_text(self) -> str:
        """A broker log configuration writing to ``${mm2py.test.log}``: log4j 2 for 4.x, log4j 1.x for 3.x."""
        return FILE_LOG4J if self.major >= 4 else FILE_LOG4J_1

    def log4j_option(self, path: Path) -> str:
        return f"-Dlog4j2.configurationFile={path}" if self.major >= 4 else f"-Dlog4j.configuration=file:{path}"

    @property
    def cds_archive(self) -> Path:
        """Class-data-sharing archive; valid only for this exact JDK and classpath, hence the key."""
        java_home = self.java.parents[1]
        release = (java_home / "release").read_bytes() if (java_home / "release").is_file() else b""
        key = hashlib.sha256(release + str(java_home).encode() + "\n".join(map(str, self.classpath)).encode())
        return LIBS_DIR / "cds" / f"kafka-{key.hexdigest()[:16]}.jsa"

    def command(
        self,
        main: str,
        *args: str,
        log_file: Path,
        log4j: Path,
        dump_archive: Path | None = None,
        jvm_options: Iterable[str] = (),
    ) -> list[str]:
        """``java ... main args``; with ``dump_archive`` the JVM writes a CDS archive there on exit."""
        cds = (
            [f"-XX:ArchiveClassesAtExit={dump_archive}"]
            if dump_archive
            else ([f"-XX:SharedArchiveFile={self.cds_archive}"] if self.cds_archive.is_file() else [])
        )
        return [
            str(self.java),
            *JVM_FLAGS,
            *cds,
            *jvm_options,
            self.log4j_option(log4j),
            f"-Dmm2py.test.log={log_file}",
            "-cp",
            os.pathsep.join(map(str, self.classpath)),
            main,
            *args,
        ]


@dataclass
class KafkaNode:
    """One combined broker+controller JVM; ports are fixed at creation so a restart keeps its address."""

    node_id: int
    work_dir: Path
    ports: dict[str, int]
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _dump: Path | None = field(default=None, init=False, repr=False)

    @property
    def config_path(self) -> Path:
        return self.work_dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "server.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def address(self, listener: str = "PLAINTEXT") -> str:
        return f"{HOST}:{self.ports[listener]}"

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"<no log: {exc}>"

    def spawn(
        self, runtime: KafkaRuntime, log4j: Path, dump_archive: Path | None = None, jvm_options: Iterable[str] = ()
    ) -> None:
        if self.running:
            raise RuntimeError(f"kafka node {self.node_id} is already running")
        self._dump = dump_archive
        cmd = runtime.command(
            "kafka.Kafka",
            str(self.config_path),
            log_file=self.log_path,
            log4j=log4j,
            dump_archive=dump_archive,
            jvm_options=jvm_options,
        )
        with (self.work_dir / "stdout.log").open("ab") as out:
            # Own session: Ctrl-C reaches pytest only, and the fixtures stop the brokers.
            self._process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def request_stop(self) -> None:
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGTERM)
            self._process.send_signal(signal.SIGCONT)  # a frozen (SIGSTOPped) node must wake up to see SIGTERM

    def send_signal(self, signum: signal.Signals) -> None:
        """Signal the node's JVM (SIGSTOP and SIGCONT: a machine that stalls and comes back)."""
        if not self.running:
            raise RuntimeError(f"kafka node {self.node_id} is not running")
        assert self._process is not None
        self._process.send_signal(signum)

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"kafka node {self.node_id} was never started")
        return self._process.pid

    def await_exit(self, deadline: float, runtime: KafkaRuntime) -> None:
        """Wait for a requested stop; SIGKILL at ``deadline``. A clean exit publishes the CDS archive."""
        if self._process is None:
            return
        try:
            self._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            return
        if self._dump is not None and self._dump.is_file():
            runtime.cds_archive.parent.mkdir(parents=True, exist_ok=True)
            self._dump.replace(runtime.cds_archive)  # atomic: a concurrent session sees all or nothing
        self._dump = None

    def kill(self) -> None:
        """SIGKILL, as a crashed machine; the JVM writes nothing more (no CDS archive either)."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
        if self._dump is not None:
            self._dump.unlink(missing_ok=True)
            self._dump = None

    def exit_report(self, chars: int = 3000) -> str:
        """How a node that is not running ended: its exit code (negative: the signal), its stdout's tail and its
        log's (a JVM that ran out of heap says so on stdout, one that could not bind its port in the log)."""
        code = self._process.returncode if self._process is not None else None
        return f"exit code {code}; stdout:\n{self.stdout_tail(chars)}\nlog {self.log_path}:\n{self.log_tail(chars)}"

    def stdout_tail(self, chars: int = 2000) -> str:
        try:
            return (self.work_dir / "stdout.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class KafkaCluster:
    """N KRaft nodes, each broker and controller, on loopback; context manager, always stopped on exit.

    ``listeners`` names client listeners besides PLAINTEXT (``"SASL_PLAINTEXT"``, ``"SSL"``, ``"SASL_SSL"``);
    ``broker_config`` overrides any generated setting; ``jvm_options`` are added to each node's java command line
    (system properties such as ``-Djava.security.krb5.conf`` that no server.properties key can set).
    """

    def __init__(
        self,
        work_dir: Path,
        size: int = 1,
        *,
        runtime: KafkaRuntime | None = None,
        listeners: Iterable[str] = (),
        broker_config: Mapping[str, str] | None = None,
        jvm_options: Iterable[str] = (),
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one node, not {size}")
        self.runtime = runtime or KafkaRuntime.locate()
        self.work_dir = work_dir
        self.size = size
        self.listeners = ("PLAINTEXT", *(name for name in listeners if name != "PLAINTEXT"))
        unknown = set(self.listeners) - {"PLAINTEXT", *CLIENT_LISTENERS}
        if unknown:
            raise ValueError(f"unknown listeners {sorted(unknown)}; known: PLAINTEXT, {', '.join(CLIENT_LISTENERS)}")
        self.broker_config = dict(broker_config or {})
        self.jvm_options = tuple(jvm_options)
        self.security = Security(work_dir / "security", self.runtime.java)
        self.cluster_id = _cluster_id()
        self.nodes = [self._new_node(node_id) for node_id in range(1, size + 1)]
        self.log4j = work_dir / self.runtime.log4j_file_name

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_for("PLAINTEXT")

    def bootstrap_for(self, listener: str) -> str:
        return ",".join(node.address(listener) for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def client_config(
        self, listener: str = "PLAINTEXT", *, user: str = "admin", mechanism: str = "SCRAM-SHA-512", **overrides: Any
    ) -> dict[str, Any]:
        """librdkafka settings for ``listener`` as ``user``, with the credentials and CA file it needs."""
        security = self.security.client_settings(listener, user, mechanism)
        return client_config(self.bootstrap_for(listener), **{**security, **overrides})

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Format every node's storage, start all nodes, return once every node's Metadata lists every broker.

        Every node's, not the first to answer's: a node whose metadata image is behind lists fewer brokers, and a
        librdkafka client that asks it fails what it had in flight at the brokers left out with ``_DESTROY_BROKER``
        (:mod:`tests.harness.metadata_probe`; a fresh 3.9 cluster's first CreateTopics, three times in a row in CI of
        173e4db). Right after the cluster listed every broker, a node of 7 of 18 fresh 3.9.2 clusters still left one
        or two out, for up to 0.3 s; after this wait, none of 16.

        A port can be taken by another process between choosing it and the JVM binding it; then the
        whole cluster starts again on new ports from freshly formatted storage (up to 3 attempts).
        """
        started = time.monotonic()
        for attempt in range(1, 4):
            self._prepare()
            try:
                for node in self.nodes:
                    node.spawn(self.runtime, self.log4j, self._take_dump_slot(), self.jvm_options)
                every = [n.node_id for n in self.nodes]
                self.await_brokers(every, started + timeout)
                for node in self.nodes:
                    self.await_brokers(every, started + timeout, asked=node)
                break
            except (RuntimeError, TimeoutError):
                self.stop()
                if attempt == 3 or not any("Address already in use" in n.log_tail(50_000) for n in self.nodes):
                    raise
                for node in self.nodes:
                    node.ports = {name: free_port() for name in node.ports}
                    shutil.rmtree(node.work_dir)
            except BaseException:
                self.stop()
                raise
        _log.info(
            "kafka %s: %d node(s) ready in %.1f s at %s",
            self.runtime.version,
            self.size,
            time.monotonic() - started,
            self.bootstrap,
        )

    def _prepare(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log4j.write_text(self.runtime.log4j_text)
        for node in self.nodes:
            node.work_dir.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(self._properties(node))
        with ThreadPoolExecutor(self.size) as pool:
            list(pool.map(self._format, self.nodes))  # the JVMs start in parallel; list() re-raises errors

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM every node at once, SIGKILL what is left after ``timeout`` s. Idempotent."""
        forget_producer(self.bootstrap)
        for node in self.nodes:
            node.request_stop()
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            node.await_exit(deadline, self.runtime)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (broker and controller): no controlled shutdown, as a machine failure."""
        self.node(node_id).kill()

    def stop_node(self, node_id: int, timeout: float = STOP_TIMEOUT) -> None:
        node = self.node(node_id)
        node.request_stop()
        node.await_exit(time.monotonic() + timeout, self.runtime)

    def restart_node(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        """Start a stopped or killed node on its old ports and data; return once it answers at its own address and
        the cluster lists it as a broker.

        Why its own address too: the cluster goes on listing a killed node until the controller fences it
        (``broker.session.timeout.ms``), so the cluster's answer alone may come before the new JVM has even bound
        its port, and a node that then fails to start would go unseen until the next test."""
        node = self.node(node_id)
        node.spawn(self.runtime, self.log4j, jvm_options=self.jvm_options)
        deadline = time.monotonic() + timeout
        self.await_brokers([node_id], deadline, asked=node)
        self.await_brokers([node_id], deadline)

    def await_brokers(self, node_ids: list[int], deadline: float, asked: KafkaNode | None = None) -> None:
        """Poll Metadata until every node in ``node_ids`` is listed: by the cluster (a librdkafka client; listed at
        its address), or by the node ``asked`` itself (:mod:`tests.harness.metadata_probe`)."""
        cluster_admin = AdminClient(client_config(self.bootstrap)) if asked is None else None
        wanted = {i: (HOST, self.node(i).ports["PLAINTEXT"]) for i in node_ids}
        last = "no answer yet"
        while True:
            for i in node_ids:
                node = self.node(i)
                if not node.running:
                    raise RuntimeError(
                        f"kafka node {i} exited while starting; log {node.log_path}:\n"
                        f"{node.stdout_tail()}\n{node.log_tail()}"
                    )
            try:
                if cluster_admin is not None:  # not its truth: an AdminClient with nothing queued is falsy
                    brokers = cluster_admin.list_topics(timeout=1.0).brokers.values()
                    listed = {b.id: (str(b.host), b.port) for b in brokers}
                    if all(listed.get(i) == address for i, address in wanted.items()):
                        return
                    last = f"metadata lists {listed}"
                else:
                    assert asked is not None
                    ids = brokers_listed_by(asked.address())
                    if ids >= set(node_ids):
                        return
                    last = f"node {asked.node_id} lists brokers {sorted(ids)}"
            except (KafkaException, OSError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {i}:\n{self.node(i).log_tail(3000)}" for i in node_ids)
                raise TimeoutError(f"kafka nodes {node_ids} not ready ({last}):\n{tails}")
            time.sleep(0.05)  # poll interval of the readiness check

    def partition_state(self, topic: str, partition: int) -> tuple[int, list[int]]:
        """(leader id, ISR) from a fresh Metadata request; leader -1 while there is none, or while the broker
        asked does not know the partition yet (one just added reaches each broker's metadata in its own time)."""
        metadata = AdminClient(client_config(self.bootstrap)).list_topics(topic, timeout=10)
        described = metadata.topics[topic].partitions.get(partition)
        return (described.leader, list(described.isrs)) if described is not None else (-1, [])

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        replica_assignment: list[list[int]] | None = None,
    ) -> str:
        """Create ``name`` and return it once every partition has a leader. ``replica_assignment`` (the node ids of
        each partition's replicas, preferred leader first; as many for every partition) replaces ``partitions`` and
        ``replication_factor``.

        A fresh AdminClient's first CreateTopics right after a Kafka 3.9 cluster came up sometimes failed with
        ``_DESTROY_BROKER`` ("Broker handle destroyed without termination": librdkafka dropped the handle the
        request was on when a Metadata answer left that broker out), sometimes after the broker created the topic
        (3 of 16 fresh 3.9 clusters, none of 14 on 4.4.0). :meth:`start` now waits until every node lists every
        broker; such a failure is still retried, and the retry accepts TOPIC_ALREADY_EXISTS.
        So is librdkafka's ``_TIMED_OUT`` while it waits for a controller ("Failed while waiting for controller"),
        with a new client: a node that was frozen past ``broker.session.timeout.ms`` by the test before is fenced
        once it runs again and registers anew, and a CreateTopics sent meanwhile found no controller for 30 s once
        (CI of a2aa70c, the test after ``test_records_queued_behind_a_timed_out_record_never_land[new]``).
        """
        if replica_assignment is not None:
            partitions = len(replica_assignment)
            topic = NewTopic(name, partitions, replica_assignment=replica_assignment, config=dict(config or {}))
        else:
            topic = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
        for attempt in range(1, 4):
            admin = AdminClient(client_config(self.bootstrap))
            try:
                admin.list_topics(timeout=10)
                admin.create_topics([topic], operation_timeout=30, request_timeout=30)[name].result(timeout=30)
                break
            except KafkaException as exc:
                code = exc.args[0].code()
                if attempt > 1 and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    break  # the attempt that failed had created it
                if code not in (KafkaError._DESTROY_BROKER, KafkaError._TIMED_OUT) or attempt == 3:
                    raise
                _log.warning("creating %s: %s; trying again", name, exc)
        for partition in range(partitions):
            poll_until(functools.partial(self._has_leader, name, partition), 30, f"leader for {name}-{partition}")
        return name

    def create_compacted_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """A topic the cleaner compacts within seconds (real_kafka_compaction, then ``config``)."""
        return self.create_topic(name, partitions, replication_factor, {**COMPACTED_TOPIC_CONFIG, **(config or {})})

    def _has_leader(self, topic: str, partition: int) -> bool:
        try:
            return self.partition_state(topic, partition)[0] >= 0
        except (KafkaException, KeyError):
            return False

    def _new_node(self, node_id: int) -> KafkaNode:
        ports = {name: free_port() for name in ("CONTROLLER", *self.listeners)}
        return KafkaNode(node_id, self.work_dir / f"node-{node_id}", ports)

    def _take_dump_slot(self) -> Path | None:
        """The first JVM of a run without a CDS archive writes one (to a unique name, published on exit)."""
        if self.runtime.cds_archive.is_file() or any(n._dump for n in self.nodes):
            return None
        self.runtime.cds_archive.parent.mkdir(parents=True, exist_ok=True)
        return self.runtime.cds_archive.with_suffix(f".{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")

    def _format(self, node: KafkaNode) -> None:
        """Kafka's StorageTool writes meta.properties and the bootstrap metadata (and SCRAM users)."""
        args = [
            "format",
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(node.config_path),
            "--ignore-formatted",
            *self.security.format_args(self.listeners),
        ]
        cmd = self.runtime.command(
            "kafka.tools.StorageTool", *args, log_file=node.work_dir / "storage-tool.log", log4j=self.log4j
        )
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
            raise RuntimeError(f"StorageTool format failed for node {node.node_id} ({done.returncode}):\n{output}")

    def _properties(self, node: KafkaNode) -> str:
        replicas = str(min(3, self.size))
        min_isr = str(min(2, self.size))
        voters = ",".join(f"{n.node_id}@{n.address('CONTROLLER')}" for n in self.nodes)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(f"{name}://{node.address(name)}" for name in node.ports),
            "advertised.listeners": ",".join(f"{name}://{node.address(name)}" for name in self.listeners),
            "listener.security.protocol.map": ",".join(
                f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}" for name in node.ports
            ),
            "log.dirs": str(node.data_dir),
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "5",
            **(
                {
                    "share.coordinator.state.topic.replication.factor": replicas,
                    "share.coordinator.state.topic.min.isr": min_isr,
                }
                if self.runtime.major >= 4
                else {}  # 3.x has no share groups (it ignores the keys, silently)
            ),
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            # A killed node is fenced (and its partitions get new leaders) after 3 s instead of 9 s.
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            # The cleaner looks for dirty logs every 2 s (Kafka: 15 s), so a compaction test waits about a second
            # per cleaning round; more often costs a session node CPU by the compacted partitions it has collected,
            # since every look visits each (one node with 150 flows' topics idled at 7.3 % of a core with 200 ms,
            # 3.05 % with 2 s: bench/broker_costs.py, docs/testing.md). 8 MiB of dedupe buffer fits the small heap.
            "log.cleaner.backoff.ms": "2000",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "log.initial.task.delay.ms": "1000",
            **self.security.broker_settings(self.listeners),
            **self.broker_config,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

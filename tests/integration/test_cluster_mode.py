"""`mm2py run --once` against a Spark standalone master and worker: mm2py must travel to the executors.

The executors run an interpreter that cannot import the installed (editable) mm2py (see
``spark_cluster.ExecutorPython``), so the copy can only succeed if the driver ships the package to them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.kafka_harness import ClusterFactory, Record, create_topic, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py, write_config
from tests.harness.spark_cluster import ExecutorPython, SparkUnavailable, StandaloneCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(240)]

REPO_PACKAGE = Path(__file__).resolve().parents[2] / "mm2py"
PARTITIONS = 3
RECORDS = 3000


@pytest.fixture
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A running master plus one worker (1 core, 1g) on loopback; both are stopped whatever the outcome."""
    try:
        cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    except SparkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
        yield cluster
    except SparkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        cluster.stop()


def fields(r: Record) -> tuple[object, ...]:
    return (r.key, r.value, tuple(r.headers), r.timestamp, r.partition)


def test_run_once_on_a_standalone_cluster_ships_mm2py_to_executors_and_copies_every_record_once_in_order(
    kafka_cluster: ClusterFactory, spark_cluster: StandaloneCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brokers = kafka_cluster("src", "target")
    create_topic(brokers["src"].bootstrap, "orders", PARTITIONS)
    produce(
        brokers["src"].bootstrap,
        "orders",
        make_records(RECORDS, partitions=PARTITIONS, seed=5, tombstone_every=17, null_key_every=13),
    )
    flows = "src->target.enabled = true\ntopics = orders\n"
    config = write_config(tmp_path / "mm2.properties", brokers, flows)
    executor_python = ExecutorPython.create(tmp_path / "executor-python")
    # The driver hands PYSPARK_PYTHON to every executor as the interpreter for its Python workers.
    monkeypatch.setenv("PYSPARK_PYTHON", str(executor_python.executable))

    result = mm2py(
        "run",
        str(config),
        "--once",
        "--master",
        spark_cluster.master_url,
        # The driver must be reachable by the executors, on loopback only (mm2py leaves these to
        # Spark's defaults for non-local masters: the host's name and every interface).
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        timeout=150,
    )

    assert result.returncode == 0, f"{result.stderr}\n{spark_cluster.diagnostics()}"
    source = read_all(brokers["src"].bootstrap, "orders")
    target = read_all(brokers["target"].bootstrap, "src.orders")
    assert len(source) == RECORDS
    assert len(target) == RECORDS, spark_cluster.diagnostics()
    for p in range(PARTITIONS):
        expected = [fields(r) for r in source if r.partition == p]
        got = [fields(r) for r in target if r.partition == p]
        assert got == expected, f"partition {p}: {len(got)} copied, {len(expected)} expected"

    # The copy ran in this cluster's executor: the master saw the application finish, the worker ran it ...
    apps = spark_cluster.master_state()["completedapps"]
    assert [(a["name"], a["state"]) for a in apps] == [("mm2py src->target", "FINISHED")]
    assert [name.split("/")[0] for name in spark_cluster.executor_logs()] == [apps[0]["id"]]
    # ... and its Python workers could not see the installed mm2py, so they imported the shipped zip.
    report = executor_python.report()
    starts = [line for line in report if " start " in line]
    imports = [line.rsplit(" from ", 1)[1] for line in report if " import mm2py from " in line]
    assert starts, f"no executor Python worker started: {spark_cluster.diagnostics()}"
    assert all(line.endswith("hidden=True") for line in starts), report
    assert imports, report
    assert all(".zip/mm2py/" in o and not o.startswith(str(REPO_PACKAGE)) for o in imports), report

"""What makes a local run start sooner, on a real JVM and real Python workers.

The Spark driver JVM's class-data-sharing archive: the first SparkContext writes it when it stops, the next maps it
(the archive shows in the JVM's memory maps), and a run that sets its own driver options gets neither
(mm2py/engine/class_data.py). The Python workers import pyspark and py4j as installed, not from the zips Spark
puts first on their path (mm2py/engine/python_daemon.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2py.engine.spark import SparkRunner

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("own_spark_context")]


def jvm_maps(runner: SparkRunner) -> str:
    return Path(f"/proc/{runner.sc._gateway.proc.pid}/maps").read_text()


def test_the_first_context_writes_the_archive_and_the_next_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = SparkRunner.start("class-data", "local[1]", "client", {})
    try:
        assert first.sc.parallelize([1, 2, 3]).sum() == 6
    finally:
        first.stop()
    archives = list((tmp_path / "mm2py").glob("spark-driver-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1_000_000, list((tmp_path / "mm2py").iterdir())
    assert not list((tmp_path / "mm2py").glob("*.tmp"))

    second = SparkRunner.start("class-data", "local[1]", "client", {})
    try:
        assert str(archives[0]) in jvm_maps(second)
    finally:
        second.stop()

    own = SparkRunner.start("class-data", "local[1]", "client", {"spark.driver.extraJavaOptions": "-Xss2m"})
    try:
        assert str(archives[0]) not in jvm_maps(own)
    finally:
        own.stop()


def test_a_local_run_s_python_workers_import_pyspark_and_py4j_as_installed_not_from_spark_s_zips() -> None:
    runner = SparkRunner.start("python-daemon", "local[1]", "client", {})
    try:
        loaded = (
            runner.sc.parallelize([0], 1)
            .map(
                lambda _: sorted({str(getattr(m, "__file__", None)) for m in list(__import__("sys").modules.values())})
            )
            .collect()[0]
        )
    finally:
        runner.stop()
    spark_files = [f for f in loaded if "/pyspark/" in f or "/py4j/" in f]
    assert any("/pyspark/" in f for f in spark_files) and any("/py4j/" in f for f in spark_files), loaded
    assert [f for f in spark_files if ".zip" in f] == []

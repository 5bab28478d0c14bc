"""The Spark driver JVM's class-data-sharing archive on a real JVM: the first SparkContext writes it when it stops,
the next maps it (the archive shows in the JVM's memory maps), and a run that sets its own driver options gets
neither (mm2py/engine/class_data.py)."""

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

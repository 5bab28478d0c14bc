"""A local run's Python worker daemon (mm2py/engine/python_daemon.py) imports pyspark and py4j as pip installed
them, compiled, instead of from the zips inside the pyspark package, which Python compiles from source at every
start; a Spark distribution's own zips and every other path entry stay where they were. No JVM here: a path
is a list of strings."""

from __future__ import annotations

from pathlib import Path

from mm2py.engine.python_daemon import installed_pyspark, without_bundled_zips
from mm2py.engine.spark import spark_defaults


def pip_installed_pyspark(site: Path) -> Path:
    package = site / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        (package / "python" / "lib" / name).write_bytes(b"PK")
    return package


def test_only_the_zips_the_installed_pyspark_carries_leave_the_path(tmp_path: Path) -> None:
    package = pip_installed_pyspark(tmp_path / "site-packages")
    lib = package / "python" / "lib"
    own_spark = tmp_path / "spark-4.1" / "python" / "lib" / "pyspark.zip"  # a SPARK_HOME of the user's own
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), "/opt/app", str(own_spark), ""]
    path.append(str(tmp_path / "site-packages"))
    assert installed_pyspark(path) == package
    assert without_bundled_zips(path, package) == ["/opt/app", str(own_spark), "", str(tmp_path / "site-packages")]


def test_without_an_installed_pyspark_outside_a_zip_nothing_is_found(tmp_path: Path) -> None:
    package = pip_installed_pyspark(tmp_path / "site-packages")
    assert installed_pyspark([str(package / "python" / "lib" / "pyspark.zip"), str(tmp_path / "elsewhere")]) is None


def test_local_runs_start_this_daemon_and_cluster_runs_keep_pyspark_s() -> None:
    # A cluster's executors need not have mm2py installed: a run ships it as a zip that only its tasks see.
    assert spark_defaults(True, None, None)["spark.python.daemon.module"] == "mm2py.engine.python_daemon"
    assert "spark.python.daemon.module" not in spark_defaults(False, None, None)

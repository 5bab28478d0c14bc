"""The Spark driver's class-data-sharing archive (mm2py/engine/class_data.py): one per JVM and classpath, in the
user's cache directory, published only when the JVM that wrote it exited cleanly. No JVM here: the archive is a
file, the JVM's exit an exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2py.engine import class_data
from mm2py.engine.class_data import Archive
from mm2py.engine.spark import spark_defaults


def fake_jdk(root: Path, release: str) -> Path:
    java = root / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    (root / "release").write_text(release)
    return root


def test_the_archive_is_named_for_the_jdk_and_lives_in_the_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(fake_jdk(tmp_path / "jdk17", 'JAVA_VERSION="17.0.15"')))
    first = class_data.driver_archive()
    monkeypatch.setenv("JAVA_HOME", str(fake_jdk(tmp_path / "jdk21", 'JAVA_VERSION="21.0.5"')))
    other = class_data.driver_archive()
    assert first is not None and other is not None
    assert first.path.parent == tmp_path / "cache" / "mm2py"
    assert first.path.name.startswith("spark-driver-") and first.path.suffix == ".jsa"
    assert first.path != other.path  # another JVM cannot map this one's archive: it gets its own
    assert not first.exists


def test_a_run_maps_an_existing_archive_and_writes_a_missing_one_under_a_private_name(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "mm2py" / "spark-driver-0123.jsa")
    writing = archive.new_writing_path()
    assert writing is not None and writing.parent == archive.path.parent and writing != archive.path
    assert f"-XX:ArchiveClassesAtExit={writing}" in archive.java_options(writing)
    assert f"-XX:SharedArchiveFile={archive.path}" in archive.java_options(None)
    for options in (archive.java_options(writing), archive.java_options(None)):
        # never a word from CDS, never a JVM that refuses an option it does not know
        assert "-Xlog:cds=off" in options and "-XX:+IgnoreUnrecognizedVMOptions" in options


def test_the_driver_options_carry_the_archive_only_when_there_is_one_to_map_or_write(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "spark-driver-0123.jsa")
    without = spark_defaults(True, archive, None)["spark.driver.extraJavaOptions"]
    assert "SharedArchiveFile" not in without and "-XX:TieredStopAtLevel=1" in without
    archive.path.write_bytes(b"archive")
    mapped = spark_defaults(True, archive, None)["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive.path}" in mapped
    assert "ArchiveClassesAtExit" in spark_defaults(True, archive, tmp_path / "w.tmp")["spark.driver.extraJavaOptions"]


@pytest.mark.parametrize(("exit_code", "published"), [(0, True), (1, False), (None, False)])
def test_an_archive_is_published_only_after_its_jvm_exited_cleanly(
    tmp_path: Path, exit_code: int | None, published: bool
) -> None:
    archive = Archive(tmp_path / "spark-driver-0123.jsa")
    written = archive.new_writing_path()
    assert written is not None
    written.write_bytes(b"classes")
    archive.publish(written, exit_code)  # None: the JVM did not exit in time and was killed
    assert archive.exists is published
    assert not written.exists()  # kept under the final name, or dropped


def test_a_cache_directory_that_cannot_be_written_means_no_archive(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert Archive(blocked / "mm2py" / "spark-driver-0123.jsa").new_writing_path() is None

"""The Spark driver JVM's class-data-sharing archive: written by the first run, mapped by every run after it.

Why: the driver JVM loads the same ten thousand classes of Spark at every start, and a short ``--once`` run (cron)
spends most of its time starting Spark. Java's class-data sharing (JEP 350, dynamic archives, Java 13 and later)
keeps those classes, parsed and verified, in a file the next JVM maps: a local SparkContext then comes up in
about 1.7 s instead of 3.6 s here, and its first job runs sooner too.

The archive is valid only for the exact JVM and classpath that wrote it, so its name carries a digest of both
(the JDK's ``release`` file and path, and the pyspark jars), and it lives in the user's cache directory
(``$XDG_CACHE_HOME/mm2py``, else ``~/.cache/mm2py``; about 70 MB). A run without an archive has its JVM write one
when it exits (``-XX:ArchiveClassesAtExit``: the first run's stop takes about 5 s longer, once) to a name of its
own, which the run moves into place only once that JVM has exited cleanly, so no run ever maps half an archive.
A JVM that cannot use an archive (another version, a damaged file) starts without it and says nothing
(``-Xshare:auto``, CDS logging off); options a JVM does not know are ignored. A cache directory that cannot be
written means no archive, nothing else.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_QUIET = "-XX:+IgnoreUnrecognizedVMOptions -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class Archive:
    """Where this JVM and classpath's archive is, and where a run that writes it puts it first."""

    path: Path

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def java_options(self, writing: Path | None) -> str:
        """The options that map the archive, or write it to ``writing``."""
        if writing is not None:
            return f"{_QUIET} -XX:ArchiveClassesAtExit={writing}"
        return f"{_QUIET} -XX:SharedArchiveFile={self.path}"

    def new_writing_path(self) -> Path | None:
        """A private name to write the archive to, or None where the cache directory cannot be written."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.info("no class-data-sharing archive for the Spark driver: %s", exc)
            return None
        if not os.access(self.path.parent, os.W_OK):
            return None
        return self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex[:8]}.tmp")

    def publish(self, written: Path, jvm_exit_code: int | None) -> None:
        """Put the archive a JVM wrote at exit into place, if that JVM exited cleanly; drop it otherwise."""
        try:
            if jvm_exit_code == 0 and written.is_file() and written.stat().st_size > 0:
                os.replace(written, self.path)  # atomic: a run starting now sees all of it or nothing
                log.info("spark driver class-data-sharing archive written: %s", self.path)
            else:
                written.unlink(missing_ok=True)
        except OSError as exc:
            log.info("class-data-sharing archive %s not kept: %s", written, exc)


def driver_archive() -> Archive | None:
    """This JVM and pyspark's archive, or None where either cannot be found (then Spark starts without one)."""
    java = _java()
    spec = importlib.util.find_spec("pyspark")
    if java is None or spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    java_home = java.parents[1]
    release = java_home / "release"
    digest = hashlib.sha256(str(java_home).encode())
    digest.update(release.read_bytes() if release.is_file() else b"")
    digest.update("\n".join(sorted(p.name for p in jars.glob("*.jar"))).encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mm2py"
    return Archive(cache / f"spark-driver-{digest.hexdigest()[:16]}.jsa")


def _java() -> Path | None:
    """The java binary Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None

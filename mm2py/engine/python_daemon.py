"""The Python worker daemon of a local run: pyspark's own daemon, with pyspark and py4j imported from the installed
packages instead of from the zip files inside them (``spark.python.daemon.module`` names this module).

Why: Spark puts ``pyspark/python/lib/pyspark.zip`` and the py4j zip first on every Python worker's path, and
Python keeps no compiled code for what it imports from a zip, so each daemon compiled pyspark's modules from
source when it started, on the way to the run's first task: a local ``mm2py run --once`` of a hundred records took
1.2 s longer and 0.6 CPU-s more here (``bench/short_runs.py``), at every run of a cron job. pip installed the same
files, already compiled, beside those zips.

Only the zips that belong to the pyspark package found on the path are dropped, so a Spark distribution of the
user's own (``SPARK_HOME``) keeps its zips. Used for local masters only: a cluster's executors need not have
mm2py installed (a run ships it to them as a zip, which only tasks see), so they keep pyspark's daemon.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def installed_pyspark(path: list[str]) -> Path | None:
    """The directory of the pyspark package on ``path`` outside any zip, or None."""
    for entry in path:
        if entry.endswith(".zip"):
            continue
        package = Path(entry or ".") / "pyspark"
        if (package / "__init__.py").is_file():
            return package
    return None


def without_bundled_zips(path: list[str], pyspark: Path) -> list[str]:
    """``path`` without the zips that ``pyspark`` carries in its ``python/lib`` (pyspark's and py4j's)."""
    bundled = (pyspark / "python" / "lib").resolve()
    return [entry for entry in path if not (entry.endswith(".zip") and Path(entry).resolve().parent == bundled)]


def main() -> None:
    pyspark = installed_pyspark(sys.path)
    if pyspark is not None:
        sys.path[:] = without_bundled_zips(sys.path, pyspark)
    # As ``python -m pyspark.daemon``: its arguments (the worker module) are already in sys.argv.
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

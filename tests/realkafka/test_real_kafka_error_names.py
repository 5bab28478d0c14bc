"""mm2py's one error vocabulary (``mm2py.kafka_errors``) is Kafka's: its table of names by code is compared with
``org.apache.kafka.common.protocol.Errors`` of the Kafka client jar the real-Kafka tests run against (the pinned
version), so a renamed or added code shows up here, not in an operator's log."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mm2py.kafka_errors import KAFKA_ERROR_NAMES
from tests.harness.real_kafka import KafkaJarsMissing, KafkaRuntime

pytestmark = pytest.mark.realkafka

PRINT_ERRORS = """
import org.apache.kafka.common.protocol.Errors;
public class PrintErrors {
    public static void main(String[] args) {
        for (Errors e : Errors.values()) System.out.println(e.code() + " " + e.name());
    }
}
"""


def test_the_name_table_is_the_errors_of_the_pinned_kafka_client(tmp_path: Path) -> None:
    try:
        runtime = KafkaRuntime.locate()
    except KafkaJarsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    source = tmp_path / "PrintErrors.java"
    source.write_text(PRINT_ERRORS)
    classpath = ":".join(str(j) for j in runtime.classpath)  # the clients jar and what it loads (slf4j)
    printed = subprocess.run(
        [str(runtime.java), "-cp", classpath, str(source)], capture_output=True, text=True, timeout=120
    )
    assert printed.returncode == 0, printed.stderr[-2000:]
    kafka = {int(code): name for code, name in (line.split() for line in printed.stdout.splitlines())}
    assert len(kafka) > 100, printed.stdout
    assert kafka == KAFKA_ERROR_NAMES

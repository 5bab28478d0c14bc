"""A test that leaves a shared real-Kafka cluster damaged fails at its teardown, naming itself and the damage, and
the tests after it still find the cluster whole (tests/harness/shared_clusters.py, tests/conftest.py).

An inner pytest session with the suite's own conftest runs three tests on its own ``real_kafka``: one freezes the
node and leaves it so, one changes a dynamic setting of the broker and leaves it so, one after them uses the node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.realkafka

TESTS_DIR = Path(__file__).resolve().parents[1]


def test_a_test_that_leaves_a_node_frozen_or_a_setting_changed_fails_at_teardown_by_name(tmp_path: Path) -> None:
    shutil.copy(TESTS_DIR / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent("""
        import signal

        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        from tests.harness.kafka_harness import client_config
        from tests.harness.polling import poll_until


        def test_leaves_the_node_frozen(real_kafka):
            real_kafka.node(1).send_signal(signal.SIGSTOP)


        def test_leaves_a_setting_changed(real_kafka):
            admin = AdminClient(client_config(real_kafka.bootstrap))
            entry = ConfigEntry("log.cleaner.backoff.ms", "1234", incremental_operation=AlterConfigOpType.SET)
            resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[entry])
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)
            # The broker applies the change from the metadata log a moment after answering.
            poll_until(lambda: backoff(admin) == "1234", 30, "the new setting in effect")


        def backoff(admin):
            described = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
            return next(iter(described.values())).result(timeout=30)["log.cleaner.backoff.ms"].value


        def test_after_them_the_node_answers(real_kafka, unique_topic):
            real_kafka.create_topic(unique_topic())
    """)
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "3 passed, 2 errors" in out, out  # each test passed; two failed their teardown
    assert "test_inner.py::test_leaves_the_node_frozen left a shared cluster damaged: real_kafka: node 1 stopped" in out
    assert (
        "test_inner.py::test_leaves_a_setting_changed left a shared cluster damaged: real_kafka: dynamic "
        "broker 1 settings {} became {'log.cleaner.backoff.ms': '1234'}"
    ) in out, out

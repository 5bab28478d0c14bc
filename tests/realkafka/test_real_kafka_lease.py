"""The flow lease against a real group coordinator, which enforces limits tansu does not."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import REAL_SMALL_CLUSTER, unique_alias, write_real_config

pytestmark = pytest.mark.realkafka


def test_a_lease_session_timeout_the_broker_refuses_fails_at_once_naming_the_key(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    topic = real_kafka.create_topic(unique_topic("lease"), partitions=1)
    src, tgt = unique_alias("src"), unique_alias("tgt")
    # Kafka's group.min.session.timeout.ms is 6000 by default; every JoinGroup with 3000 is refused.
    settings = REAL_SMALL_CLUSTER.replace(
        "mm2py.lease.session.timeout.ms = 6000", "mm2py.lease.session.timeout.ms = 3000"
    )
    assert settings != REAL_SMALL_CLUSTER
    clusters = {src: real_kafka.bootstrap, tgt: real_kafka_target.bootstrap}
    body = f"{src}->{tgt}.enabled = true\ntopics = {topic}\n"
    config = write_real_config(tmp_path / "mm2.properties", clusters, body, cluster_settings=settings)
    started = time.monotonic()
    result = mm2py("run", str(config), "--once", timeout=120)
    seconds = time.monotonic() - started
    record_property("seconds", round(seconds, 1))
    assert result.returncode == 3, result.stderr
    assert "Invalid session timeout" in result.stderr and "mm2py.lease.session.timeout.ms = 3000" in result.stderr, (
        result.stderr
    )
    assert seconds < 25, f"took {seconds:.0f} s: the refusal was not reported before the join deadline (30 s)"

"""`/health` and `/ready` on real Kafka: the target's only node stalls (SIGSTOP, a machine that stops answering)
and comes back (SIGCONT), as a Kubernetes probe sees it (KIP-1017's endpoint, on mm2py's metrics port)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.faults import MirrorRun
from tests.harness.http_probe import probe
from tests.harness.kafka_harness import free_port, make_records, produce
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import one_flow_config

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]


def test_health_turns_503_within_30_s_of_a_real_target_stalling_and_200_once_it_is_back(
    real_kafka: KafkaCluster,
    kafka_runtime: KafkaRuntime,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    # A target of its own: the session's shared target must not stall under the other tests.
    with KafkaCluster(tmp_path / "target", 1, runtime=kafka_runtime) as target:
        topic = real_kafka.create_topic(unique_topic("health"), partitions=2)
        produce(real_kafka.bootstrap, topic, make_records(500, partitions=2, seed=1))
        config, src, tgt = one_flow_config(
            tmp_path / "mm2.properties",
            real_kafka.bootstrap,
            target.bootstrap,
            topic,
            "consumer.poll.timeout.ms = 200\n",
        )
        flow = f"{src}->{tgt}"
        port = free_port()
        with MirrorRun(config, tmp_path / "run.log", "--metrics-port", str(port)) as run:
            run.wait_for(lambda: probe(port, "/health")[0] == 200, 120, "/health to answer 200")
            status, body = probe(port, "/ready")
            assert status == 200 and f"flow {flow}: copying" in body, body

            target.node(1).send_signal(signal.SIGSTOP)
            stalled = time.monotonic()
            try:
                run.wait_for(lambda: probe(port, "/health")[0] == 503, 30, "/health to answer 503")
                took = time.monotonic() - stalled
                status, body = probe(port, "/health")
                lines = body.splitlines()
                assert status == 503 and lines[0] == "unavailable" and lines[1].startswith(f"flow {flow}: "), body
                record_property("seconds_to_503", round(took, 1))
                record_property("health_503", body)
            finally:
                target.node(1).send_signal(signal.SIGCONT)
            resumed = time.monotonic()
            run.wait_for(lambda: probe(port, "/health")[0] == 200, 90, "/health to answer 200 again")
            record_property("seconds_to_200_again", round(time.monotonic() - resumed, 1))
            assert run.stop() == 0, run.log_text()
    assert took <= 30

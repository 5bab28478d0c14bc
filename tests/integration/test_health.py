"""`mm2py run --metrics-port`: /health and /ready as probes see them while the target stalls and comes back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.faults import MirrorRun
from tests.harness.flows_helpers import config_for
from tests.harness.http_probe import probe
from tests.harness.kafka_harness import TansuBroker, free_port, make_records, produce

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 2


def test_health_turns_503_within_30_s_of_the_target_stalling_and_200_once_it_is_back(
    pair: dict[str, TansuBroker], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    produce(pair["dc1"].bootstrap, "orders", make_records(500, partitions=PARTITIONS, seed=1))
    port = free_port()
    config = config_for(tmp_path, pair, "consumer.poll.timeout.ms = 200\n")
    with MirrorRun(config, tmp_path / "run.log", "--metrics-port", str(port)) as run:
        run.wait_for(lambda: probe(port, "/health")[0] == 200, 120, "/health to answer 200")
        status, body = probe(port, "/ready")
        assert status == 200 and "flow dc1->target: copying" in body, body

        pair["target"].freeze()  # the target answers nothing, as a stalled or partitioned machine
        stalled = time.monotonic()
        try:
            run.wait_for(lambda: probe(port, "/health")[0] == 503, 30, "/health to answer 503")
            took = time.monotonic() - stalled
            status, body = probe(port, "/health")
            lines = body.splitlines()
            assert status == 503 and lines[0] == "unavailable" and lines[1].startswith("flow dc1->target: "), body
            assert "no heartbeat reached target" in body or "retrying" in body, body
            record_property("seconds_to_503", round(took, 1))
            record_property("health_503", body)
        finally:
            pair["target"].thaw()
        thawed = time.monotonic()
        run.wait_for(lambda: probe(port, "/health")[0] == 200, 90, "/health to answer 200 again")
        record_property("seconds_to_200_again", round(time.monotonic() - thawed, 1))
        assert run.stop() == 0, run.log_text()
    assert took <= 30

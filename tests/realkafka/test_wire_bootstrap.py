"""The batch path's client connecting to a real three-node cluster right after one node was SIGKILLed: the brokers
still list the dead node until its session times out, so the first Metadata request may go to it; the client asks
another broker after the retry backoff, as Java's NetworkClient does, instead of giving up. A batch copy task
opens its offset syncs' connection to the source at its first sync write, which can be that moment (a source
leader SIGKILLed mid-copy once failed the task this way, and Spark copied its partitions again)."""

from __future__ import annotations

import time

import pytest

from mm2py.wire.connection import KafkaConnection
from tests.harness.real_kafka import KafkaCluster
from tests.harness.translation_helpers import client_settings

pytestmark = [pytest.mark.realkafka]

CONNECTIONS = 12


def test_a_client_bootstrapping_while_a_listed_node_is_dead_connects_through_another(
    real_kafka_cluster: KafkaCluster,
) -> None:
    cluster = real_kafka_cluster
    victim = 2
    cluster.kill_node(victim)
    failures: list[str] = []
    try:
        killed = time.monotonic()
        for _ in range(CONNECTIONS):  # all within the dead node's session, while Metadata still lists it
            connection = KafkaConnection("src", client_settings({"bootstrap.servers": cluster.bootstrap}))
            try:
                connection.bootstrap(30)
                assert connection.brokers(), "bootstrapped without learning a broker"
            except Exception as exc:  # counted, so every attempt is made before the assertion
                failures.append(f"{type(exc).__name__}: {exc}")
            finally:
                connection.close()
        within_s = time.monotonic() - killed
    finally:
        cluster.restart_node(victim)
    assert not failures, (
        f"{len(failures)} of {CONNECTIONS} connections failed {within_s:.1f} s after the kill: {failures}"
    )

"""Fixtures of the real-Kafka tests that run mm2py: a second one-node cluster, so a flow can go from one real
cluster to another (offset syncs compacted on a real source, transactions filtered by a real target).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.shared_clusters import SHARED


@pytest.fixture(scope="session")
def real_kafka_target(kafka_runtime: KafkaRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A second one-node real Kafka (PLAINTEXT only), started only if a test asks for it.

    Tests use unique cluster aliases, so the internal topics named after them do not collide; ``heartbeats``
    and ``mm2py-leases.internal`` are shared, as on any target that several flows write to.
    """
    with KafkaCluster(tmp_path_factory.mktemp("real-kafka-target"), 1, runtime=kafka_runtime) as cluster:
        yield SHARED.lend("real_kafka_target", cluster)

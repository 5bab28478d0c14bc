"""Fixtures shared by the integration tests (the broker fixtures themselves are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.harness.kafka_harness import ClusterFactory, TansuBroker, create_topic


@pytest.fixture
def pair(request: pytest.FixtureRequest, kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    """Brokers ``dc1`` and ``target``, and ``orders`` on dc1 with the test module's ``PARTITIONS`` partitions.

    The topic is created up front with its final partition count: the test broker cannot add partitions.
    """
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", request.module.PARTITIONS)
    return brokers

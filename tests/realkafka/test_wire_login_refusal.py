"""The batch path's connection names the broker's reason when a real Kafka broker refuses its SASL login, and
gives up at the first refusal as Java's clients do (kafka-python alone retries it until its deadline)."""

from __future__ import annotations

import time

import pytest

from mm2py.errors import ReplicationError
from mm2py.wire.connection import KafkaConnection
from tests.harness.real_kafka import KafkaCluster
from tests.harness.translation_helpers import client_settings

pytestmark = pytest.mark.realkafka
WRONG = "not-the-password-7c1e"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_ends_the_bootstrap_with_the_brokers_reason(real_kafka: KafkaCluster, mechanism: str) -> None:
    settings = real_kafka.client_config("SASL_PLAINTEXT", user="alice", mechanism=mechanism, **{"sasl.password": WRONG})
    connection = KafkaConnection("src", client_settings({key: str(value) for key, value in settings.items()}))
    started = time.monotonic()
    try:
        with pytest.raises(ReplicationError) as refused:
            connection.bootstrap(timeout_s=30)
    finally:
        connection.close()
    message = str(refused.value)
    assert message.startswith(f"src refused the {mechanism} login"), message
    assert "Authentication failed" in message and "\n" not in message and WRONG not in message, message
    assert time.monotonic() - started < 15  # at the first refusal (slices of 1, 2, 4 s...), not at the 30-s deadline

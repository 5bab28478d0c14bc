"""The single real-Kafka node's client listeners: SASL (PLAIN, SCRAM-SHA-512) and TLS authenticate for real."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster

pytestmark = pytest.mark.realkafka

SECURED = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


@pytest.mark.parametrize(("listener", "mechanism"), SECURED)
def test_records_round_trip_over_each_secured_listener(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str], listener: str, mechanism: str
) -> None:
    topic = real_kafka.create_topic(unique_topic(listener.lower()), partitions=1)
    config = real_kafka.client_config(listener, user="alice", mechanism=mechanism)
    sent = [(f"k{i}".encode(), f"{listener} {mechanism} {i}".encode()) for i in range(50)]

    producer = Producer({**config, "acks": "all"})
    for key, value in sent:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": unique_topic("group"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[tuple[bytes | None, bytes | None]] = []
    try:

        def all_read() -> bool:
            read.extend((m.key(), m.value()) for m in consumer.consume(100, timeout=0.5) if m.error() is None)
            return len(read) >= len(sent)

        poll_until(all_read, 30, f"{len(sent)} records back over {listener}", interval=0)
    finally:
        consumer.close()

    assert read == sent
    assert {b.port for b in AdminClient(config).list_topics(timeout=10).brokers.values()} == {
        real_kafka.node(1).ports[listener]
    }  # metadata advertises the listener the client came in on


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(real_kafka: KafkaCluster, listener: str, mechanism: str) -> None:
    errors: list[KafkaError] = []
    config = real_kafka.client_config(
        listener, user="alice", mechanism=mechanism, **{"sasl.password": "not-the-password", "error_cb": errors.append}
    )

    admin = AdminClient(config)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1)

    def refused() -> bool:
        admin.poll(0.1)  # error_cb runs only while the client is polled
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    poll_until(refused, 10, f"an authentication error from {listener} {mechanism}; got {errors}", interval=0)

"""One error vocabulary on both copy paths: a Kafka error is named as Kafka names it (``mm2py.kafka_errors``),
whether librdkafka (the record path, the driver's admin calls) or kafka-python (the batch path) met it."""

from __future__ import annotations

import kafka.errors as kafka_python_errors
import pytest
from confluent_kafka import KafkaError

from mm2py.errors import error_name
from mm2py.kafka_errors import KAFKA_ERROR_NAMES, kafka_error_name
from mm2py.wire.errors import WireError, broker_error


@pytest.mark.parametrize(
    ("librdkafka_code", "kafka_name"),
    [
        (KafkaError.MSG_SIZE_TOO_LARGE, "MESSAGE_TOO_LARGE"),
        (KafkaError.NOT_LEADER_FOR_PARTITION, "NOT_LEADER_OR_FOLLOWER"),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PARTITION"),
        (KafkaError.TOPIC_EXCEPTION, "INVALID_TOPIC_EXCEPTION"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED"),
        # librdkafka's own errors: Kafka's name for the same condition, else librdkafka's.
        (KafkaError._MSG_TIMED_OUT, "REQUEST_TIMED_OUT"),
        (KafkaError._TRANSPORT, "NETWORK_EXCEPTION"),
        (KafkaError._AUTHENTICATION, "SASL_AUTHENTICATION_FAILED"),
        (KafkaError._UNKNOWN_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"),
        (KafkaError._SSL, "_SSL"),
        (KafkaError._PURGE_QUEUE, "_PURGE_QUEUE"),
    ],
)
def test_librdkafka_errors_are_named_as_kafka_names_them(librdkafka_code: int, kafka_name: str) -> None:
    assert error_name(KafkaError(librdkafka_code)) == kafka_name


def test_the_same_broker_error_has_the_same_name_on_both_paths() -> None:
    """Every protocol code both clients know: librdkafka's name and kafka-python's differ for some (MSG_SIZE_TOO_LARGE,
    MESSAGE_SIZE_TOO_LARGE), mm2py's are one."""
    both = 0
    for code in KAFKA_ERROR_NAMES:
        if code <= 0 or kafka_python_errors.kafka_errors.get(code) is None:
            continue
        wire = broker_error(code)
        assert wire is not None
        assert wire.name == error_name(KafkaError(code)) == KAFKA_ERROR_NAMES[code], code
        both += 1
    assert both > 80


def test_a_code_newer_than_the_table_is_named_by_its_number() -> None:
    assert kafka_error_name(9999) == "UNKNOWN_ERROR_CODE_9999"
    assert WireError(kafka_python_errors.MessageSizeTooLargeError).name == "MESSAGE_TOO_LARGE"

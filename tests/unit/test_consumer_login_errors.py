"""The record path's consumer error callback keeps a refused login for the copy task (which then stops the run)
and lets a login that was cut short pass (a connection that dropped in the middle of it, a re-authentication
that met the broker in another SASL state): librdkafka reports both as _AUTHENTICATION,
and only the first is an answer that waiting cannot change (the second was seen when a broker ended a session
whose OAUTHBEARER token had expired, tests/realkafka/test_real_kafka_oidc.py)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from mm2py.librdkafka.clients import _key, _LoginErrors, login_error

SETTINGS = {"bootstrap.servers": "127.0.0.1:1", "group.id": "login-errors-test"}
DROPPED = (
    "GroupCoordinator: SASL OAUTHBEARER mechanism handshake failed: Local: Broker transport failure: "
    "broker's supported mechanisms: (n/a) (after 0ms in state DOWN)"
)
REAUTHENTICATION = (
    "sasl_plaintext://127.0.0.1:47785/1: SASL OAUTHBEARER mechanism handshake failed: Broker: Request not valid in "
    "current SASL state: broker's supported mechanisms:  (after 0ms in state AUTH_HANDSHAKE)"
)
REFUSED = 'Failed to acquire SASL OAUTHBEARER token: {"error": "invalid_client"}'


def test_a_refused_login_is_kept_for_the_copy_task_and_a_dropped_handshake_is_not() -> None:
    callback = _LoginErrors(_key(SETTINGS))  # what new_consumer() hands librdkafka as its error_cb

    callback(KafkaError(KafkaError._AUTHENTICATION, DROPPED))
    assert login_error(SETTINGS) is None
    callback(KafkaError(KafkaError._AUTHENTICATION, REAUTHENTICATION))
    assert login_error(SETTINGS) is None

    callback(KafkaError(KafkaError._AUTHENTICATION, REFUSED))
    refused = login_error(SETTINGS)
    assert refused is not None and refused.str() == REFUSED
    assert login_error(SETTINGS) is None  # taken: the next task starts with a clean slate

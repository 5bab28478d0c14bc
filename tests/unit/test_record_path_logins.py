"""The record path's copy loop and a consumer whose login failed: a request seen failing on such a connection
("FindCoordinator response error: Local: Authentication failure", delivered by consume()) stops the range only if
the consumer's error_cb saw the login refused; a login cut short (a re-authentication that met the broker in
another SASL state, seen with 5-s OIDC tokens in tests/realkafka/test_real_kafka_oidc.py) lets the copy go on,
and events that move nothing never keep a silent source from counting as stalled. No broker."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError

from mm2py.errors import ReplicationError
from mm2py.executor import record_copy
from mm2py.executor.contract import PartitionRange
from mm2py.executor.record_copy import RangeCopy, _pump
from mm2py.librdkafka.clients import _key, _LoginErrors
from tests.unit.test_consumer_login_errors import REAUTHENTICATION, REFUSED
from tests.unit.test_errors import SPEC

SETTINGS = {"bootstrap.servers": "127.0.0.1:1", "group.id": "record-path-logins"}
COORDINATOR = "FindCoordinator response error: Local: Authentication failure"
RANGE = PartitionRange("orders", 0, "src.orders", 0, 3)


class _Event:
    def __init__(self, offset: int, error: KafkaError | None = None) -> None:
        self._offset, self._error = offset, error

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def headers(self) -> None:
        return None

    def value(self) -> bytes:
        return b"v%d" % self._offset

    def key(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000 + self._offset)


class _Consumer:
    """Hands out ``rounds`` one consume() call at a time, calling the error callback first where a round says so
    (librdkafka serves error_cb from within consume())."""

    def __init__(self, rounds: Iterator[tuple[str | None, list[_Event]]]) -> None:
        self.rounds, self.callback = rounds, _LoginErrors(_key(SETTINGS))

    def consume(self, num_messages: int, timeout: float) -> list[_Event]:
        login, events = next(self.rounds, (None, []))
        if login is not None:
            self.callback(KafkaError(KafkaError._AUTHENTICATION, login))
        return events


class _Producer:
    def __init__(self) -> None:
        self.produced: list[bytes] = []

    def produce(self, topic: str, value: bytes, key: Any, partition: int, **kwargs: Any) -> None:
        self.produced.append(value)

    def poll(self, timeout: float) -> int:
        return 0


def _auth_event() -> _Event:
    return _Event(-1001, KafkaError(KafkaError._AUTHENTICATION, COORDINATOR))


def _spec(stall_timeout_s: float = 60.0) -> Any:
    return dataclasses.replace(SPEC, consumer_settings=SETTINGS, stall_timeout_s=stall_timeout_s)


def test_a_login_cut_short_mid_copy_lets_the_range_finish() -> None:
    rounds = iter([(None, [_Event(0)]), (REAUTHENTICATION, [_auth_event()]), (None, [_Event(1), _Event(2)])])
    producer, copying = _Producer(), RangeCopy(position=0)

    _pump(_spec(), RANGE, _Consumer(rounds), producer, copying, "where")

    assert producer.produced == [b"v0", b"v1", b"v2"] and copying.position == 3 and not copying.login_refused


def test_a_refused_login_seen_through_a_failed_request_stops_the_range_naming_the_refusal() -> None:
    rounds = iter([(None, [_Event(0)]), (REFUSED, [_auth_event()]), (None, [_Event(1)])])
    copying = RangeCopy(position=0)

    with pytest.raises(ReplicationError, match="invalid_client") as refused:
        _pump(_spec(), RANGE, _Consumer(rounds), _Producer(), copying, "where")

    assert refused.value.code == "SASL_AUTHENTICATION_FAILED" and copying.login_refused and copying.position == 1


def test_events_that_move_nothing_do_not_hide_a_stalled_source(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(float(second) for second in range(1_000))
    monkeypatch.setattr(record_copy.time, "monotonic", lambda: next(clock))
    rounds = iter([(REAUTHENTICATION, [_auth_event()])] * 100)

    with pytest.raises(ReplicationError, match="no records from the source for 5 s at offset 0"):
        _pump(_spec(stall_timeout_s=5), RANGE, _Consumer(rounds), _Producer(), RangeCopy(position=0), "where")

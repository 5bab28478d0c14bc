"""The record path after a failed delivery: the producer is voided at the first failure and replaced, and the
error names the records that failed, not the ones withdrawn behind them. No broker (the real-Kafka proof is
tests/realkafka/test_record_path_delivery.py)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from mm2py.errors import ReplicationError
from mm2py.executor.delivery import raise_delivery_failure
from mm2py.executor.record_copy import RangeCopy
from mm2py.librdkafka import clients
from tests.unit.test_errors import SPEC


class _Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


class FakeProducer:
    """Records purges; ``flush(0)`` reports the records a purge withdrew, as librdkafka does on the next poll."""

    def __init__(self, queued: int = 0, on_delivery: Any = None) -> None:
        self.purges: list[tuple[bool, bool, bool]] = []
        self.queued, self.on_delivery = queued, on_delivery

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.purges.append((in_queue, in_flight, blocking))

    def flush(self, timeout: float = -1) -> int:
        if self.purges and self.on_delivery is not None:
            for _ in range(self.queued):
                self.on_delivery(KafkaError(KafkaError._PURGE_QUEUE), None)
            self.queued = 0
        return 0


def test_the_first_failed_record_voids_the_producer_once_and_acknowledged_records_are_kept() -> None:
    producer = FakeProducer()
    copying = RangeCopy(producer=producer)
    copying.on_delivery(None, _Message(7))
    assert producer.purges == []
    copying.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    # not blocking: this runs inside the producer's own poll
    assert producer.purges == [(True, True, False)]
    copying.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    copying.on_delivery(KafkaError(KafkaError._PURGE_QUEUE), None)
    assert producer.purges == [(True, True, False)]
    assert copying.downstream == [7] and len(copying.failures) == 3


@pytest.mark.parametrize("code", [KafkaError._MSG_TIMED_OUT, KafkaError.NOT_ENOUGH_REPLICAS])
def test_a_failed_delivery_replaces_the_producer_and_names_the_failed_records_only(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Whatever the error, the producer is dropped from the cache and purged before the error leaves; the
    records it withdrew are counted apart."""
    settings = {"bootstrap.servers": "target:9092"}
    failures: list[KafkaError] = [KafkaError(code), KafkaError(code)]
    producer = FakeProducer(queued=3, on_delivery=lambda err, _m: failures.append(err))
    monkeypatch.setattr(clients, "_producers", {clients._key(settings): producer})
    with pytest.raises(ReplicationError) as raised:
        raise_delivery_failure(SPEC, settings, failures, "flow=dc1->target topic=orders partition=0")
    assert clients._producers == {}
    assert producer.purges == [(True, True, True)]
    message = str(raised.value)
    assert "failed for 2 record(s)" in message and "(3 queued behind them withdrawn)" in message, message
    assert raised.value.retriable

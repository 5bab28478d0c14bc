"""Heartbeats (driver side): MM2's liveness records in the target's ``heartbeats`` topic (§4.10).

Heartbeat(source, target, now) says "flow source->target was alive at now"; replicated onward, the
``A.heartbeats`` topics are how MirrorClient discovers upstream clusters and replication hops.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError

from mm2py.errors import KafkaOperationError
from mm2py.kafka.clients import new_producer
from mm2py.records import Heartbeat


class HeartbeatWriter:
    """Writes heartbeats of one flow to partition 0 of the target's heartbeats topic."""

    def __init__(self, source: str, target: str, topic: str, producer_settings: Mapping[str, str]) -> None:
        self.source = source
        self.target = target
        self.topic = topic
        self._producer = new_producer(producer_settings)

    def emit(self, now_ms: int | None = None, timeout_s: float = 30.0) -> Heartbeat:
        heartbeat = Heartbeat(self.source, self.target, int(time.time() * 1000) if now_ms is None else now_ms)
        failures: list[KafkaError] = []
        self._producer.produce(self.topic, heartbeat.record_value(), heartbeat.record_key(), 0,
                               timestamp=heartbeat.timestamp,
                               on_delivery=lambda err, _msg: failures.append(err) if err else None)
        if self._producer.flush(timeout_s) > 0 or failures:
            cause = failures[0].str() if failures else f"not acknowledged within {timeout_s:.0f} s"
            raise KafkaOperationError(self.target, f"writing a heartbeat to {self.topic}", cause)
        return heartbeat

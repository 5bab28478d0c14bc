"""Heartbeats (driver side): MM2's liveness records in each target's ``heartbeats`` topic.

Heartbeat(source, target, now) says "herder source->target was alive at now". MM2 runs a heartbeat task for
every ordered cluster pair it has a herder for, not only for enabled flows: for a one-way A->B set-up the
reverse herder B->A writes Heartbeat(B, A) into A's ``heartbeats``, which A->B then replicates to B as
``A.heartbeats``. Those replicas are how ``MirrorClient`` discovers upstream clusters and replication hops,
so mm2py emits for the same pairs, on its own timer, whatever the copy jobs are doing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError

from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow, MirrorMakerConfig
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.clients import new_producer
from mm2py.mirror.policy import load_replication_policy
from mm2py.mirror.record_formats import Heartbeat

log = logging.getLogger(__name__)


class HeartbeatWriter:
    """Writes heartbeats of one pair to partition 0 of its target's heartbeats topic."""

    def __init__(self, source: str, target: str, topic: str, producer_settings: Mapping[str, str]) -> None:
        self.source = source
        self.target = target
        self.topic = topic
        self._producer = new_producer(producer_settings)

    def emit(self, now_ms: int | None = None, timeout_s: float = 30.0) -> Heartbeat:
        heartbeat = Heartbeat(self.source, self.target, int(time.time() * 1000) if now_ms is None else now_ms)
        failures: list[KafkaError] = []
        self._producer.produce(
            self.topic,
            heartbeat.record_value(),
            heartbeat.record_key(),
            0,
            timestamp=heartbeat.timestamp,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
        if self._producer.flush(timeout_s) > 0 or failures:
            cause = failures[0].str() if failures else f"not acknowledged within {timeout_s:.0f} s"
            raise KafkaOperationError(self.target, f"writing a heartbeat to {self.topic}", cause)
        return heartbeat

    def close(self, timeout_s: float = 5.0) -> None:
        self._producer.flush(timeout_s)


def heartbeat_flows(
    mm: MirrorMakerConfig, flows: Sequence[FlowConfig], targets: Iterable[str] | None = None
) -> list[FlowConfig]:
    """The herder pairs whose heartbeats this run emits: MM2's ``cluster_pairs`` with heartbeats on, between
    the clusters the run's flows connect (both directions), and only into ``targets`` when given (``--clusters``).
    """
    involved = {f.source for f in flows} | {f.target for f in flows}
    wanted = set(targets) if targets is not None else None
    by_name = {f.name: f for f in flows}
    pairs: list[FlowConfig] = []
    for pair in mm.cluster_pairs():
        if pair.source not in involved or pair.target not in involved:
            continue
        if wanted is not None and pair.target not in wanted:
            continue
        config = by_name.get(str(pair)) or build_flow_config(mm, Flow(pair.source, pair.target))
        if config.emit_heartbeats_enabled:
            pairs.append(config)
    return pairs


@dataclass
class _Beat:
    writer: HeartbeatWriter
    interval_s: float
    due: float = 0.0
    failing: bool = False


class HeartbeatEmitter:
    """One daemon thread that emits every pair's heartbeat on its interval, independent of copy jobs.

    A failed heartbeat is logged (once per outage) and tried again at the next interval, as MM2's task does;
    it never stops replication.
    """

    def __init__(
        self,
        pairs: Sequence[FlowConfig],
        on_emit: Callable[[str, str], None] | None = None,
        once_only: set[tuple[str, str]] | None = None,
    ) -> None:
        self._on_emit = on_emit
        self._once_only = once_only or set()  # (source, target) pairs written once, when the emitter starts
        self._beats = [
            _Beat(
                HeartbeatWriter(
                    f.source,
                    f.target,
                    load_replication_policy(f.replication_policy_class, f.plugin_config()).heartbeats_topic(),
                    _producer_settings(f),
                ),
                float(f.emit_heartbeats_interval_seconds),
            )
            for f in pairs
        ]
        self._stop = threading.Event()
        self._started = False
        self._thread = threading.Thread(target=self._loop, name="heartbeats", daemon=True)
        self.emitted = 0

    @property
    def started(self) -> bool:
        return self._started

    @property
    def pairs(self) -> list[str]:
        return [f"{b.writer.source}->{b.writer.target}" for b in self._beats]

    def start(self) -> None:
        """Write the once-only pairs' heartbeats now (before returning), then the others on their timer."""
        self._started = True
        for beat in self._beats:
            if self._is_once_only(beat):
                self._emit(beat)
        if any(not self._is_once_only(b) for b in self._beats):
            self._thread.start()
        else:
            self._stop.set()  # nothing left for a timer

    def stop(self) -> None:
        """Stop the timer and write one last heartbeat per timed pair, so a finished ``--once`` leaves a fresh
        one in its targets."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for beat in self._beats:
            if not self._is_once_only(beat):
                self._emit(beat)
            beat.writer.close()

    def _is_once_only(self, beat: _Beat) -> bool:
        return (beat.writer.source, beat.writer.target) in self._once_only

    def _loop(self) -> None:
        timed = [b for b in self._beats if not self._is_once_only(b)]
        while not self._stop.is_set():
            now = time.monotonic()
            for beat in timed:
                if now >= beat.due:
                    beat.due = now + beat.interval_s
                    self._emit(beat)
            next_due = min(b.due for b in timed)
            self._stop.wait(max(0.0, next_due - time.monotonic()))

    def _emit(self, beat: _Beat) -> None:
        pair = f"{beat.writer.source}->{beat.writer.target}"
        try:
            beat.writer.emit(timeout_s=max(beat.interval_s * 5, 5.0))
            self.emitted += 1
            if self._on_emit is not None:
                self._on_emit(beat.writer.source, beat.writer.target)
            if beat.failing:
                log.warning("heartbeats flow=%s are being written again", pair)
            beat.failing = False
        except Exception as exc:  # a heartbeat never stops replication, whatever failed
            if not beat.failing:
                log.warning("heartbeat flow=%s failed; trying again every %.0f s: %s", pair, beat.interval_s, exc)
            beat.failing = True


def _producer_settings(flow: FlowConfig) -> dict[str, str]:
    # A heartbeat must not wait behind a large linger; it is one small record a second.
    return {**flow.target_producer.settings(), "linger.ms": "0"}

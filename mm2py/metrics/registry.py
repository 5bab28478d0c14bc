"""Prometheus metrics of one ``mm2py run``, served on ``/metrics`` while it runs.

Dashboards and alerts written for MirrorMaker 2 should work on mm2py unchanged, so MM2's own metrics keep
the names they get from Strimzi's JMX Prometheus Exporter rules for KafkaMirrorMaker2 (its
``metrics-config.yml``). MM2 registers them in the JMX domain ``kafka.connect.mirror`` (``MirrorSourceMetrics``,
``MirrorCheckpointMetrics``), and Strimzi's rules turn

- ``kafka.connect.mirror<type=MirrorSourceConnector, target=(.+), topic=(.+), partition=(.+)><>([a-z-_]+)``
  into ``kafka_connect_mirror_mirrorsourceconnector_$4`` with labels target, topic, partition, and
- ``kafka.connect.mirror<type=MirrorCheckpointConnector, source=(.+), target=(.+), group=(.+), topic=(.+),
  partition=(.+)><>([a-z-_]+)`` into ``kafka_connect_mirror_mirrorcheckpointconnector_$6`` with labels source,
  target, group, topic, partition,

with ``lowercaseOutputName`` and every ``-`` of the attribute name made ``_``, all typed GAUGE. With
``metric.names.formats = new`` (Kafka 4.3, KIP-1280) they are served under Kafka's new names instead, or under
both with ``legacy,new`` (:mod:`mm2py.metrics.names`). Since Kafka 4.0
(KIP-911, KAFKA-16769) every MirrorSourceConnector MBean also carries a ``source`` tag, which Strimzi's metrics
reporter passes on as a label; mm2py always sets it. ``topic`` is the remote topic for the source connector
and the downstream topic for checkpoints, as in MM2.

What each value means follows MM2: counts are cumulative totals; ``record_age_ms`` (read time minus the record
timestamp) and ``replication_latency_ms`` (target acknowledgement time minus the record timestamp) are the last
value, and ``_min``/``_max``/``_avg`` and the rates are over Kafka's default metric window, two samples of 30 s
(NaN when the window holds nothing, as Kafka reports it). Bytes are value bytes, as MM2 counts them.

mm2py's own metrics share their names and labels with ``mm2py lag --prometheus`` where they overlap. Values are
computed when scraped, so heartbeat ages and rates move even while nothing is recorded.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from mm2py.executor.contract import CopyPath
from mm2py.metrics import names
from mm2py.metrics.health import RunHealth
from mm2py.metrics.measurement import CheckpointMeasurement, PartitionMeasurement
from mm2py.metrics.names import (
    CHECKPOINT_ATTRIBUTES,
    CHECKPOINT_CONNECTOR,
    FLOW_LABELS,
    LAG_LABELS,
    SOURCE_ATTRIBUTES,
    SOURCE_CONNECTOR,
    TASK,
    MetricNamesFormat,
)
from mm2py.metrics.sampled_stat import SampledStat
from mm2py.metrics.server import MetricsEndpoint

JOB_SECONDS_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, math.inf)
METRIC_NAMES = names.METRIC_NAMES


class LagRow(Protocol):
    """A partition's replication lag; ``mm2py.tools.lag.PartitionLag`` is one."""

    @property
    def source(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def lag_records(self) -> int: ...
    @property
    def lag_seconds(self) -> float: ...


@dataclass
class _PartitionStats:
    record_count: int = 0
    byte_count: int = 0
    age_last: float = math.nan
    latency_last: float = math.nan
    records: SampledStat = field(default_factory=SampledStat)
    bytes: SampledStat = field(default_factory=SampledStat)
    age: SampledStat = field(default_factory=SampledStat)
    latency: SampledStat = field(default_factory=SampledStat)


@dataclass
class _Latency:
    last: float = math.nan
    window: SampledStat = field(default_factory=SampledStat)


@dataclass
class _Jobs:
    buckets: list[int] = field(default_factory=lambda: [0] * len(JOB_SECONDS_BUCKETS))
    count: int = 0
    seconds: float = 0.0


class RunMetrics(Collector):
    """The metrics of one run in a registry of its own (two runs in one process never mix).

    The driver calls the ``record_*``/``set_*`` methods from its flow threads; the HTTP server thread collects.
    ``clock`` returns Unix seconds; tests pass their own.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, str, str, str], _PartitionStats] = {}
        self._checkpoints: dict[tuple[str, str, str, str, str], _Latency] = {}
        self._lag: dict[tuple[str, str], dict[tuple[str, str], tuple[float, float]]] = {}
        self._lost: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self._heartbeats: dict[tuple[str, str], float] = {}
        self._jobs: dict[tuple[str, str], _Jobs] = {}
        self._retries: dict[tuple[str, str, str], int] = {}  # by source, target, error name
        self._paths: dict[tuple[str, str], str] = {}
        self._limits: dict[tuple[str, str], int] = {}  # mm2py.throughput.max.bytes.per.second, where set
        self._throttled_ms: dict[tuple[str, str], float] = {}  # what the flow's tasks waited for it, all told
        self._skipped: set[tuple[str, str, str]] = set()  # (source, target, feature) an ACL refused
        self._formats: dict[tuple[str, str], tuple[MetricNamesFormat, ...]] = {}
        self.health = RunHealth(clock)  # what /health and /ready answer
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- what the driver reports -------------------------------------------------------------------------

    def record_copy(self, measurements: Iterable[PartitionMeasurement]) -> None:
        """Copied ranges; a partition appears (with zero counts) from its first measurement on."""
        with self._lock:
            now = self._clock()
            for m in measurements:
                key = (m.source, m.target, m.remote_topic, str(m.partition))
                stats = self._partitions.setdefault(key, _PartitionStats())
                stats.record_count += m.records
                stats.byte_count += m.bytes
                stats.records.record(now, m.records, m.records)
                stats.bytes.record(now, m.records, m.bytes)
                if m.throttled_ms:
                    flow = (m.source, m.target)
                    self._throttled_ms[flow] = self._throttled_ms.get(flow, 0.0) + m.throttled_ms
                if m.records and not math.isnan(m.age_ms_min):
                    stats.age_last = m.age_ms_last
                    stats.age.record(now, m.records, m.age_ms_sum, m.age_ms_min, m.age_ms_max)
                if m.records and not math.isnan(m.latency_ms_min):
                    stats.latency_last = m.latency_ms_last
                    stats.latency.record(now, m.records, m.latency_ms_sum, m.latency_ms_min, m.latency_ms_max)

    def record_checkpoints(self, measurements: Iterable[CheckpointMeasurement]) -> None:
        with self._lock:
            now = self._clock()
            for m in measurements:
                entry = self._checkpoints.setdefault(
                    (m.source, m.target, m.group, m.topic, str(m.partition)), _Latency()
                )
                entry.last = m.latency_ms
                entry.window.record(now, 1, m.latency_ms, m.latency_ms, m.latency_ms)

    def set_lag(self, source: str, target: str, rows: Iterable[LagRow]) -> None:
        """The flow's lag now, replacing what it was (partitions no longer replicated disappear)."""
        with self._lock:
            self._lag[(source, target)] = {(r.topic, str(r.partition)): (r.lag_records, r.lag_seconds) for r in rows}

    def set_records_lost(self, source: str, target: str, lost: Mapping[tuple[str, int], int]) -> None:
        """Records of these source partitions lost before they were replicated, since counting began (the
        count kept with the progress, so it survives restarts)."""
        with self._lock:
            rows = self._lost.setdefault((source, target), {})
            rows.update({(topic, str(partition)): n for (topic, partition), n in lost.items()})

    def set_metric_names_formats(self, source: str, target: str, formats: Iterable[str]) -> None:
        """The name sets MM2's metrics of this flow are served under (``metric.names.formats``, KIP-1280)."""
        wanted = tuple(f for f in ("legacy", "new") if f in set(formats))
        with self._lock:
            self._formats[(source, target)] = wanted or ("legacy",)

    def heartbeat_written(self, source: str, target: str, at: float | None = None) -> None:
        """A heartbeat reached the target; its age is measured from ``at`` (Unix seconds) when scraped."""
        with self._lock:
            self._heartbeats[(source, target)] = self._clock() if at is None else at
        self.health.heartbeat_written(source, target, at)

    def copy_job_finished(self, source: str, target: str, seconds: float) -> None:
        with self._lock:
            jobs = self._jobs.setdefault((source, target), _Jobs())
            jobs.count += 1
            jobs.seconds += seconds
            for i, bound in enumerate(JOB_SECONDS_BUCKETS):
                if seconds <= bound:
                    jobs.buckets[i] += 1

    def retried(self, source: str, target: str, error: str = "", count: int = 1) -> None:
        """``error``: Kafka's name of what failed (``mm2py.kafka_errors``; the same on both copy paths), empty when
        no Kafka error caused it (a stalled source, a lost Spark task)."""
        with self._lock:
            self._retries[(source, target, error)] = self._retries.get((source, target, error), 0) + count

    def set_throughput_limit(self, source: str, target: str, bytes_per_s: int) -> None:
        """The flow's ``mm2py.throughput.max.bytes.per.second`` (0: none, not shown)."""
        with self._lock:
            if bytes_per_s > 0:
                self._limits[(source, target)] = bytes_per_s

    def set_copy_path(self, source: str, target: str, path: CopyPath) -> None:
        with self._lock:
            self._paths[(source, target)] = path.path

    def feature_skipped(self, source: str, target: str, feature: str) -> None:
        """The flow runs without an optional feature because an ACL refused it (mm2py.control.features)."""
        with self._lock:
            self._skipped.add((source, target, feature))
        self.health.skipped(f"{source}->{target}", feature)

    # -- what a scrape sees --------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = self._clock()
            yield from self._source_families(now)
            yield from self._checkpoint_families(now)
            yield from self._own_families(now)

    def text(self) -> str:
        """The exposition text a scrape would get."""
        return generate_latest(self.registry).decode("utf-8")

    def _formats_of(self, source: str, target: str) -> tuple[MetricNamesFormat, ...]:
        return self._formats.get((source, target), ("legacy",))

    def _source_families(self, now: float) -> Iterator[Metric]:
        families = {
            (fmt, a): GaugeMetricFamily(
                names.source_name(a, fmt),
                f"MirrorSourceConnector {a.replace('_', '-')}",
                labels=names.source_labels(fmt),
            )
            for fmt in self._served_formats()
            for a in SOURCE_ATTRIBUTES
        }
        for key, s in sorted(self._partitions.items()):
            age_min, age_max, age_avg = s.age.stats(now)
            lat_min, lat_max, lat_avg = s.latency.stats(now)
            values = (
                s.record_count,
                s.records.rate(now),
                s.byte_count,
                s.bytes.rate(now),
                s.age_last,
                age_min,
                age_max,
                age_avg,
                s.latency_last,
                lat_min,
                lat_max,
                lat_avg,
            )
            for fmt in self._formats_of(key[0], key[1]):
                labels = list(key) if fmt == "legacy" else [SOURCE_CONNECTOR, TASK, *key]
                for attribute, value in zip(SOURCE_ATTRIBUTES, values, strict=True):
                    families[(fmt, attribute)].add_metric(labels, value)
        yield from families.values()

    def _checkpoint_families(self, now: float) -> Iterator[Metric]:
        families = {
            (fmt, a): GaugeMetricFamily(
                names.checkpoint_name(a, fmt),
                f"MirrorCheckpointConnector {a.replace('_', '-')}",
                labels=names.checkpoint_labels(fmt),
            )
            for fmt in self._served_formats()
            for a in CHECKPOINT_ATTRIBUTES
        }
        for key, entry in sorted(self._checkpoints.items()):
            for fmt in self._formats_of(key[0], key[1]):
                labels = list(key) if fmt == "legacy" else [CHECKPOINT_CONNECTOR, TASK, *key]
                for attribute, value in zip(CHECKPOINT_ATTRIBUTES, (entry.last, *entry.window.stats(now)), strict=True):
                    families[(fmt, attribute)].add_metric(labels, value)
        yield from families.values()

    def _served_formats(self) -> list[MetricNamesFormat]:
        """The name sets some flow asks for (legacy when none was set), in a fixed order."""
        asked = {fmt for formats in self._formats.values() for fmt in formats} or {"legacy"}
        return [fmt for fmt in ("legacy", "new") if fmt in asked]

    def _own_families(self, now: float) -> Iterator[Metric]:
        records = GaugeMetricFamily(
            "mm2py_replication_lag_records", "Source records not yet replicated", labels=LAG_LABELS
        )
        seconds = GaugeMetricFamily(
            "mm2py_replication_lag_seconds", "Age of the oldest source record not yet replicated", labels=LAG_LABELS
        )
        for (source, target), rows in sorted(self._lag.items()):
            for (topic, partition), (lag_records, lag_seconds) in sorted(rows.items()):
                records.add_metric([source, target, topic, partition], lag_records)
                seconds.add_metric([source, target, topic, partition], lag_seconds)
        lost = CounterMetricFamily(
            "mm2py_records_lost",
            "Source records that left the source (retention, DeleteRecords, a re-created topic) before they "
            "were replicated, counted since the flow began",
            labels=LAG_LABELS,
        )
        for (source, target), counts in sorted(self._lost.items()):
            for (topic, partition), count in sorted(counts.items()):
                lost.add_metric([source, target, topic, partition], count)
        heartbeat = GaugeMetricFamily(
            "mm2py_heartbeat_age_seconds",
            "Seconds since this run's newest heartbeat reached the target",
            labels=FLOW_LABELS,
        )
        for flow, at in sorted(self._heartbeats.items()):
            heartbeat.add_metric(list(flow), max(0.0, now - at))
        jobs = HistogramMetricFamily(
            "mm2py_copy_job_duration_seconds", "Wall time of one copy job (one Spark job of a flow)", labels=FLOW_LABELS
        )
        for flow, j in sorted(self._jobs.items()):
            bounds = ["+Inf" if math.isinf(b) else str(b) for b in JOB_SECONDS_BUCKETS]
            jobs.add_metric(list(flow), list(zip(bounds, j.buckets, strict=True)), j.seconds)
        retries = CounterMetricFamily(
            "mm2py_retries",
            "Transient failures retried (copy jobs, admin steps), by Kafka's name of the error",
            labels=(*FLOW_LABELS, "error"),
        )
        for key, count in sorted(self._retries.items()):
            retries.add_metric(list(key), count)
        path = GaugeMetricFamily(
            "mm2py_copy_path", "1 for the copy path the flow uses (batch or record)", labels=(*FLOW_LABELS, "path")
        )
        for flow, name in sorted(self._paths.items()):
            path.add_metric([*flow, name], 1)
        skipped = GaugeMetricFamily(
            "mm2py_feature_skipped",
            "1 for an optional feature the flow runs without because an ACL refused it",
            labels=(*FLOW_LABELS, "feature"),
        )
        for source, target, feature in sorted(self._skipped):
            skipped.add_metric([source, target, feature], 1)
        yield from (records, seconds, lost, heartbeat, jobs, retries, path, skipped, *self._throttle_families())

    def _throttle_families(self) -> Iterator[Metric]:
        limit = GaugeMetricFamily(
            "mm2py_throughput_limit_bytes_per_second",
            "The flow's mm2py.throughput.max.bytes.per.second (flows with a limit only)",
            labels=FLOW_LABELS,
        )
        waited = CounterMetricFamily(
            "mm2py_throttled_seconds",
            "Seconds the flow's copy tasks waited for its throughput limit, summed over its tasks: growing while "
            "the limit holds the flow back",
            labels=FLOW_LABELS,
        )
        for flow, bytes_per_s in sorted(self._limits.items()):
            limit.add_metric(list(flow), bytes_per_s)
            waited.add_metric(list(flow), self._throttled_ms.get(flow, 0.0) / 1000)
        yield from (limit, waited)

    # -- the endpoint ----------------------------------------------------------------------------------------

    def serve(self, host: str, port: int, redact: Callable[[str], str] = lambda text: text) -> MetricsEndpoint:
        """Start ``/metrics``, ``/health`` and ``/ready`` on ``host:port`` (0 = any free port); raises OSError if
        it cannot listen. ``redact`` cleans the probes' answers of secrets."""
        return MetricsEndpoint(self.registry, host, port, self.health, redact)

"""The names mm2py's metrics are served under: MM2's two name sets (KIP-1280) and mm2py's own.

MM2 registers its per-partition and per-checkpoint metrics under one of two MBean names, chosen by the
connectors' ``metric.names.formats`` (Kafka 4.3, KIP-1280; default ``legacy``, ``legacy,new`` for both):

- legacy: ``kafka.connect.mirror:type=MirrorSourceConnector,source=…,target=…,topic=…,partition=…`` (and
  ``type=MirrorCheckpointConnector`` with ``group``). mm2py serves them under the names Strimzi's JMX exporter
  rules for KafkaMirrorMaker2 give them: ``kafka_connect_mirror_mirrorsourceconnector_<attribute>`` with labels
  source, target, topic, partition (``-`` in the attribute made ``_``);
- new (KIP-877 plugin metrics): ``kafka.connect:type=plugins,connector=…,task=…,source=…,target=…,topic=…,
  partition=…``; Kafka's own metric registry names the group ``plugins`` in the ``kafka.connect`` namespace and
  keeps MM2's attribute names, so they are served as ``kafka_connect_plugins_<attribute>`` with the MBean's tags
  as labels - what Strimzi's metrics reporter (namespace, group and name joined by ``_``) and the JMX exporter's
  default rule (domain, type and attribute) make of that MBean. ``connector`` is MM2's connector name in
  dedicated mode (MirrorSourceConnector, MirrorCheckpointConnector) and ``task`` is ``0``: mm2py runs each
  flow's copy as one logical task (Spark's tasks are not Connect's).

The attribute names and tags were read from Kafka 4.3.1's MirrorSourceMetrics and MirrorCheckpointMetrics
(and checked against Kafka's own registry by tests/realkafka/test_real_kafka_metric_names.py).
"""

from __future__ import annotations

from typing import Literal

MetricNamesFormat = Literal["legacy", "new"]

SOURCE_PREFIX = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT_PREFIX = "kafka_connect_mirror_mirrorcheckpointconnector_"
PLUGIN_PREFIX = "kafka_connect_plugins_"
SOURCE_CONNECTOR = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR = "MirrorCheckpointConnector"
TASK = "0"

SOURCE_LABELS = ("source", "target", "topic", "partition")
CHECKPOINT_LABELS = ("source", "target", "group", "topic", "partition")
PLUGIN_LABELS = ("connector", "task")  # in front of the connector's own tags, as PluginMetricsImpl puts them
LAG_LABELS = ("source", "target", "topic", "partition")  # as mm2py lag --prometheus labels them
FLOW_LABELS = ("source", "target")

SOURCE_ATTRIBUTES = (
    "record_count",
    "record_rate",
    "byte_count",
    "byte_rate",
    "record_age_ms",
    "record_age_ms_min",
    "record_age_ms_max",
    "record_age_ms_avg",
    "replication_latency_ms",
    "replication_latency_ms_min",
    "replication_latency_ms_max",
    "replication_latency_ms_avg",
)
CHECKPOINT_ATTRIBUTES = (
    "checkpoint_latency_ms",
    "checkpoint_latency_ms_min",
    "checkpoint_latency_ms_max",
    "checkpoint_latency_ms_avg",
)


def source_name(attribute: str, fmt: MetricNamesFormat) -> str:
    return (SOURCE_PREFIX if fmt == "legacy" else PLUGIN_PREFIX) + attribute


def checkpoint_name(attribute: str, fmt: MetricNamesFormat) -> str:
    return (CHECKPOINT_PREFIX if fmt == "legacy" else PLUGIN_PREFIX) + attribute


def source_labels(fmt: MetricNamesFormat) -> tuple[str, ...]:
    return SOURCE_LABELS if fmt == "legacy" else (*PLUGIN_LABELS, *SOURCE_LABELS)


def checkpoint_labels(fmt: MetricNamesFormat) -> tuple[str, ...]:
    return CHECKPOINT_LABELS if fmt == "legacy" else (*PLUGIN_LABELS, *CHECKPOINT_LABELS)


OWN_NAMES = (
    "mm2py_replication_lag_records",
    "mm2py_replication_lag_seconds",
    "mm2py_records_lost_total",
    "mm2py_heartbeat_age_seconds",
    "mm2py_copy_job_duration_seconds_bucket",
    "mm2py_copy_job_duration_seconds_count",
    "mm2py_copy_job_duration_seconds_sum",
    "mm2py_retries_total",
    "mm2py_copy_path",
    "mm2py_feature_skipped",
)


def mm2_names(fmt: MetricNamesFormat) -> tuple[str, ...]:
    """MM2's metric names in one format, as a scrape shows them."""
    return (
        *(source_name(a, fmt) for a in SOURCE_ATTRIBUTES),
        *(checkpoint_name(a, fmt) for a in CHECKPOINT_ATTRIBUTES),
    )


# Every sample name a scrape can show (a histogram shows three per family, a counter its _total).
METRIC_NAMES: tuple[str, ...] = (*mm2_names("legacy"), *mm2_names("new"), *OWN_NAMES)

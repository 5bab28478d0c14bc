"""mm2py's metric.names.formats = new serves the names Kafka 4.3's MirrorMaker 2 registers (KIP-1280).

Kafka's own classes decide: tests/java/MirrorMetricNames.java builds MM2's task metrics as a Connect worker
does (a Metrics registry in the kafka.connect namespace, a PluginMetricsImpl per task tagged connector and
task) with Kafka 4.3.1's MirrorSourceMetrics and MirrorCheckpointMetrics, and prints every metric of the
``plugins`` group and every MBean its JmxReporter makes. mm2py must serve each of them, with the same tags as
labels, under the name the metrics reporter gives it (namespace, group and name joined by ``_``).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mm2py.metrics.measurement import CheckpointMeasurement, PartitionMeasurement
from mm2py.metrics.registry import RunMetrics
from tests.harness.mirror_maker import java_helper_classes
from tests.harness.real_kafka import JVM_FLAGS, REPO_ROOT, KafkaRuntime

pytestmark = pytest.mark.realkafka

HELPER = REPO_ROOT / "tests" / "java" / "MirrorMetricNames.java"
CLASS = "org/apache/kafka/connect/mirror/MirrorMetricNames.class"


def kafkas_own_metrics(runtime: KafkaRuntime) -> tuple[set[tuple[str, tuple[tuple[str, str], ...]]], list[str]]:
    """(Prometheus name, labels) of every metric Kafka registers, and the MBeans it makes of them."""
    classes = java_helper_classes(runtime, HELPER, CLASS)
    done = subprocess.run(
        [
            str(runtime.java),
            *JVM_FLAGS,
            "-cp",
            os.pathsep.join([str(classes), *map(str, runtime.classpath)]),
            "org.apache.kafka.connect.mirror.MirrorMetricNames",
            "src",
            "dst",
            "src.orders",
            "billing",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    metrics, mbeans = set(), []
    for line in done.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "metric":
            group, name, tags = rest.split(" ")
            labels = tuple(sorted(tuple(tag.split("=", 1)) for tag in tags.split(",")))  # a label set: no order
            metrics.add((f"kafka_connect_{group}_{name.replace('-', '_')}", labels))  # type: ignore[arg-type]
        elif kind == "mbean":
            mbeans.append(rest)
    return metrics, mbeans


def test_new_metric_names_are_the_ones_kafka_4_3_registers(
    kafka_runtime: KafkaRuntime, record_property: Callable[[str, object], None]
) -> None:
    theirs, mbeans = kafkas_own_metrics(kafka_runtime)
    assert len(theirs) == 16, theirs  # 12 per partition, 4 per checkpointed group partition
    record_property("kafka_mbeans", mbeans)
    assert any(
        re.fullmatch(
            r"kafka\.connect:type=plugins,connector=MirrorSourceConnector,task=0,source=src,"
            r"target=dst,topic=src\.orders,partition=0 .*record-count.*",
            m,
        )
        for m in mbeans
    ), mbeans

    metrics = RunMetrics()
    metrics.set_metric_names_formats("src", "dst", ["new"])
    metrics.record_copy([PartitionMeasurement("src", "dst", "orders", "src.orders", 0, 1, 100, *[5.0] * 4, *[7.0] * 4)])
    metrics.record_checkpoints([CheckpointMeasurement("src", "dst", "billing", "src.orders", 0, 3.0)])
    ours = {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in text_string_to_metric_families(metrics.text())
        for sample in family.samples
        if sample.name.startswith("kafka_connect_")
    }
    record_property("served", sorted(name for name, _ in ours))
    assert ours == theirs, (sorted(ours - theirs), sorted(theirs - ours))

"""Records lost before they were replicated, on real Kafka: DeleteRecords and a re-created topic.

tansu has neither DeleteRecords nor retention, and re-creates topics unlike Kafka (docs/test-broker.md), so the
loss accounting is shown here, on Apache Kafka 4.3.1: a flow copied 10,000 records, 10,000 more arrived, and
DeleteRecords removed each partition's records below offset 7,500 before the next ``--once``. The 5,000
records lost are counted by the run (``lost=5000``), by ``lag`` (2,500 per partition, before and after the
run), by ``--max-lost`` and by ``mm2py_records_lost_total`` on the metrics port; under
``mm2py.source.loss = fail`` the run stops with exit 3 naming both gaps and copies nothing after them. A topic
deleted and re-created loses the old tail a run saw. Also here, because they need a real broker's answers:
tiered-storage configs a plain target rejects, and ListOffsets by timestamp for ``--from-timestamp``.
"""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import Record, client_config, end_offsets, free_port, make_records, produce, read_all
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import unique_alias, write_real_config

pytestmark = pytest.mark.realkafka

PARTITIONS = 2
# No heartbeats written or replicated (the session's source may hold a heartbeats topic from other tests): the
# run's copied=N then counts the topic's records only, as the example does, and lag shows only them.
QUIET = "emit.heartbeats.enabled = false\nheartbeats.replication.enabled = false\n"


def lag_rows(config: Path, flow: str) -> dict[int, dict[str, Any]]:
    done = mm2py("lag", str(config), "--flows", flow, "--json")
    assert done.returncode == 0, done.stderr
    return {row["partition"]: row for row in json.loads(done.stdout)}


def delete_records_below(cluster: KafkaCluster, topic: str, offset: int) -> None:
    admin = AdminClient(client_config(cluster.bootstrap))
    for future in admin.delete_records([TopicPartition(topic, p, offset) for p in range(PARTITIONS)]).values():
        assert future.result(timeout=30).low_watermark == offset


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def test_records_deleted_before_replication_are_counted_reported_served_and_stop_a_fail_flow(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    warn, fail = unique_alias("warn"), unique_alias("fail")
    topic_w = real_kafka.create_topic(unique_topic("lossw"), PARTITIONS)
    topic_f = real_kafka.create_topic(unique_topic("lossf"), PARTITIONS)
    config = write_real_config(
        tmp_path / "mm2.properties",
        {warn: real_kafka.bootstrap, fail: real_kafka.bootstrap, "dst": real_kafka_target.bootstrap},
        QUIET
        + f"{warn}->dst.enabled = true\n{warn}->dst.topics = {topic_w}\n"
        + f"{warn}->dst.metric.names.formats = legacy,new\n"
        + f"{fail}->dst.enabled = true\n{fail}->dst.topics = {topic_f}\n{fail}->dst.mm2py.source.loss = fail\n",
    )
    for topic in (topic_w, topic_f):
        produce(real_kafka.bootstrap, topic, make_records(10_000, partitions=PARTITIONS, seed=1))
    first = mm2py("run", str(config), "--once")
    assert first.returncode == 0, first.stderr
    for topic in (topic_w, topic_f):  # 10,000 more arrive; DeleteRecords removes 5,000 not yet replicated
        produce(real_kafka.bootstrap, topic, make_records(10_000, partitions=PARTITIONS, seed=2))
        delete_records_below(real_kafka, topic, 7500)

    # lag sees the loss before any run does, and says the records are lost, not replicated.
    before = lag_rows(config, f"{warn}->dst")
    assert {p: (r["replicated_offset"], r["lag_records"], r["lost"]) for p, r in before.items()} == {
        p: (7500, 2500, 2500) for p in range(PARTITIONS)
    }
    check = mm2py("lag", str(config), "--flows", f"{warn}->dst", "--max-lost", "0")
    assert check.returncode == 1 and check.stderr.count("lost=2500") == PARTITIONS, check.stderr

    # fail: exit 3 naming both gaps, and nothing after them is copied.
    failed = mm2py("run", str(config), "--once", "--flows", f"{fail}->dst")
    assert failed.returncode == 3, failed.stderr
    for p in range(PARTITIONS):
        assert f"{topic_f} partition {p} offsets 5000-7499 (2500 records)" in failed.stderr, failed.stderr
    assert end_offsets(real_kafka_target.bootstrap, f"{fail}.{topic_f}") == {p: 5000 for p in range(PARTITIONS)}

    # warn: the run counts them (summary line), and serves the count while it runs.
    port = free_port()
    with MirrorRun(
        config, tmp_path / "run.log", "--once", "--flows", f"{warn}->dst", "--metrics-port", str(port)
    ) as run:
        served = poll_until(
            lambda: scrape(port).get("mm2py_records_lost_total"), 120, "mm2py_records_lost_total", process=run.proc
        )
        assert run.proc.wait(180) == 0, run.log_text()
    assert {(s["topic"], s["partition"]): v for s, v in served} == {
        (topic_w, str(p)): 2500.0 for p in range(PARTITIONS)
    }
    summary = next(line for line in run.log_text().splitlines() if line.startswith(f"flow={warn}->dst copied="))
    assert " copied=5000 " in summary and " lost=5000 " in summary, summary
    assert end_offsets(real_kafka_target.bootstrap, f"{warn}.{topic_w}") == {p: 7500 for p in range(PARTITIONS)}

    # The count is kept with the progress: lag (a new process) still shows it, the replicated range complete.
    after = lag_rows(config, f"{warn}->dst")
    assert {p: (r["replicated_offset"], r["lag_records"], r["lost"]) for p, r in after.items()} == {
        p: (10_000, 0, 2500) for p in range(PARTITIONS)
    }


def recreate(cluster: KafkaCluster, topic: str) -> None:
    """Delete ``topic`` and create it again (Kafka deletes asynchronously: create until it is accepted)."""
    admin = AdminClient(client_config(cluster.bootstrap))
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)

    def created() -> bool:
        try:
            cluster.create_topic(topic, PARTITIONS)
        except KafkaException:
            return False  # TOPIC_ALREADY_EXISTS while the old one is being deleted
        return True

    poll_until(created, 60, f"{topic} to be created again")


def test_a_topic_re_created_loses_the_tail_a_run_saw_but_did_not_copy(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    alias = unique_alias("recr")
    topic = real_kafka.create_topic(unique_topic("recreate"), PARTITIONS)
    config = write_real_config(
        tmp_path / "mm2.properties",
        {alias: real_kafka.bootstrap, "dst": real_kafka_target.bootstrap},
        QUIET + f"{alias}->dst.enabled = true\n{alias}->dst.topics = {topic}\nmm2py.range.max.records = 1000\n",
    )
    produce(real_kafka.bootstrap, topic, make_records(20_000, partitions=PARTITIONS, seed=3))
    # A run that saw the end (10,000 per partition) but stopped after its first jobs (SIGTERM): the tail is
    # known and not copied.
    with MirrorRun(config, tmp_path / "first.log", "--once", verbose=True) as first:
        first.wait_for(lambda: "copied flow=" in first.log_text(), 120, "the first copy job")
        assert first.stop() == 0, first.log_text()
    position = {p: r["replicated_offset"] for p, r in lag_rows(config, f"{alias}->dst").items()}
    assert all(0 < position[p] < 10_000 for p in range(PARTITIONS)), position

    recreate(real_kafka, topic)
    produce(real_kafka.bootstrap, topic, make_records(600, partitions=PARTITIONS, seed=4))
    second = mm2py("run", str(config), "--once")
    assert second.returncode == 0, second.stderr
    tail = {p: 10_000 - position[p] for p in range(PARTITIONS)}
    assert f" lost={sum(tail.values())} " in second.stdout, second.stdout
    for p in range(PARTITIONS):
        assert f"offsets {position[p]}-9999 ({tail[p]} records) of the old partition" in second.stderr
    rows = lag_rows(config, f"{alias}->dst")
    assert {p: (r["replicated_offset"], r["lag_records"], r["lost"]) for p, r in rows.items()} == {
        p: (300, 0, tail[p]) for p in range(PARTITIONS)
    }
    # The new partition's records were copied after what the old one had replicated.
    remote = end_offsets(real_kafka_target.bootstrap, f"{alias}.{topic}")
    assert remote == {p: position[p] + 300 for p in range(PARTITIONS)}


def test_tiered_storage_configs_are_left_out_so_a_plain_target_accepts_the_remote_topic(
    real_kafka: KafkaCluster, real_kafka_target: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Neither cluster has tiered storage (Kafka's jars have no RemoteStorageManager to run one with), so the
    source topic's configs are the ones a tiered source reports, and the target is real: it rejects
    remote.storage.enable=true, and accepts the remote topic mm2py creates from those configs."""
    from mm2py.config import load
    from mm2py.control.admin_pool import AdminPool
    from mm2py.control.plan import build_plan
    from mm2py.control.topics import ensure_remote_topics, with_configs_not_synced
    from mm2py.errors import KafkaOperationError
    from mm2py.librdkafka.admin import ClusterAdmin, TopicConfigValue

    target_admin = AdminClient(client_config(real_kafka_target.bootstrap))
    refused = unique_topic("refused")
    future = target_admin.create_topics([NewTopic(refused, 1, 1, config={"remote.storage.enable": "true"})])[refused]
    with pytest.raises(KafkaException, match="Tiered Storage functionality is disabled in the broker"):
        future.result(timeout=30)

    alias = unique_alias("tier")
    topic = real_kafka.create_topic(unique_topic("tiered"), 1)
    config = write_real_config(
        tmp_path / "mm2.properties",
        {alias: real_kafka.bootstrap, "dst": real_kafka_target.bootstrap},
        QUIET + f"{alias}->dst.enabled = true\n{alias}->dst.topics = {topic}\n",
    )
    flow = load(config).flows[0]

    class TieredSource(ClusterAdmin):
        def describe_topic_configs(self, topics: list[str]) -> dict[str, dict[str, TopicConfigValue]]:
            real = super().describe_topic_configs(topics)
            tiered = {
                "remote.storage.enable": TopicConfigValue("true", False),
                "local.retention.ms": TopicConfigValue("3600000", False),
                "retention.ms": TopicConfigValue("604800000", False),
            }
            return {t: {**configs, **tiered} for t, configs in real.items()}

    source = TieredSource(alias, {"bootstrap.servers": real_kafka.bootstrap})
    target = ClusterAdmin("dst", {"bootstrap.servers": real_kafka_target.bootstrap})
    pool = AdminPool(lambda _alias, _flow, side: source if side == "source" else target)
    plan = with_configs_not_synced([flow], build_plan([flow], pool), pool)
    [topic_plan] = plan.flows[0].topics
    not_synced = dict(topic_plan.configs_not_synced)  # also min.insync.replicas, which MM2 leaves out too
    assert {k: not_synced.get(k) for k in ("local.retention.ms", "remote.storage.enable")} == {
        "local.retention.ms": "3600000",
        "remote.storage.enable": "true",
    }
    ensure_remote_topics(flow, plan.flows[0], source, target)  # would fail with remote.storage.enable=true
    remote = f"{alias}.{topic}"

    def configs_once_known() -> dict[str, TopicConfigValue] | None:
        """CreateTopics returns once the controller has the topic; the broker answering DescribeConfigs may
        learn of it a moment later (UNKNOWN_TOPIC_OR_PARTITION until then: seen once in a full suite run)."""
        try:
            return target.describe_topic_configs([remote])[remote]
        except KafkaOperationError as exc:
            if exc.code != "UNKNOWN_TOPIC_OR_PARTITION":
                raise
            return None

    described = poll_until(configs_once_known, 30, f"{remote} known to the broker describing its configs")
    assert described["retention.ms"].value == "604800000" and not described["retention.ms"].is_default
    assert described["remote.storage.enable"] == TopicConfigValue("false", True)


def test_from_timestamp_starts_every_partition_at_its_first_record_at_or_after_the_time_and_lag_agrees(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    partitions, per_partition = 3, 400
    topic = real_kafka.create_topic(unique_topic("fromtime"), partitions)
    day_ms = 24 * 3600 * 1000
    now = int(time.time() * 1000) // 1000 * 1000
    # Records over the last 24 hours, each partition on its own spacing, so the start offsets differ.
    records = [
        Record(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [], now - day_ms + i * day_ms // (per_partition + 7 * p), p)
        for p in range(partitions)
        for i in range(per_partition)
    ]
    produce(real_kafka.bootstrap, topic, records)
    start = now - 6 * 3600 * 1000  # "copy the last 6 hours"
    first = {
        p: min(i for i, r in enumerate(r for r in records if r.partition == p) if r.timestamp >= start)
        for p in range(partitions)
    }
    alias = unique_alias("time")
    config = write_real_config(
        tmp_path / "mm2.properties",
        {alias: real_kafka.bootstrap, "dst": real_kafka_target.bootstrap},
        QUIET
        + f"{alias}->dst.enabled = true\n{alias}->dst.topics = {topic}\n{alias}->dst.mm2py.start.timestamp = {start}\n",
    )
    before = lag_rows(config, f"{alias}->dst")  # lag places partitions without progress by the same rule
    assert {p: (r["replicated_offset"], r["lag_records"]) for p, r in before.items()} == {
        p: (first[p], per_partition - first[p]) for p in range(partitions)
    }
    iso = datetime.datetime.fromtimestamp(start / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record_property("first_offsets_at_or_after", {"time": iso, **{str(p): o for p, o in first.items()}})
    done = mm2py("run", str(config), "--once", "--from-timestamp", iso)
    assert done.returncode == 0, done.stderr
    assert f" copied={sum(r['lag_records'] for r in before.values())} " in done.stdout, done.stdout
    copied = read_all(real_kafka_target.bootstrap, f"{alias}.{topic}")
    for p in range(partitions):
        stamps = [r.timestamp for r in copied if r.partition == p]
        expected = [r.timestamp for r in records if r.partition == p][first[p] :]
        assert stamps == expected and min(stamps) >= start, p
    after = lag_rows(config, f"{alias}->dst")
    assert {p: (r["replicated_offset"], r["lag_records"]) for p, r in after.items()} == {
        p: (per_partition, 0) for p in range(partitions)
    }

"""mm2py.metrics.registry: MM2's metric names as Strimzi renders them, values MM2 would show, served over HTTP."""

from __future__ import annotations

import math
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mm2py.executor.contract import CopyPath
from mm2py.metrics.measurement import CheckpointMeasurement, PartitionMeasurement, RangeMeasurer
from mm2py.metrics.registry import METRIC_NAMES, RunMetrics
from tests.harness.mm2py_cli import mm2py_argv

SRC = "kafka_connect_mirror_mirrorsourceconnector_"
CKP = "kafka_connect_mirror_mirrorcheckpointconnector_"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        return parse(response.read().decode("utf-8"))


def measurement(
    records: int,
    nbytes: int,
    ages: list[float],
    latencies: list[float],
    partition: int = 0,
    source: str = "dc1",
    remote_topic: str = "dc1.orders",
) -> PartitionMeasurement:
    return PartitionMeasurement(
        source,
        "target",
        "orders",
        remote_topic,
        partition,
        records,
        nbytes,
        min(ages),
        max(ages),
        sum(ages),
        ages[-1],
        min(latencies),
        max(latencies),
        sum(latencies),
        latencies[-1],
    )


P0 = {"source": "dc1", "target": "target", "topic": "dc1.orders", "partition": "0"}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def served(clock: Clock) -> Iterator[tuple[RunMetrics, int]]:
    metrics = RunMetrics(clock)
    with metrics.serve("127.0.0.1", 0) as endpoint:
        yield metrics, endpoint.port


def test_counts_are_the_exact_sums_of_every_measurement_per_remote_partition(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.record_copy(
        [measurement(3, 300, [10, 20, 30], [15, 25, 35]), measurement(2, 50, [5, 7], [6, 8], partition=1)]
    )
    metrics.record_copy([measurement(4, 401, [1, 2, 3, 4], [2, 3, 4, 5])])
    samples = scrape(port)
    assert value(samples, SRC + "record_count", **P0) == 7
    assert value(samples, SRC + "byte_count", **P0) == 701
    assert value(samples, SRC + "record_count", **{**P0, "partition": "1"}) == 2
    assert value(samples, SRC + "byte_count", **{**P0, "partition": "1"}) == 50


def test_age_and_latency_are_last_value_and_window_min_max_avg(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.record_copy([measurement(3, 300, [10, 20, 30], [15, 25, 35])])
    metrics.record_copy([measurement(2, 10, [40, 4], [50, 45])])
    samples = scrape(port)
    assert value(samples, SRC + "record_age_ms", **P0) == 4
    assert value(samples, SRC + "record_age_ms_min", **P0) == 4
    assert value(samples, SRC + "record_age_ms_max", **P0) == 40
    assert value(samples, SRC + "record_age_ms_avg", **P0) == pytest.approx(104 / 5)
    assert value(samples, SRC + "replication_latency_ms", **P0) == 45
    assert value(samples, SRC + "replication_latency_ms_min", **P0) == 15
    assert value(samples, SRC + "replication_latency_ms_max", **P0) == 50
    assert value(samples, SRC + "replication_latency_ms_avg", **P0) == pytest.approx(170 / 5)


def test_window_stats_expire_after_two_samples_of_thirty_seconds_but_counts_stay(
    served: tuple[RunMetrics, int], clock: Clock
) -> None:
    metrics, port = served
    metrics.record_copy([measurement(3, 300, [10, 20, 30], [15, 25, 35])])
    clock.now += 45
    metrics.record_copy([measurement(1, 1, [99], [100])])
    samples = scrape(port)
    assert value(samples, SRC + "record_age_ms_min", **P0) == 10  # both samples still live
    clock.now += 30  # the first sample (75 s old) is gone, the second (30 s) is not
    samples = scrape(port)
    assert value(samples, SRC + "record_age_ms_min", **P0) == 99
    clock.now += 60
    samples = scrape(port)
    assert math.isnan(value(samples, SRC + "record_age_ms_avg", **P0))
    assert math.isnan(value(samples, SRC + "replication_latency_ms_max", **P0))
    assert value(samples, SRC + "record_count", **P0) == 4
    assert value(samples, SRC + "record_rate", **P0) == 0


def test_rates_divide_by_at_least_one_full_sample_as_kafka_rate_does(
    served: tuple[RunMetrics, int], clock: Clock
) -> None:
    metrics, port = served
    metrics.record_copy([measurement(600, 6000, [1], [1])])
    clock.now += 10  # 10 s since the sample started, counted as 10 + 30 s
    samples = scrape(port)
    assert value(samples, SRC + "record_rate", **P0) == pytest.approx(600 / 40)
    assert value(samples, SRC + "byte_rate", **P0) == pytest.approx(6000 / 40)
    clock.now += 40  # 50 s: one full sample already, nothing added
    metrics.record_copy([measurement(100, 100, [1], [1])])
    samples = scrape(port)
    assert value(samples, SRC + "record_rate", **P0) == pytest.approx(700 / 50)


def test_checkpoint_latency_per_group_and_downstream_partition(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.record_checkpoints(
        [
            CheckpointMeasurement("dc1", "target", "billing", "dc1.orders", 0, 12.0),
            CheckpointMeasurement("dc1", "target", "billing", "dc1.orders", 0, 30.0),
            CheckpointMeasurement("dc1", "target", "audit", "dc1.orders", 2, 7.0),
        ]
    )
    samples = scrape(port)
    billing = {"source": "dc1", "target": "target", "group": "billing", "topic": "dc1.orders", "partition": "0"}
    assert value(samples, CKP + "checkpoint_latency_ms", **billing) == 30
    assert value(samples, CKP + "checkpoint_latency_ms_min", **billing) == 12
    assert value(samples, CKP + "checkpoint_latency_ms_max", **billing) == 30
    assert value(samples, CKP + "checkpoint_latency_ms_avg", **billing) == 21
    assert value(samples, CKP + "checkpoint_latency_ms", **{**billing, "group": "audit", "partition": "2"}) == 7


class Lag:
    def __init__(self, topic: str, partition: int, records: int, seconds: float) -> None:
        self.source, self.target, self.topic, self.partition = "dc1", "target", topic, partition
        self.lag_records, self.lag_seconds = records, seconds


def test_lag_uses_the_names_and_labels_of_lag_prometheus_and_replaces_the_flows_rows(
    served: tuple[RunMetrics, int],
) -> None:
    metrics, port = served
    metrics.set_lag("dc1", "target", [Lag("orders", 0, 25, 960.5), Lag("payments", 0, 3, 2.0)])
    labels = {"source": "dc1", "target": "target", "topic": "orders", "partition": "0"}
    samples = scrape(port)
    assert value(samples, "mm2py_replication_lag_records", **labels) == 25
    assert value(samples, "mm2py_replication_lag_seconds", **labels) == 960.5
    metrics.set_lag("dc1", "target", [Lag("orders", 0, 0, 0.0)])
    samples = scrape(port)
    assert value(samples, "mm2py_replication_lag_records", **labels) == 0
    assert [dict(lbl)["topic"] for name, lbl in samples if name == "mm2py_replication_lag_records"] == ["orders"]


def test_heartbeat_age_grows_with_time_until_the_next_heartbeat(served: tuple[RunMetrics, int], clock: Clock) -> None:
    metrics, port = served
    metrics.heartbeat_written("dc1", "target")
    clock.now += 42
    assert value(scrape(port), "mm2py_heartbeat_age_seconds", source="dc1", target="target") == 42
    metrics.heartbeat_written("dc1", "target")
    clock.now += 1
    assert value(scrape(port), "mm2py_heartbeat_age_seconds", source="dc1", target="target") == 1


def test_jobs_retries_and_copy_path(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    for seconds in (0.2, 3.0, 700.0):
        metrics.copy_job_finished("dc1", "target", seconds)
    metrics.retried("dc1", "target", "REQUEST_TIMED_OUT")
    metrics.retried("dc1", "target", "REQUEST_TIMED_OUT", 2)
    metrics.retried("dc1", "target")  # not a Kafka error: a stalled source, a lost Spark task
    metrics.set_copy_path("dc1", "target", CopyPath("batch"))
    samples = scrape(port)
    flow = {"source": "dc1", "target": "target"}
    assert value(samples, "mm2py_copy_job_duration_seconds_count", **flow) == 3
    assert value(samples, "mm2py_copy_job_duration_seconds_sum", **flow) == pytest.approx(703.2)
    assert value(samples, "mm2py_copy_job_duration_seconds_bucket", le="0.5", **flow) == 1
    assert value(samples, "mm2py_copy_job_duration_seconds_bucket", le="5.0", **flow) == 2
    assert value(samples, "mm2py_copy_job_duration_seconds_bucket", le="600.0", **flow) == 2
    assert value(samples, "mm2py_copy_job_duration_seconds_bucket", le="+Inf", **flow) == 3
    assert value(samples, "mm2py_retries_total", error="REQUEST_TIMED_OUT", **flow) == 3
    assert value(samples, "mm2py_retries_total", error="", **flow) == 1
    assert value(samples, "mm2py_copy_path", path="batch", **flow) == 1


def test_a_scrape_serves_exactly_the_listed_metric_names(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.record_copy([measurement(1, 1, [1], [1])])
    metrics.record_checkpoints([CheckpointMeasurement("dc1", "target", "g", "dc1.orders", 0, 1.0)])
    metrics.set_lag("dc1", "target", [Lag("orders", 0, 1, 1.0)])
    metrics.heartbeat_written("dc1", "target")
    metrics.copy_job_finished("dc1", "target", 1.0)
    metrics.retried("dc1", "target")
    metrics.set_copy_path("dc1", "target", CopyPath("record"))
    metrics.set_records_lost("dc1", "target", {("orders", 0): 5})
    metrics.feature_skipped("dc1", "target", "lease")
    metrics.set_metric_names_formats("dc1", "target", ["legacy", "new"])
    assert {name for name, _ in scrape(port)} == set(METRIC_NAMES)


def test_a_feature_an_acl_refused_is_a_gauge_and_a_note_on_health_that_keeps_the_flow_healthy(
    served: tuple[RunMetrics, int],
) -> None:
    metrics, port = served
    metrics.health.copying("dc1->target")
    metrics.feature_skipped("dc1", "target", "dense offset syncs")
    metrics.feature_skipped("dc1", "target", "lease")
    metrics.feature_skipped("dc1", "target", "lease")  # said again: still one feature
    samples = scrape(port)
    flow = {"source": "dc1", "target": "target"}
    assert value(samples, "mm2py_feature_skipped", feature="lease", **flow) == 1
    assert value(samples, "mm2py_feature_skipped", feature="dense offset syncs", **flow) == 1
    healthy, lines = metrics.health.health()
    assert healthy
    assert lines == ["flow dc1->target: copying; without dense offset syncs, lease (refused by an ACL)"]


def test_metric_names_formats_new_serves_kafka_4_3_names_with_connector_and_task_labels(
    served: tuple[RunMetrics, int],
) -> None:
    metrics, port = served
    metrics.set_metric_names_formats("dc1", "target", ["new"])
    metrics.record_copy([measurement(7, 70, [1], [2])])
    metrics.record_checkpoints([CheckpointMeasurement("dc1", "target", "g", "dc1.orders", 0, 3.0)])
    samples = scrape(port)
    plugin = {"connector": "MirrorSourceConnector", "task": "0", **P0}
    assert value(samples, "kafka_connect_plugins_record_count", **plugin) == 7
    assert value(samples, "kafka_connect_plugins_byte_count", **plugin) == 70
    checkpoint = {"connector": "MirrorCheckpointConnector", "task": "0", "source": "dc1", "target": "target"}
    labels = {**checkpoint, "group": "g", "topic": "dc1.orders", "partition": "0"}
    assert value(samples, "kafka_connect_plugins_checkpoint_latency_ms", **labels) == 3.0
    assert not any(name.startswith((SRC, CKP)) for name, _ in samples)  # new only: no legacy names


def test_legacy_and_new_serve_both_name_sets_per_flow_and_legacy_is_the_default(
    served: tuple[RunMetrics, int],
) -> None:
    metrics, port = served
    metrics.set_metric_names_formats("dc1", "target", ["legacy", "new"])
    metrics.record_copy([measurement(7, 70, [1], [2]), measurement(3, 30, [1], [2], source="dc2")])
    samples = scrape(port)
    assert value(samples, SRC + "record_count", **P0) == 7
    assert value(samples, "kafka_connect_plugins_record_count", connector="MirrorSourceConnector", task="0", **P0) == 7
    dc2 = {**P0, "source": "dc2"}
    assert value(samples, SRC + "record_count", **dc2) == 3  # dc2->target asked for nothing: legacy
    assert (
        "kafka_connect_plugins_record_count",
        tuple(sorted({"connector": "MirrorSourceConnector", "task": "0", **dc2}.items())),
    ) not in samples


def test_records_lost_is_a_counter_per_source_partition(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.set_records_lost("dc1", "target", {("orders", 0): 2500, ("orders", 1): 0})
    metrics.set_records_lost("dc1", "target", {("orders", 1): 2500})
    samples = scrape(port)
    flow = {"source": "dc1", "target": "target", "topic": "orders"}
    assert value(samples, "mm2py_records_lost_total", partition="0", **flow) == 2500
    assert value(samples, "mm2py_records_lost_total", partition="1", **flow) == 2500


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_ready_once_every_flow_copies_or_stands_by(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    for flow in ("dc1->target", "dc2->target"):
        metrics.health.starting(flow)
    status, body = probe(port, "/ready")
    assert status == 503 and "flow dc1->target: starting" in body
    metrics.health.copying("dc1->target")
    metrics.health.standing_by("dc2->target", "host-b:42")
    status, body = probe(port, "/ready")
    assert status == 200, body
    assert "flow dc2->target: standing by (the lease is held by host-b:42)" in body


def test_health_is_503_with_one_line_per_failing_flow_and_200_again_once_it_recovers(
    served: tuple[RunMetrics, int], clock: Clock
) -> None:
    metrics, port = served
    health = metrics.health
    health.heartbeats_expected("dc1", "target", 1.0)
    health.heartbeats_expected("dc2", "target", 1.0)
    for flow in ("dc1->target", "dc2->target"):
        health.starting(flow)
        health.copying(flow)
    metrics.heartbeat_written("dc1", "target")
    metrics.heartbeat_written("dc2", "target")
    assert probe(port, "/health")[0] == 200
    clock.now += 10
    metrics.heartbeat_written("dc2", "target")
    health.failing("dc2->target", "listing latest offsets of orders-0 on dc2 failed: no broker answered")
    clock.now += 6  # dc1's newest heartbeat is 16 s old: over the 15 s a 1 s interval allows
    status, body = probe(port, "/health")
    lines = body.splitlines()
    assert status == 503 and lines[0] == "unavailable" and len(lines) == 3, body
    assert lines[1] == "flow dc1->target: no heartbeat reached target for 16 s (one is written every 1 s)"
    assert lines[2].startswith("flow dc2->target: failing for 6 s, retrying: listing latest offsets")
    metrics.heartbeat_written("dc1", "target")
    health.succeeded("dc2->target")
    status, body = probe(port, "/health")
    assert status == 200 and body.splitlines() == ["ok", "flow dc1->target: copying", "flow dc2->target: copying"]


def test_probe_answers_pass_through_the_redactor(clock: Clock) -> None:
    metrics = RunMetrics(clock)
    metrics.health.starting("dc1->target")
    metrics.health.failing("dc1->target", "login failed for password hunter2")
    with metrics.serve("127.0.0.1", 0, lambda text: text.replace("hunter2", "****")) as endpoint:
        status, body = probe(endpoint.port, "/health")
    assert status == 503 and "hunter2" not in body and "****" in body


def test_the_endpoint_answers_while_a_long_operation_runs_and_shows_its_progress(
    served: tuple[RunMetrics, int],
) -> None:
    metrics, port = served
    proceed, done = threading.Event(), threading.Event()

    def long_copy() -> None:  # a driver thread: one range, then it blocks until told to go on
        metrics.record_copy([measurement(10, 100, [1], [1])])
        proceed.wait(30)
        metrics.record_copy([measurement(5, 50, [1], [1])])
        done.wait(30)

    worker = threading.Thread(target=long_copy, daemon=True)
    worker.start()
    try:
        assert poll(lambda: scrape(port).get((SRC + "record_count", tuple(sorted(P0.items())))) == 10)
        assert worker.is_alive()
        proceed.set()
        assert poll(lambda: scrape(port).get((SRC + "record_count", tuple(sorted(P0.items())))) == 15)
        assert worker.is_alive()
    finally:
        proceed.set()
        done.set()
        worker.join(10)


def poll(condition: object, timeout: float = 10.0) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def test_closing_the_endpoint_frees_its_port() -> None:
    endpoint = RunMetrics().serve("127.0.0.1", 0)
    port = endpoint.port
    scrape(port)
    endpoint.close()
    with socket.socket() as probe:
        # SO_REUSEADDR tolerates the closed scrape connection's TIME_WAIT, never a socket still listening.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        probe.listen()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_serving_on_a_port_in_use_raises_oserror() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            RunMetrics().serve("127.0.0.1", taken.getsockname()[1])


def test_range_measurer_from_batch_aggregates_equals_per_record_arithmetic() -> None:
    timestamps = [1000.0, 1003.0, 990.0, 1010.0, 1007.0]
    read_at = [1020.0, 1020.0, 1020.0, 1050.0, 1050.0]
    acked_at = 1100.0
    measurer = RangeMeasurer()
    for batch in ((0, 3), (3, 5)):
        ts = timestamps[batch[0] : batch[1]]
        measurer.read(read_at[batch[0]], len(ts), min(ts), max(ts), sum(ts), ts[-1], value_bytes=10 * len(ts))
    measurer.acknowledged(acked_at, 5, min(timestamps), max(timestamps), sum(timestamps), timestamps[-1])
    m = measurer.measurement("dc1", "target", "orders", "dc1.orders", 0)
    ages = [r - t for r, t in zip(read_at, timestamps, strict=True)]
    latencies = [acked_at - t for t in timestamps]
    assert (m.records, m.bytes) == (5, 50)
    assert (m.age_ms_min, m.age_ms_max, m.age_ms_sum, m.age_ms_last) == (min(ages), max(ages), sum(ages), ages[-1])
    assert (m.latency_ms_min, m.latency_ms_max, m.latency_ms_sum, m.latency_ms_last) == (
        min(latencies),
        max(latencies),
        sum(latencies),
        latencies[-1],
    )


def test_an_empty_range_measures_nan_stats_and_leaves_windows_untouched(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    empty = RangeMeasurer().measurement("dc1", "target", "orders", "dc1.orders", 0)
    assert empty.records == 0 and math.isnan(empty.age_ms_min)
    metrics.record_copy([empty])
    samples = scrape(port)
    assert value(samples, SRC + "record_count", **P0) == 0
    assert math.isnan(value(samples, SRC + "record_age_ms_avg", **P0))


def test_run_refuses_a_metrics_port_already_in_use_with_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "mm2.properties"
        config.write_text(
            "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\n"
            "a->b.enabled = true\nmm2py.metrics.host = 127.0.0.1\n"
        )
        result = subprocess.run(
            [*mm2py_argv(), "run", str(config), "--once", "--metrics-port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"mm2py: error: --metrics-port {port}: cannot serve /metrics on 127.0.0.1:{port}: "
    )


def test_run_refuses_a_metrics_port_key_out_of_range_naming_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\n"
        "a->b.enabled = true\nmm2py.metrics.port = 70000\n"
    )
    result = subprocess.run(
        [*mm2py_argv(), "run", str(config), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"mm2py: error: {config}:5 mm2py.metrics.port = 70000: is not a TCP port "
        "(allowed: 1 to 65535, or 0 for no endpoint)"
    ]


def test_health_names_the_task_control_endpoint_but_never_its_token(served: tuple[RunMetrics, int]) -> None:
    metrics, port = served
    metrics.health.starting("dc1->target")
    metrics.health.copying("dc1->target")
    metrics.health.task_control_at("http://driver:4711/report")
    status, body = probe(port, "/health")
    assert status == 200 and body.splitlines() == [
        "ok",
        "flow dc1->target: copying",
        "task control: http://driver:4711/report",
    ]

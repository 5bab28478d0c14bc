"""examples/monitoring only queries metrics that mm2py serves, so no alert or panel silently reads nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mm2py.executor.contract import CopyPath
from mm2py.metrics.measurement import CheckpointMeasurement, PartitionMeasurement
from mm2py.metrics.registry import METRIC_NAMES, RunMetrics
from mm2py.tools.lag import PartitionLag

MONITORING = Path(__file__).resolve().parents[2] / "examples" / "monitoring"
# Series Prometheus makes itself for every scrape target, not served by mm2py.
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords, labels or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery windows
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for match in re.finditer(r"(?<![\w.$])([A-Za-z_:][\w:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in PROMQL_WORDS:
            continue
        names.add(name)
    return names


def test_the_extractor_finds_metrics_and_skips_functions_labels_and_windows() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, source) (rate(a_bucket{source=~"$source", x="y"}[5m]))) '
        '> 2 and on (source) b_total offset 5m or vector(0) unless up{job="mm2py"} == bool 1e3'
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "up"}


def alert_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((MONITORING / "mm2py-alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard_exprs() -> Iterator[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        found = re.fullmatch(r"label_values\((.*),\s*\w+\)", text or "")
        if found:
            yield found.group(1)


def test_every_metric_in_the_alert_rules_is_served_by_mm2py() -> None:
    used = {name for rule in alert_rules() for name in metric_names(rule["expr"])}
    assert {
        "mm2py_replication_lag_seconds",
        "mm2py_heartbeat_age_seconds",
        "kafka_connect_mirror_mirrorsourceconnector_record_count",
    } <= used
    assert used - PROMETHEUS_OWN <= set(METRIC_NAMES), used - PROMETHEUS_OWN - set(METRIC_NAMES)


def test_every_metric_in_the_dashboard_is_served_by_mm2py() -> None:
    used = {name for expr in dashboard_exprs() for name in metric_names(expr)}
    assert len(used) >= 10
    assert used <= set(METRIC_NAMES), used - set(METRIC_NAMES)


def test_the_dashboard_shows_lag_heartbeats_and_latency() -> None:
    used = {name for expr in dashboard_exprs() for name in metric_names(expr)}
    assert {
        "mm2py_replication_lag_seconds",
        "mm2py_replication_lag_records",
        "mm2py_heartbeat_age_seconds",
        "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max",
        "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_max",
    } <= used


@pytest.mark.parametrize(
    "alert", ["Mm2pyReplicationLagHigh", "Mm2pyHeartbeatStale", "Mm2pyFlowStalled", "Mm2pyRecordsLost"]
)
def test_the_asked_for_alerts_exist_with_a_severity_and_a_summary(alert: str) -> None:
    rules = {rule["alert"]: rule for rule in alert_rules()}
    assert alert in rules
    assert rules[alert]["labels"]["severity"] in ("warning", "critical")
    assert rules[alert]["annotations"]["summary"]


def test_the_stalled_flow_alert_needs_both_no_copies_and_waiting_records() -> None:
    stalled = next(rule for rule in alert_rules() if rule["alert"] == "Mm2pyFlowStalled")
    assert metric_names(stalled["expr"]) == {
        "kafka_connect_mirror_mirrorsourceconnector_record_count",
        "kafka_connect_plugins_record_count",
        "mm2py_replication_lag_records",
    }
    assert re.search(r"\band\b", stalled["expr"])


def test_the_scrape_config_loads_the_rules_file_next_to_it() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    for rule_file in config["rule_files"]:
        assert (MONITORING / rule_file).is_file()
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["mm2py"]["metrics_path"] == "/metrics"


# -- both name sets of KIP-1280 -----------------------------------------------------------------------------

SELECTOR = re.compile(r"(?<![\w.$])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?(?!\s*\()")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def served_series(formats: list[str]) -> list[tuple[str, dict[str, str]]]:
    """Every series a run serves once it has copied, checkpointed, heartbeated and counted a loss, its MM2
    metrics under ``metric.names.formats`` = ``formats``."""
    metrics = RunMetrics()
    metrics.set_metric_names_formats("dc1", "target", formats)
    metrics.record_copy([PartitionMeasurement("dc1", "target", "orders", "dc1.orders", 0, 5, 50, *[1.0] * 8)])
    metrics.record_checkpoints([CheckpointMeasurement("dc1", "target", "billing", "dc1.orders", 0, 2.0)])
    metrics.set_lag(
        "dc1", "target", [PartitionLag("dc1->target", "dc1", "target", "orders", "dc1.orders", 0, 9, 4, 5, 1.0)]
    )
    metrics.set_records_lost("dc1", "target", {("orders", 0): 3})
    metrics.heartbeat_written("dc1", "target")
    metrics.copy_job_finished("dc1", "target", 1.0)
    metrics.retried("dc1", "target")
    metrics.set_copy_path("dc1", "target", CopyPath("batch"))
    return [
        (sample.name, dict(sample.labels))
        for family in text_string_to_metric_families(metrics.text())
        for sample in family.samples
    ]


def selects(matchers: str, labels: dict[str, str]) -> bool:
    for name, op, value in MATCHER.findall(matchers):
        value = value.replace("$source", ".*").replace("$target", ".*")
        have = labels.get(name, "")
        ok = {
            "=": have == value,
            "!=": have != value,
            "=~": re.fullmatch(value, have) is not None,
            "!~": re.fullmatch(value, have) is None,
        }[op]
        if not ok:
            return False
    return True


def shows_data(expr: str, series: list[tuple[str, dict[str, str]]]) -> bool:
    """Whether some selector of ``expr`` selects a served series (a sum, max or ``or`` of it then has data)."""
    text = re.sub(r"\[[^\]]*\]", "", expr)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)
    for name, matchers in SELECTOR.findall(text):
        if name.lower() in PROMQL_WORDS:
            continue
        if any(n == name and selects(matchers or "", labels) for n, labels in series):
            return True
    return False


@pytest.mark.parametrize("formats", [["legacy"], ["new"], ["legacy", "new"]])
def test_every_dashboard_panel_shows_data_whichever_metric_names_a_run_serves(formats: list[str]) -> None:
    series = served_series(formats)
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert shows_data(target["expr"], series), (formats, panel["title"], target["expr"])


def test_mm2_panels_count_a_partition_once_when_both_name_sets_are_served() -> None:
    """``legacy or on (source, target, topic, partition) new``: the new series of a partition the legacy one
    already shows is dropped, so sums do not double when a run serves both."""
    for expr in dashboard_exprs():
        if "kafka_connect_plugins_" in expr:
            assert re.search(
                r"kafka_connect_mirror_\w+\{[^}]*\} or on \(source, target, (group, )?topic, partition\) "
                r"kafka_connect_plugins_",
                expr,
            ), expr

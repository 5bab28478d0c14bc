"""`mm2py lag` without a broker: trends, thresholds, JSON rows, Prometheus text, tables and group lag."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from mm2py.cli import lag_view
from mm2py.config import load
from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.errors import UsageError
from mm2py.librdkafka.admin import TopicInfo
from mm2py.tools.lag import (
    GROWS,
    SAME,
    SHRINKS,
    GroupLag,
    LagCheck,
    LagSnapshot,
    PartitionLag,
    breaches,
    group_breaches,
    trend,
)
from mm2py.tools.liveness import FlowAges

HOT = PartitionLag("dc1->target", "dc1", "target", "orders", "dc1.orders", 0, 37, 30, 7, 5.5, lost=2500)
COLD = PartitionLag("dc1->target", "dc1", "target", "orders", "dc1.orders", 1, 30, 30, 0, 0.0)
OTHER = PartitionLag("dc2->target", "dc2", "target", "orders", "dc2.orders", 0, 12, 2, 10, 1.0)
AGES = {
    "dc1->target": FlowAges("dc1->target", "dc1", "target", 1.5, 42.0),
    "dc2->target": FlowAges("dc2->target", "dc2", "target", None, None),
}


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric name -> (labels, value) of every sample in Prometheus text."""
    result: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            result.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return result


def rendered(tables: list[Any]) -> str:
    console = Console(record=True, width=200)
    for table in tables:
        console.print(table)
    return re.sub("[┃│]", " ", console.export_text())  # cells apart by spaces only, for the regexes below


# ---- trend arrows ---------------------------------------------------------------------------------------


def test_trend_shows_growing_shrinking_and_unchanged_lag_since_the_previous_refresh() -> None:
    previous = {"a": 5, "b": 5, "c": 5}
    assert trend(previous, {"a": 7, "b": 3, "c": 5}) == {"a": GROWS, "b": SHRINKS, "c": SAME}
    assert (GROWS, SHRINKS, SAME) == ("↑", "↓", "=")


def test_trend_is_blank_on_the_first_refresh_and_for_a_new_partition() -> None:
    assert trend(None, {"a": 1}) == {"a": ""}
    assert trend({"a": 1}, {"a": 1, "new": 4}) == {"a": SAME, "new": ""}


def test_watch_trends_are_keyed_per_flow_so_two_sources_of_one_topic_stay_apart() -> None:
    first = LagSnapshot(0.0, (HOT, OTHER), AGES)
    moved = PartitionLag(**{**OTHER.to_json(), "lag_records": 3})
    second = LagSnapshot(1.0, (HOT, moved), AGES)
    arrows = trend(first.lags(), second.lags())
    assert arrows == {("dc1->target", "", "orders", 0): SAME, ("dc2->target", "", "orders", 0): SHRINKS}


# ---- thresholds -----------------------------------------------------------------------------------------


def test_partition_over_max_lag_records_breaches_but_equal_does_not() -> None:
    assert breaches([HOT, COLD], max_lag=6, max_lag_seconds=None) == [HOT]
    assert breaches([HOT, COLD], max_lag=7, max_lag_seconds=None) == []


def test_partition_over_max_lag_seconds_breaches() -> None:
    assert breaches([HOT, COLD, OTHER], max_lag=None, max_lag_seconds=5.0) == [HOT]


def test_partition_that_lost_more_than_max_lost_breaches_but_equal_does_not() -> None:
    assert breaches([HOT, COLD], max_lag=None, max_lag_seconds=None, max_lost=0) == [HOT]
    assert breaches([HOT, COLD], max_lag=None, max_lag_seconds=None, max_lost=2500) == []


def test_lost_records_are_a_column_totalled_per_flow_and_a_prometheus_counter() -> None:
    text = rendered(lag_view.partition_tables([HOT, COLD], AGES))
    assert re.search(r"lag s\s+lost", text) and re.search(r"total\s+67\s+60\s+7\s+5\.5\s+2500", text)
    metrics = samples(lag_view.prometheus_text(LagSnapshot(1_700_000_000.5, (HOT, COLD), AGES)))
    lost = {(s["topic"], s["partition"]): v for s, v in metrics["mm2py_records_lost_total"]}
    assert lost == {("orders", "0"): 2500, ("orders", "1"): 0}


def test_no_threshold_means_no_breach() -> None:
    assert breaches([HOT, OTHER], None, None) == []
    assert group_breaches([GroupLag("target", "g", "orders", 0, 0, 99, 99)], None) == []


def test_group_threshold_applies_to_group_lag() -> None:
    slow = GroupLag("target", "billing", "orders", 0, 10, 17, 7)
    fast = GroupLag("target", "billing", "orders", 1, 17, 17, 0)
    assert group_breaches([slow, fast], max_lag=6) == [slow]
    assert group_breaches([slow, fast], max_lag=7) == []


def test_over_threshold_lines_name_flow_topic_partition_and_lag(capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = LagSnapshot(0.0, (HOT,), AGES, over=(HOT, GroupLag("target", "billing", "orders", 2, 1, 9, 8)))
    assert lag_view.report_over(snapshot) is True
    stderr = capsys.readouterr().err
    assert "lag over threshold: flow=dc1->target topic=orders partition=0 lag_records=7 lag_seconds=5.5" in stderr
    assert "group lag over threshold: group=billing topic=orders partition=2 lag=8" in stderr
    assert lag_view.report_over(LagSnapshot(0.0, (HOT,), AGES)) is False


# ---- JSON -----------------------------------------------------------------------------------------------


def test_json_rows_keep_the_partition_keys_and_add_the_flow_ages_and_throughput_limit() -> None:
    rows = LagSnapshot(0.0, (HOT, OTHER), AGES, limits={"dc1->target": 5_000_000}).to_json()
    assert rows[0] == {
        "flow": "dc1->target",
        "source": "dc1",
        "target": "target",
        "topic": "orders",
        "remote_topic": "dc1.orders",
        "partition": 0,
        "source_end_offset": 37,
        "replicated_offset": 30,
        "lag_records": 7,
        "lag_seconds": 5.5,
        "lost": 2500,
        "heartbeat_age_seconds": 1.5,
        "checkpoint_age_seconds": 42.0,
        "throughput_limit_bytes_per_second": 5_000_000,
    }
    assert (rows[1]["heartbeat_age_seconds"], rows[1]["checkpoint_age_seconds"]) == (None, None)
    assert rows[1]["throughput_limit_bytes_per_second"] is None


def test_group_json_rows_are_kafka_consumer_groups_columns() -> None:
    snapshot = LagSnapshot(0.0, groups=(GroupLag("target", "billing", "orders", 0, 10, 17, 7),))
    assert snapshot.to_json() == [
        {"group": "billing", "topic": "orders", "partition": 0, "current_offset": 10, "log_end_offset": 17, "lag": 7}
    ]


# ---- Prometheus -----------------------------------------------------------------------------------------


def test_prometheus_text_has_partition_gauges_with_source_target_topic_partition_labels() -> None:
    metrics = samples(lag_view.prometheus_text(LagSnapshot(1_700_000_000.5, (HOT, COLD), AGES)))
    labels = {"source": "dc1", "target": "target", "topic": "orders", "partition": "0"}
    assert (labels, 7.0) in metrics["mm2py_replication_lag_records"]
    assert (labels, 5.5) in metrics["mm2py_replication_lag_seconds"]
    assert (labels, 37.0) in metrics["mm2py_source_end_offset"]
    assert (labels, 30.0) in metrics["mm2py_replicated_offset"]
    assert ({**labels, "partition": "1"}, 0.0) in metrics["mm2py_replication_lag_records"]
    assert len(metrics["mm2py_replication_lag_records"]) == 2


def test_prometheus_text_has_flow_ages_and_leaves_out_a_flow_without_heartbeat() -> None:
    metrics = samples(lag_view.prometheus_text(LagSnapshot(1_700_000_000.5, (HOT,), AGES)))
    assert metrics["mm2py_heartbeat_age_seconds"] == [({"source": "dc1", "target": "target"}, 1.5)]
    assert metrics["mm2py_checkpoint_age_seconds"] == [({"source": "dc1", "target": "target"}, 42.0)]
    assert metrics["mm2py_lag_check_timestamp_seconds"] == [({}, 1_700_000_000.5)]
    assert "mm2py_throughput_limit_bytes_per_second" not in metrics


def test_a_flow_s_throughput_limit_shows_under_its_table_and_as_a_gauge() -> None:
    snapshot = LagSnapshot(0.0, (HOT, OTHER), AGES, limits={"dc2->target": 2_500_000})
    text = rendered(lag_view.snapshot_tables(snapshot))
    assert text.count("throttled to") == 1
    assert text.index("dc2->target") < text.index("no heartbeat, no checkpoint; throttled to 2.50 MB/s")
    metrics = samples(lag_view.prometheus_text(snapshot))
    assert metrics["mm2py_throughput_limit_bytes_per_second"] == [({"source": "dc2", "target": "target"}, 2_500_000.0)]


def test_prometheus_text_for_groups_has_group_lag_and_check_time_only() -> None:
    snapshot = LagSnapshot(12.0, groups=(GroupLag("target", "billing", "orders", 3, 10, 17, 7),))
    metrics = samples(lag_view.prometheus_text(snapshot))
    assert metrics == {
        "mm2py_group_lag_records": [({"group": "billing", "topic": "orders", "partition": "3"}, 7.0)],
        "mm2py_lag_check_timestamp_seconds": [({}, 12.0)],
    }


# ---- tables and options ---------------------------------------------------------------------------------


def test_table_has_a_line_with_heartbeat_and_checkpoint_age_under_each_flow() -> None:
    text = rendered(lag_view.partition_tables([HOT, COLD, OTHER], AGES))
    assert "heartbeat 1.5 s ago, checkpoint 42.0 s ago" in text
    assert "no heartbeat, no checkpoint" in text
    assert text.index("dc1->target") < text.index("heartbeat 1.5 s ago") < text.index("dc2->target")


def test_watch_table_has_a_trend_column_and_plain_table_has_none() -> None:
    trends = {("dc1->target", "", "orders", 0): GROWS, ("dc1->target", "", "orders", 1): SAME}
    watched = rendered(lag_view.partition_tables([HOT, COLD], AGES, trends))
    assert "trend" in watched
    assert re.search(r"\b7\s+5\.5\s+2500\s+↑", watched) and re.search(r"\b0\s+0\.0\s+0\s+=", watched)
    assert "trend" not in rendered(lag_view.partition_tables([HOT, COLD], AGES))


def test_group_table_has_kafka_consumer_groups_columns() -> None:
    text = rendered(lag_view.group_tables([GroupLag("target", "billing", "orders", 0, 10, 17, 7)]))
    assert "consumer groups on target" in text
    assert re.search(r"group\s+topic\s+partition\s+current offset\s+log end offset\s+lag", text)
    assert re.search(r"billing\s+orders\s+0\s+10\s+17\s+7", text)


@pytest.mark.parametrize(
    ("as_json", "prometheus", "watch"), [(True, True, False), (True, False, True), (False, True, True)]
)
def test_json_prometheus_and_watch_exclude_each_other(as_json: bool, prometheus: bool, watch: bool) -> None:
    with pytest.raises(UsageError, match="exclude each other"):
        lag_view.output_format(as_json, prometheus, watch)


def test_output_format_follows_the_one_option_given() -> None:
    assert [
        lag_view.output_format(*flags)
        for flags in ((False, False, False), (True, False, False), (False, True, False), (False, False, True))
    ] == ["table", "json", "prometheus", "table"]


# ---- group lag against a fake target --------------------------------------------------------------------


class FakeAdmin:
    """Just the ClusterAdmin calls group lag makes, answering from dictionaries."""

    def __init__(
        self,
        topics: Mapping[str, int],
        commits: Mapping[str, Mapping[tuple[str, int], int]],
        ends: Mapping[tuple[str, int], int],
    ) -> None:
        self.topics, self.commits, self.ends = topics, commits, ends
        self.asked_ends: list[list[tuple[str, int]]] = []

    def list_topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(name, n) for name, n in self.topics.items()}

    def list_groups(self) -> list[str]:
        return sorted(self.commits)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return dict(self.commits[group])

    def list_offsets(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool = False
    ) -> dict[tuple[str, int], int]:
        assert which == "latest"
        self.asked_ends.append(partitions)
        return {tp: self.ends[tp] for tp in partitions}


@pytest.fixture
def flows(tmp_path: Path) -> list[FlowConfig]:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = dc1, target\ndc1.bootstrap.servers = localhost:1\n"
        "target.bootstrap.servers = localhost:2\ndc1->target.enabled = true\n"
        "topics = orders, payments\n"
    )
    return list(load(config).flows)


def fake_pool(source: FakeAdmin, target: FakeAdmin) -> AdminPool:
    return AdminPool(lambda alias, flow, side: source if alias == "dc1" else target)  # type: ignore[arg-type,return-value]


def test_groups_show_committed_offsets_on_remote_topics_with_lag_to_the_log_end(flows: list[FlowConfig]) -> None:
    source = FakeAdmin({"orders": 2, "payments": 1, "other": 1}, {}, {})
    target = FakeAdmin(
        {"dc1.orders": 2, "dc1.payments": 1, "local": 1},
        {
            "billing": {("dc1.orders", 0): 10, ("dc1.orders", 1): 17, ("local", 0): 3},
            "local-only": {("local", 0): 1},
            "audit": {("dc1.payments", 0): 4},
        },
        {("dc1.orders", 0): 17, ("dc1.orders", 1): 17, ("dc1.payments", 0): 4},
    )
    snapshot = LagCheck(flows, groups=True, max_lag=6, pool=fake_pool(source, target)).run()
    assert snapshot.groups == (
        GroupLag("target", "audit", "dc1.payments", 0, 4, 4, 0),
        GroupLag("target", "billing", "dc1.orders", 0, 10, 17, 7),
        GroupLag("target", "billing", "dc1.orders", 1, 17, 17, 0),
    )
    assert snapshot.over == (GroupLag("target", "billing", "dc1.orders", 0, 10, 17, 7),)
    assert ("local", 0) not in target.asked_ends[0]


def test_groups_follow_the_topics_option_on_source_topic_names(flows: list[FlowConfig]) -> None:
    source = FakeAdmin({"orders": 1, "payments": 1}, {}, {})
    target = FakeAdmin(
        {}, {"billing": {("dc1.orders", 0): 1, ("dc1.payments", 0): 2}}, {("dc1.orders", 0): 5, ("dc1.payments", 0): 2}
    )
    snapshot = LagCheck(flows, re.compile("payments"), groups=True, pool=fake_pool(source, target)).run()
    assert snapshot.to_json() == [
        {
            "group": "billing",
            "topic": "dc1.payments",
            "partition": 0,
            "current_offset": 2,
            "log_end_offset": 2,
            "lag": 0,
        }
    ]

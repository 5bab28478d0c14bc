"""Output of ``mm2py lag``: rich tables, JSON, Prometheus text, and the ``--watch`` refresh loop.

Nothing here computes lag (that is ``mm2py.tools.lag``); this module only decides how an answer looks. The
Prometheus text is made by prometheus-client, imported on use so that other commands start without it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from mm2py.cli.render import err, out, print_json, redactor
from mm2py.errors import KafkaOperationError, UsageError
from mm2py.tools.lag import GroupLag, LagCheck, LagSnapshot, PartitionLag, lag_key, trend
from mm2py.tools.liveness import FlowAges

OutputFormat = Literal["table", "json", "prometheus"]
Trends = Mapping[tuple[str, str, str, int], str]


def output_format(as_json: bool, prometheus: bool, watch: bool) -> OutputFormat:
    """The one output the options ask for; --json, --prometheus and --watch exclude each other."""
    if as_json + prometheus + watch > 1:
        raise UsageError("--json, --prometheus and --watch exclude each other")
    return "json" if as_json else "prometheus" if prometheus else "table"


def _age_text(what: str, age: float | None) -> str:
    return f"no {what}" if age is None else f"{what} {age:.1f} s ago"


def flow_caption(ages: FlowAges | None, limit: int | None = None) -> str:
    """The line under a flow's table: how long ago the flow last showed signs of life, and the throughput limit
    that holds it back, if one is set."""
    parts = []
    if ages is not None:
        parts.append(
            f"{_age_text('heartbeat', ages.heartbeat_age_seconds)}, "
            f"{_age_text('checkpoint', ages.checkpoint_age_seconds)}"
        )
    if limit:
        parts.append(f"throttled to {limit / 1e6:,.2f} MB/s (mm2py.throughput.max.bytes.per.second)")
    return "; ".join(parts)


def partition_tables(
    rows: Sequence[PartitionLag],
    ages: Mapping[str, FlowAges],
    trends: Trends | None = None,
    over: Iterable[PartitionLag | GroupLag] = (),
    limits: Mapping[str, int] | None = None,
) -> list[Table]:
    """One table per flow with a total row; a trend column only when ``trends`` is given (--watch)."""
    flows: dict[str, list[PartitionLag]] = {name: [] for name in ages}
    for row in rows:
        flows.setdefault(row.flow, []).append(row)
    hot = {lag_key(r) for r in over}
    tables = []
    for flow, items in flows.items():
        table = Table(
            title=flow,
            title_justify="left",
            caption=flow_caption(ages.get(flow), (limits or {}).get(flow)),
            caption_justify="left",
        )
        columns = ["topic", "remote topic", "partition", "end", "replicated", "lag", "lag s", "lost"]
        for column in columns + (["trend"] if trends is not None else []):
            table.add_column(column, justify="left" if "topic" in column else "right")
        for r in items:
            cells = [
                r.topic,
                r.remote_topic,
                str(r.partition),
                str(r.source_end_offset),
                str(r.replicated_offset),
                str(r.lag_records),
                f"{r.lag_seconds:.1f}",
                str(r.lost),
            ]
            if trends is not None:
                cells.append(trends.get(lag_key(r), ""))
            table.add_row(*cells, style="red" if lag_key(r) in hot else None)
        if not items:
            table.add_row("(no topic selected)", *[""] * (len(table.columns) - 1))
        else:
            totals = [
                "total",
                "",
                "",
                str(sum(r.source_end_offset for r in items)),
                str(sum(r.replicated_offset for r in items)),
                str(sum(r.lag_records for r in items)),
                f"{max((r.lag_seconds for r in items), default=0.0):.1f}",
                str(sum(r.lost for r in items)),
            ]
            table.add_row(*totals, *([""] if trends is not None else []), style="bold")
        tables.append(table)
    return tables


def group_tables(
    rows: Sequence[GroupLag], trends: Trends | None = None, over: Iterable[PartitionLag | GroupLag] = ()
) -> list[Table]:
    """kafka-consumer-groups --describe columns, one table per target cluster."""
    targets: dict[str, list[GroupLag]] = {}
    for row in rows:
        targets.setdefault(row.target, []).append(row)
    hot = {lag_key(r) for r in over}
    tables = []
    for target, items in targets.items():
        table = Table(title=f"consumer groups on {target}", title_justify="left")
        columns = ["group", "topic", "partition", "current offset", "log end offset", "lag"]
        for column in columns + (["trend"] if trends is not None else []):
            table.add_column(column, justify="left" if column in ("group", "topic") else "right")
        for r in items:
            cells = [r.group, r.topic, str(r.partition), str(r.current_offset), str(r.log_end_offset), str(r.lag)]
            if trends is not None:
                cells.append(trends.get(lag_key(r), ""))
            table.add_row(*cells, style="red" if lag_key(r) in hot else None)
        tables.append(table)
    return tables


def snapshot_tables(snapshot: LagSnapshot, trends: Trends | None = None) -> list[Table]:
    if snapshot.groups is not None:
        return group_tables(snapshot.groups, trends, snapshot.over)
    return partition_tables(snapshot.partitions, snapshot.ages, trends, snapshot.over, snapshot.limits)


def print_lag(snapshot: LagSnapshot) -> None:
    if snapshot.groups is not None and not snapshot.groups:
        out.print("no consumer group has committed offsets on the remote topics of the selected flows", markup=False)
    for table in snapshot_tables(snapshot):
        out.print(table)


def prometheus_text(snapshot: LagSnapshot) -> str:
    """Text exposition format: for a node_exporter textfile collector or a scrape through a file server."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

    registry = CollectorRegistry()
    if snapshot.groups is not None:
        group_lag = Gauge(
            "mm2py_group_lag_records",
            "Log end offset minus the committed offset of a consumer group on a remote topic of the target",
            ("group", "topic", "partition"),
            registry=registry,
        )
        for g in snapshot.groups:
            group_lag.labels(g.group, g.topic, str(g.partition)).set(g.lag)
    else:
        labels = ("source", "target", "topic", "partition")
        partition_gauges = [
            (
                Gauge("mm2py_replication_lag_records", "Source records not yet replicated", labels, registry=registry),
                "lag_records",
            ),
            (
                Gauge(
                    "mm2py_replication_lag_seconds",
                    "Age of the oldest source record not yet replicated",
                    labels,
                    registry=registry,
                ),
                "lag_seconds",
            ),
            (
                Gauge("mm2py_source_end_offset", "End offset of the source partition", labels, registry=registry),
                "source_end_offset",
            ),
            (
                Gauge(
                    "mm2py_replicated_offset",
                    "Next source offset to replicate (last replicated + 1)",
                    labels,
                    registry=registry,
                ),
                "replicated_offset",
            ),
        ]
        lost = Counter(
            "mm2py_records_lost",
            "Source records that left the source before they were replicated, counted since the flow began",
            labels,
            registry=registry,
        )
        for r in snapshot.partitions:
            for gauge, attribute in partition_gauges:
                gauge.labels(r.source, r.target, r.topic, str(r.partition)).set(getattr(r, attribute))
            lost.labels(r.source, r.target, r.topic, str(r.partition)).inc(r.lost)
        _flow_gauges(snapshot, registry)
    Gauge("mm2py_lag_check_timestamp_seconds", "When this lag check ran (Unix seconds)", registry=registry).set(
        snapshot.checked_at
    )
    return generate_latest(registry).decode("utf-8")


def _flow_gauges(snapshot: LagSnapshot, registry: Any) -> None:
    """Per flow: its liveness ages and its throughput limit, if set."""
    from prometheus_client import Gauge

    heartbeat = Gauge(
        "mm2py_heartbeat_age_seconds",
        "Seconds since the flow's newest heartbeat on the target",
        ("source", "target"),
        registry=registry,
    )
    checkpoint = Gauge(
        "mm2py_checkpoint_age_seconds",
        "Seconds since the newest record in the flow's checkpoints topic",
        ("source", "target"),
        registry=registry,
    )
    for ages in snapshot.ages.values():
        if ages.heartbeat_age_seconds is not None:
            heartbeat.labels(ages.source, ages.target).set(ages.heartbeat_age_seconds)
        if ages.checkpoint_age_seconds is not None:
            checkpoint.labels(ages.source, ages.target).set(ages.checkpoint_age_seconds)
    limit = Gauge(
        "mm2py_throughput_limit_bytes_per_second",
        "The flow's mm2py.throughput.max.bytes.per.second (flows with a limit only)",
        ("source", "target"),
        registry=registry,
    )
    for flow, bytes_per_s in snapshot.limits.items():
        source, target = flow.split("->", 1)  # aliases hold no "->": MM2 splits A->B.enabled on it
        limit.labels(source, target).set(bytes_per_s)


def show(snapshot: LagSnapshot, fmt: OutputFormat) -> None:
    if fmt == "json":
        print_json(snapshot.to_json())
    elif fmt == "prometheus":
        sys.stdout.write(redactor.redact(prometheus_text(snapshot)))
        sys.stdout.flush()
    else:
        print_lag(snapshot)


def report_over(snapshot: LagSnapshot) -> bool:
    """Name every row over a threshold on stderr; True when there is one (exit 1)."""
    for row in snapshot.over:
        if isinstance(row, GroupLag):
            line = (
                f"group lag over threshold: group={row.group} topic={row.topic} partition={row.partition} lag={row.lag}"
            )
        else:
            line = (
                f"lag over threshold: flow={row.flow} topic={row.topic} partition={row.partition} "
                f"lag_records={row.lag_records} lag_seconds={row.lag_seconds:.1f} lost={row.lost}"
            )
        err.print(line, markup=False)
    return bool(snapshot.over)


def _footer(snapshot: LagSnapshot, interval_s: float) -> Text:
    checked = time.strftime("%H:%M:%S", time.localtime(snapshot.checked_at))
    text = Text(
        f"checked at {checked}, every {interval_s:g} s; ↑ grew, ↓ shrank, = unchanged since the "
        "previous refresh; Ctrl-C to stop"
    )
    if snapshot.over:
        text.append(f"\n{len(snapshot.over)} row(s) over threshold", style="bold red")
    return text


def watch(check: LagCheck, interval_s: float) -> None:
    """Ask ``check`` every ``interval_s`` seconds until Ctrl-C; in place on a terminal, appended otherwise.

    A Kafka failure is shown under the last good answer and the next refresh tries again: a watch is for
    riding out an incident, not for ending at its first error.
    """
    previous: dict[tuple[str, str, str, int], int] | None = None
    last: list[RenderableType] = []
    live = Live(console=out, auto_refresh=False, redirect_stderr=False) if out.is_terminal else None
    context: AbstractContextManager[object] = live if live is not None else nullcontext()
    try:
        with context:
            while True:
                started = time.monotonic()
                try:
                    snapshot = check.run()
                    lags = snapshot.lags()
                    last = [*snapshot_tables(snapshot, trend(previous, lags)), _footer(snapshot, interval_s)]
                    previous = lags
                    news: list[RenderableType] = last
                except KafkaOperationError as exc:
                    news = [Text(f"error: {redactor.redact(str(exc))}; retrying", style="red")]
                if live is not None:
                    live.update(Group(*(last if news is last else [*last, *news])), refresh=True)
                else:
                    out.print(Group(*news), "")
                time.sleep(max(0.0, started + interval_s - time.monotonic()))
    except KeyboardInterrupt:
        return

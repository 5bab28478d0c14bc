"""Rendering of ``mm2py verify`` results: a table per flow on stdout, one line per problem on stderr."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from mm2py.cli.render import err, out, redactor
from mm2py.tools.verify import PartitionVerification

_STYLE = {"ok": "green", "mismatch": "red", "not replicated": "yellow"}


def _status(row: PartitionVerification) -> str:
    if row.status != "ok" or row.method in ("offset-syncs", "none"):
        return row.status
    return "ok (by content)"  # some or all records had no dense offset syncs: see the note


def print_verification(rows: Sequence[PartitionVerification]) -> None:
    flows: dict[str, list[PartitionVerification]] = {}
    for row in rows:
        flows.setdefault(row.flow, []).append(row)
    for flow, items in flows.items():
        table = Table(title=flow, title_justify="left")
        for column in (
            "topic",
            "partition",
            "upstream offsets",
            "source records",
            "target records",
            "status",
            "first problem",
        ):
            table.add_column(
                column, justify="right" if column in ("partition", "source records", "target records") else "left"
            )
        for r in items:
            span = "-" if r.first_offset is None else f"{r.first_offset}..{r.last_offset}"
            first = r.problems[0].describe() if r.problems else ""
            table.add_row(
                r.topic,
                str(r.partition),
                span,
                str(r.source_records),
                str(r.target_records),
                f"[{_STYLE[r.status]}]{_status(r)}[/]",
                first,
            )
        bad = sum(r.status == "mismatch" for r in items)
        table.add_row(
            "total",
            "",
            "",
            str(sum(r.source_records for r in items)),
            str(sum(r.target_records for r in items)),
            f"[red]{bad} mismatched[/]" if bad else "[green]ok[/]",
            "",
            style="bold",
        )
        out.print(table)
        for r in items:
            if r.note:
                out.print(f"note: {r.topic} partition {r.partition}: {r.note}", markup=False)


def print_problems(rows: Sequence[PartitionVerification]) -> None:
    for row in rows:
        for line in row.problem_lines():
            err.print(redactor.redact(line), markup=False)

"""``mm2py failback`` on the CLI side: its options, the hand-off to the library, and its rendering (the report for
people on stdout, a dry run's refusals on stderr, or one JSON document). Nothing here computes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from mm2py.cli.render import err, out, print_json

if TYPE_CHECKING:  # the command's own modules load when it runs, not with every other command
    from mm2py.config import LoadedConfig
    from mm2py.tools.cutover.failback import FailbackOptions
    from mm2py.tools.cutover.tail import FailbackReport

FlowOption = Annotated[str, typer.Option("--flow", help="The flow that was cut over, SOURCE->TARGET")]
TailTopicOption = Annotated[
    str | None,
    typer.Option(
        "--tail-topic", help="Side topic on the target for the source's tail (default <remote>.failback-tail)"
    ),
]
LeaveTailOption = Annotated[
    bool, typer.Option("--leave-tail", help="Name the source's tail in the report; copy nothing")
]


def options(groups: re.Pattern[str] | None, tail_topic: str | None, leave_tail: bool, dry_run: bool) -> FailbackOptions:
    from mm2py.tools.cutover.failback import FailbackOptions

    return FailbackOptions(groups, tail_topic, leave_tail, dry_run)


def command(loaded: LoadedConfig, flow_text: str, options: FailbackOptions, *, as_json: bool) -> bool:
    """Hand the failback to the library and print what it answered; False when a dry run found a check that
    would refuse (exit 1)."""
    from mm2py.config import flow_and_reverse
    from mm2py.tools.cutover.failback import fail_back

    flow, reverse = flow_and_reverse(loaded, flow_text)
    report = fail_back(flow, reverse, options)
    if as_json:
        print_json(report.to_json())
    else:
        _print_text(report)
    for refusal in report.refusals:
        err.print(f"would refuse: {refusal}", markup=False)
    return not report.refusals


def _print_text(report: FailbackReport) -> None:
    src, tgt = report.source, report.target
    dry = " (dry run: nothing changed)" if report.dry_run else ""
    out.print(f"failback {report.flow}{dry}: {src} is back; {report.reverse} starts at the cut-over", markup=False)
    if report.mark is not None:
        out.print(f"mark: {report.flow} {report.mark.describe()}", markup=False)
    table = Table(title=f"divergent tail: records on {src} that {tgt} never got", title_justify="left")
    for column in ("topic", "partition", "from", "to", "count", "side topic"):
        table.add_column(column, justify="left" if "topic" in column else "right")
    for t in report.tails:
        note = f" (deleted on the source: {t.deleted})" if t.deleted else ""
        note += " (the source ends before the mark: re-created or truncated)" if t.truncated else ""
        table.add_row(t.topic, str(t.partition), str(t.from_offset), str(t.to_offset), f"{t.count}{note}", t.side_topic)
    out.print(table)
    out.print(f"tail: {report.tail_records()} record(s) over {len(report.tails)} partition(s)", markup=False)
    if report.leave_tail:
        out.print(f"tail left on {src}: nothing copied (--leave-tail)", markup=False)
    for side in sorted({c.side_topic for c in report.copies}):
        copies = [c for c in report.copies if c.side_topic == side]
        out.print(
            f"preserved: {sum(c.records for c in copies)} record(s) in {side} on {tgt} "
            f"({sum(c.copied for c in copies)} copied now, {sum(c.kept_before for c in copies)} kept before; "
            f"end offset and last record checked on {len(copies)} partition(s))",
            markup=False,
        )
    _print_starts(report)
    _print_groups(report)
    if report.mark is not None and report.mark.denied_writes:
        verb = "would delete" if report.dry_run else "deleted"
        topics = ", ".join(a.topic for a in report.mark.denied_writes)
        out.print(f"writes: {verb} the DENY WRITE ACLs of the cut-over on {src}'s topic(s) {topics}", markup=False)
    if report.cleared:
        out.print(
            f"cleared: the cut-over mark of {report.flow}; keep {report.flow} disabled while {tgt} is primary "
            f"(`mm2py cutover FILE --flow {report.reverse}` returns the applications)",
            markup=False,
        )


def _print_starts(report: FailbackReport) -> None:
    verb = "writes" if report.dry_run else "wrote"
    if not report.starts:
        out.print(f"reverse start: {report.reverse} replicates no topic of {report.target} yet", markup=False)
        return
    table = Table(title=f"reverse start: where {report.reverse} begins ({verb} its progress)", title_justify="left")
    for column in ("topic", "partition", "first offset", "why"):
        table.add_column(column, justify="left" if column in ("topic", "why") else "right")
    for s in report.starts:
        table.add_row(s.topic, str(s.partition), str(s.offset), s.reason)
    out.print(table)
    if not report.dry_run:
        out.print(f"reverse start: {report.starts_written} partition(s) written on {report.source}", markup=False)


def _print_groups(report: FailbackReport) -> None:
    src, tgt = report.source, report.target
    if not report.groups:
        out.print(f"groups: none with offsets on {tgt} on the flow's remote topics", markup=False)
        return
    table = Table(title=f"groups on {tgt}, where each would stand on {src}", title_justify="left")
    for column in ("group", "topic", "partition", f"on {tgt}", f"on {src}", "behind", "tail unseen"):
        table.add_column(column, justify="left" if column in ("group", "topic") else "right")
    for g in report.groups:
        on_source = "-" if g.source_offset is None else str(g.source_offset)
        table.add_row(
            g.group, g.remote_topic, str(g.partition), str(g.target_offset), on_source, str(g.behind), str(g.tail)
        )
    out.print(table)

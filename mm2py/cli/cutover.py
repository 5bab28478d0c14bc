"""``mm2py cutover`` on the CLI side: its options, the hook that hands it the engine's copy, and its rendering
(the report for people on stdout, a dry run's refusals on stderr, or one JSON document). Nothing here computes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from mm2py.cli.render import err, out, print_json

if TYPE_CHECKING:  # the command's own modules load when it runs, not with every other command
    from mm2py.config import LoadedConfig
    from mm2py.config.flow import FlowConfig
    from mm2py.control.cutover_mark import CutoverMark
    from mm2py.tools.cutover import CutoverOptions, CutoverReport

FlowOption = Annotated[str, typer.Option("--flow", help="The flow to move, SOURCE->TARGET")]
FlowsOption = Annotated[
    str,
    typer.Option(
        "--flow",
        help="The flow to switch over, SOURCE->TARGET; flows merged into one target together: A->T,C->T",
    ),
]
GroupsOption = Annotated[
    str | None, typer.Option("--groups", help="Groups to move (regex; default: the flow's groups)")
]
QuietOption = Annotated[
    float, typer.Option("--quiet-seconds", min=0, help="Seconds the source's end offsets must stand still")
]
QuietTimeoutOption = Annotated[
    float, typer.Option("--quiet-timeout", min=0, help="Give up (exit 1) if they are not still by then")
]
AllowMembersOption = Annotated[
    bool, typer.Option("--allow-members", help="Do not refuse groups that still have members")
]
HandoverTimeoutOption = Annotated[
    float,
    typer.Option("--handover-timeout", min=0, help="Seconds a run holding the flow has to hand it over (else exit 1)"),
]
DenyWritesOption = Annotated[
    bool,
    typer.Option(
        "--deny-writes", help="Make the source refuse writes to the flow's topics (DENY ACLs; failback removes them)"
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Do every check and report; change nothing")]
ResetOption = Annotated[
    bool, typer.Option("--reset", help="Clear the flow's cut-over mark, so that run replicates it again")
]


def options(
    groups: re.Pattern[str] | None,
    quiet_s: float,
    quiet_timeout_s: float,
    allow_members: bool,
    dry_run: bool,
    handover_timeout_s: float,
    deny_writes: bool,
) -> CutoverOptions:
    from mm2py.tools.cutover import CutoverOptions

    return CutoverOptions(groups, quiet_s, quiet_timeout_s, allow_members, dry_run, handover_timeout_s, deny_writes)


def command(loaded: LoadedConfig, file: str, options: CutoverOptions, *, reset: bool, as_json: bool) -> bool:
    """Hand the command to the library (a cut-over, or ``--reset``) and print what it answered; False when a
    dry run found a check that would refuse (exit 1)."""
    from mm2py.tools.cutover import cut_over, reset_mark

    if reset:
        for flow in loaded.flows:
            print_reset(flow.name, reset_mark(flow, dry_run=options.dry_run), options.dry_run, as_json)
        return True
    report = cut_over(loaded.flows, options, lambda: engine_copy(loaded), reverses=reverse_flows(loaded))
    print_report(report, file, as_json)
    return not report.refusals


def reverse_flows(loaded: LoadedConfig) -> dict[str, FlowConfig]:
    """Each flow's reverse (enabled or not: after a failback A->B is kept off), for the groups that go home."""
    from mm2py.config.flow import build_flow_config
    from mm2py.config.mirror_maker import Flow

    return {f.name: build_flow_config(loaded.mm, Flow(f.target, f.source)) for f in loaded.flows}


def engine_copy(loaded: LoadedConfig) -> list[str]:
    """The copy to lag 0: ``run --once``'s engine entry, imported only when a cut-over copies (a dry run and
    ``--reset`` start without a JVM)."""
    from mm2py.engine.run import copy_once

    return copy_once(loaded)


def _count(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def print_report(report: CutoverReport, file: str, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
    else:
        _print_text(report, file)
    for refusal in report.refusals:
        err.print(f"would refuse: {refusal}", markup=False)


def _print_text(report: CutoverReport, file: str) -> None:
    src, tgt = report.source, report.target
    out.print(f"cutover {report.flow}{' (dry run: nothing changed)' if report.dry_run else ''}", markup=False)
    for handover in report.handovers:
        out.print(f"handover: {handover}", markup=False)
    for cluster, denied in report.denied.items():
        verb = "would deny" if report.dry_run else "denied"
        topics = ", ".join(a.topic for a in denied) or "none (each has its DENY already)"
        out.print(
            f"writes: {verb} WRITE on {cluster}'s topic(s) {topics} for User:* (DENY ACLs; super users are not "
            "bound by ACLs; failback deletes them)",
            markup=False,
        )
    if report.quiet_waited_s is not None:
        out.print(f"quiet: {src}'s end offsets stood still (waited {report.quiet_waited_s:g} s)", markup=False)
    copy = "copied to lag 0" if report.copied else "current lag, nothing copied"
    for t in report.topics:
        held = f"{tgt} holds all of {t.source}" if t.holds_all else f"{tgt} lacks {t.behind} record(s) of {t.source}"
        out.print(
            f"topic {t.topic} -> {t.remote_topic}: {t.partitions} partition(s), {held} ({copy})",
            markup=False,
        )
    if report.moves:
        table = Table(title=f"groups, offset on {src} -> offset on {tgt}", title_justify="left")
        for column in (
            "group",
            "from",
            "topic",
            "partition",
            "on source",
            f"on {tgt}",
            "method",
            "read again",
            "skipped",
        ):
            table.add_column(column, justify="left" if column in ("group", "from", "topic", "method") else "right")
        for m in report.moves:
            table.add_row(
                m.group,
                m.source,
                m.remote_topic,
                str(m.partition),
                str(m.source_offset),
                "-" if m.target_offset is None else str(m.target_offset),
                m.method + (f" ({m.reason})" if m.reason else ""),
                _count(m.read_again),
                _count(m.skipped),
            )
        out.print(table)
    else:
        out.print(f"groups: none with committed offsets on the flow's topics on {src}", markup=False)
    totals = report.totals()
    out.print(
        f"totals: {len(report.groups)} group(s), read again {_count(totals['read_again'])}, "
        f"skipped {_count(totals['skipped'])}",
        markup=False,
    )
    for group, count in sorted(report.committed.items()):
        out.print(f"committed: group {group}, {count} partition(s) on {tgt}", markup=False)
    for mark in report.marks if report.marked else []:
        out.print(
            f"marked: {mark.flow} {mark.describe()}; `mm2py run` refuses it until "
            f"`mm2py cutover {file} --flow {mark.flow} --reset`",
            markup=False,
        )


def print_reset(flow: str, mark: CutoverMark | None, dry_run: bool, as_json: bool) -> None:
    if as_json:
        print_json({"flow": flow, "dry_run": dry_run, "cleared": mark.to_json() if mark is not None else None})
    elif mark is None:
        out.print(f"flow {flow} is not marked as cut over: nothing to clear", markup=False)
    else:
        verb = "would clear" if dry_run else "cleared"
        out.print(
            f"{verb} the cut-over mark of {flow} ({mark.describe()}); `mm2py run` replicates it again", markup=False
        )

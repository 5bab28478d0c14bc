"""``mm2py failover`` on the CLI side: hands the command to the library and renders its report (the recovery
point and the groups' landings for people on stdout, a dry run's refusals on stderr, or one JSON document).
Nothing here computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from mm2py.cli.cutover import print_reset
from mm2py.cli.render import err, out, print_json
from mm2py.errors import UsageError

if TYPE_CHECKING:  # the command's own modules load when it runs, not with every other command
    from mm2py.config import LoadedConfig
    from mm2py.tools.cutover.failover import FailoverOptions
    from mm2py.tools.cutover.recovery import FailoverReport


def command(loaded: LoadedConfig, file: str, options: FailoverOptions, *, reset: bool, as_json: bool) -> bool:
    """A failover (or ``--reset``, the same as ``cutover --reset``); False when a dry run found a check that
    would refuse (exit 1)."""
    from mm2py.tools.cutover import reset_mark
    from mm2py.tools.cutover.failover import fail_over

    if len(loaded.flows) > 1:
        raise UsageError(f"--flow {','.join(f.name for f in loaded.flows)}: failover takes one flow at a time")
    flow = loaded.flows[0]
    if reset:
        print_reset(flow.name, reset_mark(flow, dry_run=options.dry_run), options.dry_run, as_json)
        return True
    report = fail_over(flow, options)
    if as_json:
        print_json(report.to_json())
    else:
        _print_text(report, file)
    for refusal in report.refusals:
        err.print(f"would refuse: {refusal}", markup=False)
    return not report.refusals


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _print_text(report: FailoverReport, file: str) -> None:
    src, tgt = report.source, report.target
    dry = " (dry run: nothing changed)" if report.dry_run else ""
    out.print(f"failover {report.flow}{dry}: {src} not contacted; everything below is what {tgt} holds", markup=False)
    table = Table(
        title=f"recovery point: records of {src} that {tgt} lacks, at least (a lower bound)", title_justify="left"
    )
    for column in ("topic", "remote topic", "partition", f"{tgt} holds to", f"{src} end listed", "not replicated ≥"):
        table.add_column(column, justify="left" if "topic" in column else "right")
    table.add_column("newest on " + tgt, justify="right")
    for p in report.points:
        age = None if p.newest_age_s is None else f"{p.newest_age_s:g} s old"
        table.add_row(
            p.topic,
            p.remote_topic,
            str(p.partition),
            _text(p.replicated_to) + (f" (+{p.beyond_progress} unrecorded)" if p.beyond_progress else ""),
            _text(p.listed_end),
            str(p.not_replicated),
            _text(age),
        )
    out.print(table)
    newest = report.newest_age_s()
    out.print(
        f"not replicated: at least {report.not_replicated()} record(s) over {len(report.points)} partition(s) "
        f"(what {src} held when a run last listed its ends, beyond what {tgt} holds; records written after that "
        f"listing are not counted); newest replicated record: {_text(newest)} s old",
        markup=False,
    )
    if not report.syncs_read:
        out.print(f"syncs: on {src} (offset-syncs.topic.location = source): groups land where their checkpoints say")
    if report.landings:
        table = Table(title=f"groups, from the latest checkpoints on {tgt}", title_justify="left")
        columns = ("group", "topic", "partition", f"checkpoint on {src}", "checkpoint says", "committed", "method")
        for column in (*columns, "checkpoint age"):
            table.add_column(column, justify="left" if column in ("group", "topic", "method") else "right")
        for g in report.landings:
            table.add_row(
                g.group,
                g.remote_topic,
                str(g.partition),
                str(g.checkpoint_upstream),
                str(g.checkpoint_downstream),
                str(g.offset),
                g.method,
                f"{g.checkpoint_age_s:g} s",
            )
        out.print(table)
    else:
        out.print(f"groups: no checkpoint on {tgt} for a group that moves", markup=False)
    for group, count in sorted(report.committed.items()):
        out.print(f"committed: group {group}, {count} partition(s) on {tgt}", markup=False)
    if report.mark is not None and not report.dry_run:
        out.print(
            f"marked: {report.flow} {report.mark.describe()}; `mm2py run` refuses it until "
            f"`mm2py cutover {file} --flow {report.flow} --reset`",
            markup=False,
        )

"""The cut-over commands' options and their calls (``cutover``, ``failover``, ``failback``), registered on the app
by :mod:`mm2py.cli.app`, whose ``main()`` stays their error boundary."""

from __future__ import annotations

from typing import Annotated

import typer

from mm2py.cli import cutover, failback, failover
from mm2py.cli.loading import load_config
from mm2py.cli.options import ConfigFile, regex
from mm2py.errors import EXIT_CHECK_FAILED

JsonReport = Annotated[bool, typer.Option("--json", help="Print the report as one JSON document")]


def cutover_command(
    file: ConfigFile,
    flow: cutover.FlowsOption,
    groups: cutover.GroupsOption = None,
    quiet_seconds: cutover.QuietOption = 10.0,
    quiet_timeout: cutover.QuietTimeoutOption = 300.0,
    allow_members: cutover.AllowMembersOption = False,
    dry_run: cutover.DryRunOption = False,
    as_json: JsonReport = False,
    reset: cutover.ResetOption = False,
    handover_timeout: cutover.HandoverTimeoutOption = 60.0,
    deny_writes: cutover.DenyWritesOption = False,
) -> None:
    """Switch a flow's groups from its source to its target: a run holding the flow hands it over, producers quiet,
    copy to lag 0, offsets translated exactly and committed on the target, the flow marked (exit 1: refused)."""
    options = cutover.options(
        regex("--groups", groups), quiet_seconds, quiet_timeout, allow_members, dry_run, handover_timeout, deny_writes
    )
    if not cutover.command(load_config(file, flow), str(file), options, reset=reset, as_json=as_json):
        raise typer.Exit(EXIT_CHECK_FAILED)


def failover_command(
    file: ConfigFile,
    flow: cutover.FlowOption,
    groups: cutover.GroupsOption = None,
    allow_members: cutover.AllowMembersOption = False,
    dry_run: cutover.DryRunOption = False,
    as_json: JsonReport = False,
    reset: cutover.ResetOption = False,
) -> None:
    """When the source is lost: move the flow's groups to the target from what it holds alone, report its lack."""
    from mm2py.tools.cutover.failover import FailoverOptions

    options = FailoverOptions(regex("--groups", groups), allow_members, dry_run)
    if not failover.command(load_config(file, flow), str(file), options, reset=reset, as_json=as_json):
        raise typer.Exit(EXIT_CHECK_FAILED)


def failback_command(
    file: ConfigFile,
    flow: failback.FlowOption,
    groups: cutover.GroupsOption = None,
    tail_topic: failback.TailTopicOption = None,
    leave_tail: failback.LeaveTailOption = False,
    dry_run: cutover.DryRunOption = False,
    as_json: JsonReport = False,
) -> None:
    """After a cutover or failover of A->B, A back: keep A's tail on B, start B->A, clear the mark (exit 1: refused)."""
    options = failback.options(regex("--groups", groups), tail_topic, leave_tail, dry_run)
    if not failback.command(load_config(file, None, select=False), flow, options, as_json=as_json):
        raise typer.Exit(EXIT_CHECK_FAILED)

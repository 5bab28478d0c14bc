"""Rendering of results for people (rich) and for scripts (JSON). Nothing here computes."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from mm2py.config.problems import Problem
from mm2py.control.checkpoints import GroupOffset
from mm2py.control.plan import ReplicationPlan
from mm2py.control.rights import FeatureRight
from mm2py.secrets import Redactor

out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:
    # A cron log or a pipe: room for every column of a table row, where rich's default 80 columns would cut
    # topic names short (lag's table has nine columns).
    out.width = max(out.width, 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class CommandRedactor(Redactor):
    """The redactor of one command run: learns the secrets of each file the command reads."""

    def __init__(self) -> None:
        super().__init__()
        self._learned: list[Redactor] = []

    def learn(self, other: Redactor) -> None:
        self._learned.append(other)

    def redact(self, text: str) -> str:
        text = super().redact(text)
        for other in self._learned:
            text = other.redact(text)
        return text


# Everything printed as text, and every log line, passes through it.
redactor = CommandRedactor()


def print_json(data: Any) -> None:
    sys.stdout.write(redactor.redact(json.dumps(data, indent=2)) + "\n")
    sys.stdout.flush()


def problem_line(problem: Problem) -> str:
    return f"{problem.severity}: {problem.render()}"


def print_problems(problems: Sequence[Problem], console: Console = out) -> None:
    for problem in problems:
        style = "red" if problem.severity == "error" else "yellow"
        console.print(redactor.redact(problem_line(problem)), style=style, markup=False)


def print_warnings(problems: Sequence[Problem]) -> None:
    print_problems(problems, err)


def print_plan(plan: ReplicationPlan, rights: Mapping[str, Sequence[FeatureRight]] | None = None) -> None:
    for flow in plan.flows:
        title = f"{flow.name}  path={flow.copy_path.describe()}"
        table = Table(title=title, title_justify="left", show_lines=False)
        table.add_column("source topic")
        table.add_column("remote topic")
        table.add_column("partitions", justify="right")
        table.add_column("action")
        table.add_column("note")
        for t in flow.topics:
            note = f"merged from {', '.join(t.merged_from)}" if t.merged_from else ""
            if t.action != "up to date" or t.target_partitions != t.partitions:
                note = "; ".join(x for x in (note, f"remote gets {t.target_partitions} partitions") if x)
            if t.configs_not_synced:
                left_out = ", ".join(f"{k}={v}" for k, v in t.configs_not_synced)
                note = "; ".join(x for x in (note, f"configs not synced: {left_out}") if x)
            table.add_row(t.topic, t.remote_topic, str(t.partitions), t.action, note)
        if not flow.topics:
            table.add_row("(no topic selected)", "", "", "", "")
        out.print(table)
        print_rights(flow.name, (rights or {}).get(flow.name, ()))
    for merge in plan.merges:
        out.print(
            ("warning: " if merge.conflict else "note: ") + merge.describe(),
            style="yellow" if merge.conflict else None,
            markup=False,
        )


def print_plan_json(plan: ReplicationPlan, rights: Mapping[str, Sequence[FeatureRight]]) -> None:
    print_json({**plan.to_json(), "rights": {name: [r.to_json() for r in rs] for name, rs in rights.items()}})


def print_rights(flow: str, rights: Sequence[FeatureRight]) -> None:
    """What the flow's principals may run, by the brokers' answers (``mm2py.control.rights``)."""
    for right in rights:
        if right.allowed is None:
            verdict = "not known before it is tried (a topic to create, or a broker that does not say)"
        else:
            verdict = "yes" if right.allowed else f"no: lacks {right.missing}"
        out.print(f"{flow} {right.feature}: {verdict}", markup=False)


def print_csv(rows: Sequence[GroupOffset]) -> None:
    """topic,partition,offset lines: the file kafka-consumer-groups --reset-offsets --from-file reads."""
    for r in rows:
        if r.translation.offset is not None:
            sys.stdout.write(f"{r.remote_topic},{r.partition},{r.translation.offset}\n")
    sys.stdout.flush()


def print_translation(group: str, flow: str, rows: Sequence[GroupOffset]) -> None:
    table = Table(title=f"group {group}, {flow}", title_justify="left")
    for column in ("topic", "partition", "upstream offset", "offset", "method", "note"):
        table.add_column(column, justify="right" if "offset" in column or column == "partition" else "left")
    for r in rows:
        t = r.translation
        table.add_row(
            r.remote_topic,
            str(r.partition),
            str(r.upstream_offset),
            "-" if t.offset is None else str(t.offset),
            t.method,
            t.reason,
        )
    out.print(table)

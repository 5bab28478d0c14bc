"""Configuration problems: one line each, naming file:line, key, value and what is allowed.

Validation collects every problem at once; commands that act (plan, run) stop at the first error. Both use
this one type, so a message reads the same wherever it is shown. Values are masked before they get here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from mm2py.errors import ConfigError
from mm2py.secrets import mask_value

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    severity: Severity
    source: str
    line: int | None
    key: str | None
    value: str | None
    reason: str
    allowed: str | None = None

    @classmethod
    def make(
        cls,
        severity: Severity,
        source: str,
        line: int | None,
        key: str | None,
        value: str | None,
        reason: str,
        allowed: str | None = None,
    ) -> Problem:
        """Build a problem, masking the value when the key holds a secret."""
        shown = mask_value(key, value) if key is not None and value is not None else value
        return cls(severity, source, line, key, shown, reason, allowed)

    def render(self) -> str:
        return self.to_error().render()

    def to_error(self) -> ConfigError:
        return ConfigError(
            self.reason, source=self.source, line=self.line, key=self.key, value=self.value, allowed=self.allowed
        )


class ProblemSink:
    """Collects problems (validation) or raises on the first error (plan, run)."""

    def __init__(self, collect: bool) -> None:
        self.collect = collect
        self.problems: list[Problem] = []

    def add(self, problem: Problem) -> None:
        if problem.severity == "error" and not self.collect:
            raise problem.to_error()
        # One cluster-level key feeds several clients of several flows; report it once.
        if problem not in self.problems:
            self.problems.append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.add(problem)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

"""What the commands share: the properties file argument, and option values parsed once (a regular expression, a
timestamp). A bad value is a usage error naming the option, the value and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from mm2py.config.values import ValueProblem, parse_timestamp
from mm2py.errors import UsageError
from mm2py.mirror.filters import PatternError, compile_pattern_list, parse_list

ConfigFile = Annotated[
    Path, typer.Argument(help="MM2 properties file (connect-mirror-maker.properties)", show_default=False)
]


def regex(option: str, text: str | None) -> re.Pattern[str] | None:
    if text is None:
        return None
    try:
        return compile_pattern_list(parse_list(text))
    except PatternError as exc:
        raise UsageError(f"{option} {text}: not a valid regular expression: {exc}") from None


def timestamp(option: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except ValueProblem as exc:
        raise UsageError(f"{option} {text}: {exc.reason} (allowed: {exc.allowed})") from None

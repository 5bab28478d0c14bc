"""Parsing string values the way Kafka's ConfigDef does, with errors that point at the file line.

Kept apart from MirrorMakerConfig so validation (which wants every problem) and the typed configs (which
want the first) share one set of rules.
"""

from __future__ import annotations

from typing import NamedTuple

from mm2py.config.key_types import KeyDef, KeyType
from mm2py.mirror.filters import parse_list

_INT_RANGES = {
    KeyType.SHORT: (-(2**15), 2**15 - 1),
    KeyType.INT: (-(2**31), 2**31 - 1),
    KeyType.LONG: (-(2**63), 2**63 - 1),
}


class Setting(NamedTuple):
    """A value with the raw key that supplied it (None for a default), so errors can name file:line."""

    value: str
    raw_key: str | None


class ValueProblem(ValueError):
    """A value that does not parse; ``allowed`` says what would."""

    def __init__(self, reason: str, allowed: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.allowed = allowed


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueProblem("is not a boolean", "true or false")
    return value == "true"


def parse_int(text: str, key_type: KeyType, minimum: int | None = None) -> int:
    value = text.strip()
    low, high = _INT_RANGES[key_type]
    if minimum is not None:
        low = max(low, minimum)
    try:
        number = int(value, 10)
    except ValueError:
        hint = ""
        if value[-1:] in ("s", "m", "h", "d") and value[:-1].strip().isdigit():
            hint = " (units such as 1m are not understood: MM2 takes a plain number in the unit the key names)"
        raise ValueProblem(f"is not a whole number{hint}", f"a whole number from {low} to {high}") from None
    if not low <= number <= high:
        raise ValueProblem("is out of range", f"a whole number from {low} to {high}")
    return number


def parse_value(definition: KeyDef, text: str) -> object:
    """Parse ``text`` for ``definition``; raises ValueProblem."""
    t = definition.type
    if t is KeyType.BOOLEAN:
        return parse_bool(text)
    if t in _INT_RANGES:
        return parse_int(text, t, definition.minimum)
    if t is KeyType.DOUBLE:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueProblem("is not a number", "a decimal number") from None
    if t is KeyType.LIST:
        return tuple(parse_list(text))
    value = text.strip()
    if definition.choices and value not in definition.choices:
        raise ValueProblem("is not one of the accepted values", ", ".join(definition.choices))
    return value

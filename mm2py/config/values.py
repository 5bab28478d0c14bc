"""Parsing string values the way Kafka's ConfigDef does, with errors that point at the file line.

Kept apart from MirrorMakerConfig so validation (which wants every problem) and the typed configs (which
want the first) share one set of rules.
"""

from __future__ import annotations

import datetime
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
        items = tuple(parse_list(text))
        if definition.choices:
            # Kafka's ValidList.in(false, ...): at least one value, each one of the accepted values.
            wrong = [item for item in items if item not in definition.choices]
            if not items or wrong:
                reason = "names no value" if not items else f"has {', '.join(repr(w) for w in wrong)}, not accepted"
                raise ValueProblem(reason, "a comma-separated list of " + ", ".join(definition.choices))
        return items
    if t is KeyType.TIMESTAMP:
        return parse_timestamp(text)
    value = text.strip()
    if definition.choices and value not in definition.choices:
        raise ValueProblem("is not one of the accepted values", ", ".join(definition.choices))
    return value


TIMESTAMP_FORMS = "an ISO 8601 time such as 2026-11-25T06:00:00Z (UTC when no offset is given), or epoch milliseconds"


def parse_timestamp(text: str) -> int | None:
    """A point in time as epoch milliseconds (None for an empty value): what ListOffsets by timestamp takes.

    Operators write times ("the last 6 hours: 2026-11-25T06:00:00Z"), scripts write epoch milliseconds (what
    Kafka's record timestamps and ``kafka-consumer-groups --to-datetime`` use); both are accepted. A time
    without an offset is UTC, never the host's local time, so one file means the same on every host.
    """
    value = text.strip()
    if not value:
        return None
    if value.isdigit():
        return int(value)
    iso = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueProblem("is not a time", TIMESTAMP_FORMS) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    millis = int(moment.timestamp() * 1000)
    if millis < 0:
        raise ValueProblem("is before 1970", TIMESTAMP_FORMS)
    return millis

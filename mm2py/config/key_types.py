"""How a configuration key is declared: its type, its default, the connectors that read it.

Kept apart from the tables (:mod:`mm2py.config.keys` for MM2's keys, :mod:`mm2py.config.mm2py_keys` for
mm2py's own) so both can declare keys the same way.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class KeyType(enum.Enum):
    STRING = "string"
    LIST = "list"
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    SHORT = "short"
    DOUBLE = "double"
    CLASS = "class"
    PASSWORD = "password"
    TIMESTAMP = "timestamp"  # mm2py's own: ISO 8601 or epoch milliseconds, parsed to epoch milliseconds


@dataclass(frozen=True)
class KeyDef:
    """One key: its type and default as MM2 declares them, the connectors that read it, and what it is for."""

    name: str
    type: KeyType
    default: str | None
    doc: str
    connectors: str = "SCH"  # S = source, C = checkpoint, H = heartbeat connector; "M" = top level only
    choices: tuple[str, ...] = ()
    minimum: int | None = None


def k(
    name: str,
    type_: KeyType,
    default: str | None,
    doc: str,
    connectors: str = "SCH",
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
) -> KeyDef:
    return KeyDef(name, type_, default, doc, connectors, choices, minimum)


S, L, B, INT, LG, SH, C, TS = (
    KeyType.STRING,
    KeyType.LIST,
    KeyType.BOOLEAN,
    KeyType.INT,
    KeyType.LONG,
    KeyType.SHORT,
    KeyType.CLASS,
    KeyType.TIMESTAMP,
)

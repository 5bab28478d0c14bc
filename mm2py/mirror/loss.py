"""Records lost before they were replicated: what is kept per source partition, and in which bytes.

A source partition loses records a flow had not replicated yet when its log start moves past the replicated
position (retention, DeleteRecords, a truncation) or when the topic is deleted and re-created. MM2 skips such
a gap in silence; mm2py counts it, once, and keeps the count where it keeps the progress: in
``mm2-offsets.<source>.internal`` on the target, beside MM2's own records, under a key MM2 never reads.

Why a key of its own rather than a field in MM2's ``{"offset":N}``: the copy tasks write that value after
every range, and MM2 writes it when it holds the flow; an extra field would be dropped by either. The key
``["mm2py.loss",{"cluster":"A","partition":0,"topic":"orders"}]`` has Connect's shape (so Connect's offset
reader files it under a connector named ``mm2py.loss`` and MirrorSourceTask, which asks only for
``MirrorSourceConnector`` keys, never sees it), and survives a hand-over to MM2 and back.

The value ``{"lost":N,"counted_to":C,"end":E}``: N records lost so far; every offset below C is either
replicated or counted, so a gap found again (a retried run, a write that half failed) is not counted twice;
E the highest end offset a run saw for the partition (-1 when none), so the tail of a topic that is later
deleted and re-created can be counted too. The offsets of a re-created topic start again at its new log
start, and so does C.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mm2py.mirror.record_formats import RecordFormatError, parse_json_value, source_offset_key

LOSS_CONNECTOR_NAME = "mm2py.loss"


@dataclass(frozen=True)
class LossState:
    """What is known of one source partition's losses (see the module's docstring)."""

    lost: int = 0
    counted_to: int = -1
    end: int = -1

    def seen(self, end: int | None) -> LossState:
        """This state with a source end offset a run saw; the highest one is kept."""
        if end is None or end <= self.end:
            return self
        return LossState(self.lost, self.counted_to, end)


@dataclass(frozen=True)
class Gap:
    """Offsets ``first`` to ``last`` (inclusive) of a source partition, gone before they were replicated."""

    topic: str
    partition: int
    first: int
    last: int

    @property
    def records(self) -> int:
        return self.last - self.first + 1

    def describe(self) -> str:
        return f"{self.topic} partition {self.partition} offsets {self.first}-{self.last} ({self.records} records)"


def loss_key(source_alias: str, topic: str, partition: int) -> bytes:
    return source_offset_key(source_alias, topic, partition, LOSS_CONNECTOR_NAME)


def loss_value(state: LossState) -> bytes:
    """Compact JSON with the keys in a fixed order, like Connect's own offset values."""
    return json.dumps(
        {"lost": state.lost, "counted_to": state.counted_to, "end": state.end}, separators=(",", ":")
    ).encode("utf-8")


def parse_loss_value(value: bytes | None) -> LossState | None:
    """The kept state, or None for a tombstone (the partition's losses were reset)."""
    if value is None:
        return None
    parsed = parse_json_value(value, "loss record")
    fields = [parsed.get(name) if isinstance(parsed, dict) else None for name in ("lost", "counted_to", "end")]
    numbers = [f for f in fields if isinstance(f, int) and not isinstance(f, bool)]
    if len(numbers) != 3:
        raise RecordFormatError(f"loss record {bytes(value)!r}: lost, counted_to and end must be integers")
    return LossState(*numbers)

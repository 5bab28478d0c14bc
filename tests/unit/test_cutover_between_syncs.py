"""Matching records one by one where MM2's syncs give no exact translation (tools/cutover/between_syncs.py), with the
reads replaced by lists: the position found, and MM2's answer kept where the records differ. Real Kafka with
Java MM2: tests/realkafka/test_mm2_beside.py."""

from __future__ import annotations

from typing import Any

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.checkpoints import GroupOffset
from mm2py.mirror.translation import OffsetMap
from mm2py.tools.cutover import between_syncs
from mm2py.tools.cutover.report import SourceRow

BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"


def flow() -> FlowConfig:
    return build_flow_config(MirrorMakerConfig(parse_properties(BASE, "t.properties"), {}), Flow("a", "b"))


def mm2_syncs() -> OffsetMap:
    offsets = OffsetMap()
    offsets.add(100, 90, False)  # MM2's syncs: upstream 100 at downstream 90, then 200 at 190
    offsets.add(200, 190, False)
    return offsets


def row(group_offset: int) -> SourceRow:
    offsets = mm2_syncs()
    return SourceRow(
        "a", GroupOffset("g", "orders", "a.orders", 0, group_offset, offsets.translate(group_offset)), offsets
    )


def fake_reads(monkeypatch: pytest.MonkeyPatch, target_shift: int) -> list[tuple[str, int]]:
    """Source records are (offset -> content offset); the target holds them ``target_shift`` lower."""
    calls: list[tuple[str, int]] = []

    def read(alias: str, _s: Any, _t: str, _p: int, start: int, last: int | None, count: int = 0) -> list[Any]:
        calls.append((alias, start))
        if last is not None:
            return [(o, ("record", o)) for o in range(start, last + 1)]
        return [(o, ("record", o + target_shift)) for o in range(start, start + count)]

    monkeypatch.setattr(between_syncs, "_read", read)
    return calls


def test_a_group_between_mm2s_syncs_lands_right_after_its_last_processed_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = fake_reads(monkeypatch, target_shift=10)
    conservative = row(150)
    assert (conservative.row.translation.method, conservative.row.translation.offset) == ("conservative", 91)
    (found,) = between_syncs.matched(flow(), [conservative])
    assert (found.row.translation.method, found.row.translation.offset) == ("exact", 140)
    assert "MM2's rule: 91" in found.row.translation.reason
    assert calls == [("a", 100), ("b", 90)]  # from the sync below on both sides


def test_records_that_differ_keep_mm2s_answer_and_exact_rows_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_reads(monkeypatch, target_shift=11)  # the target's records are not the source's one for one
    conservative = row(150)
    assert between_syncs.matched(flow(), [conservative]) == [conservative]
    calls.clear()
    exact = row(100)  # at a sync: exact already
    assert between_syncs.matched(flow(), [exact]) == [exact] and calls == []

"""The demo's data tells the truth about lag: no timestamp in the future, late orders really are old."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
NOW_MS = 1_767_225_600_000  # a fixed clock reading, so the test does not depend on when it runs


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mm2py_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mm2py_demo", module)
    spec.loader.exec_module(module)
    return module


def test_every_demo_timestamp_lies_at_or_before_the_clock_reading(demo: ModuleType) -> None:
    data = demo.demo_data(NOW_MS)
    stamps = [r.timestamp for batch in data.orders.values() for r in batch] + [r.timestamp for r in data.late]
    assert stamps and max(stamps) <= NOW_MS


def test_late_orders_are_older_than_the_whole_first_batch_and_go_to_the_late_dc(demo: ModuleType) -> None:
    data = demo.demo_data(NOW_MS)
    first_batch_oldest = min(r.timestamp for batch in data.orders.values() for r in batch)
    assert len(data.late) == demo.LATE_ORDERS == 25
    assert max(r.timestamp for r in data.late) < first_batch_oldest
    assert {json.loads(r.value)["dc"] for r in data.late} == {demo.LATE_DC}
    # old enough that lag in seconds reads as "half an hour", not as a rounding error
    assert NOW_MS - max(r.timestamp for r in data.late) >= 30 * 60 * 1000


def test_late_order_ids_continue_after_the_first_batch_without_clashing(demo: ModuleType) -> None:
    data = demo.demo_data(NOW_MS)
    first_ids = {json.loads(r.value)["order_id"] for r in data.orders[demo.LATE_DC]}
    late_ids = [json.loads(r.value)["order_id"] for r in data.late]
    assert len(first_ids) == demo.ORDERS_PER_DC
    assert late_ids == [f"{demo.LATE_DC}-{i}" for i in range(demo.ORDERS_PER_DC, demo.ORDERS_PER_DC + 25)]


def test_timestamps_rise_with_order_ids_within_each_batch(demo: ModuleType) -> None:
    data = demo.demo_data(NOW_MS)
    for batch in [*data.orders.values(), data.late]:
        stamps = [r.timestamp for r in batch]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)

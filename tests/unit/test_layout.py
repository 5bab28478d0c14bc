"""The test tree itself: tests/unit and tests/integration are not packages, so two test modules with one
basename break collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_modules_have_unique_basenames() -> None:
    names = Counter(p.name for p in Path(__file__).resolve().parents[1].rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []

"""The continuous bench's windows: a slow window says whether the source's acknowledgement or the copier's share
after it was slow, so a first window after idle that is worse than the rest can be put on the right one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.latency_load import windows

START_MS = 1_000_000.0


def records(delays: list[tuple[float, float, float]]) -> tuple[Any, Any]:
    """One record for each (ack delay, copier's share, CreateTime in ms after START_MS), as the load and the
    checker would have stamped it."""
    arrivals = SimpleNamespace(latency_ms={}, created_ms={}, seen_ms={})
    load = SimpleNamespace(source=0, acked_ms={}, ack_delay_ms={})
    for seq, (ack, share, created) in enumerate(delays):
        key = (0, seq)
        created_ms = START_MS + created
        arrivals.created_ms[key] = created_ms
        load.acked_ms[key] = created_ms + ack
        load.ack_delay_ms[key] = ack
        arrivals.seen_ms[key] = created_ms + ack + share
        arrivals.latency_ms[key] = ack + share
    return arrivals, load


def test_each_window_carries_its_own_source_ack_and_copier_share() -> None:
    # Window 0: the source slow (300 ms) and the copier quick (10 ms); window 1 the other way round.
    arrivals, load = records(
        [(300.0, 10.0, 100.0 * i) for i in range(10)] + [(60.0, 200.0, 1000.0 + i) for i in range(5)]
    )
    rows = windows(arrivals, {0: range(15)}, START_MS, 1.0, [load])
    assert [(r["window"], r["records"], r["source_ack_p99_ms"], r["hop_p99_ms"]) for r in rows] == [
        (0, 10, 300.0, 10.0),
        (1, 5, 60.0, 200.0),
    ]
    assert [r["p99_ms"] for r in rows] == [310.0, 260.0]


def test_without_the_loads_a_window_has_only_the_end_to_end_figures_and_missing_records_are_named() -> None:
    arrivals, _load = records([(60.0, 10.0, 0.0)])
    rows = windows(arrivals, {0: range(2)}, START_MS, 1.0)
    assert rows == [
        {"window": 0, "from_s": 0.0, "records": 1, "p50_ms": 70.0, "p99_ms": 70.0, "max_ms": 70.0},
        {"window": "missing", "records": 1},
    ]

"""Progress display of ``mm2py run``: a live table on a terminal, one log line per interval otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.live import Live
from rich.table import Table

from mm2py.cli.render import out
from mm2py.engine.stats import FlowStats


def _table(stats: list[FlowStats]) -> Table:
    table = Table(title="mm2py run", title_justify="left")
    for column in ("flow", "records", "records/s", "MB/s", "lag (records)", "lost"):
        table.add_column(column, justify="left" if column == "flow" else "right")
    for s in stats:
        cells = (f"{s.records:,}", f"{s.last_rate:,.0f}", f"{s.last_mb_rate:,.2f}", f"{s.lag:,}", f"{s.lost:,}")
        table.add_row(s.flow, *cells)
    return table


class ProgressView:
    """Call with the latest stats as often as you like; it decides when and how to show them."""

    def __init__(self, interval_s: float = 10.0, live: bool | None = None) -> None:
        self.live_mode = sys.stdout.isatty() if live is None else live
        self.interval_s = interval_s
        self._next = time.monotonic() + interval_s
        self._live: Live | None = None

    def __enter__(self) -> ProgressView:
        if self.live_mode:
            self._live = Live(_table([]), console=out, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(t, e, tb)

    def __call__(self, stats: list[FlowStats]) -> None:
        if self._live is not None:
            self._live.update(_table(stats))
        elif time.monotonic() >= self._next:
            self._next = time.monotonic() + self.interval_s
            for s in stats:
                out.print(
                    f"flow={s.flow} records={s.records} records_per_s={s.last_rate:.0f} "
                    f"mb_per_s={s.last_mb_rate:.2f} lag_records={s.lag} lost={s.lost}",
                    markup=False,
                )

    def summary(self, stats: list[FlowStats]) -> None:
        for s in stats:
            if s.held_by is not None:
                out.print(
                    f"flow={s.flow} copied=0 held_by={s.held_by}: another run holds this flow's lease", markup=False
                )
                continue
            elapsed = max(time.monotonic() - s.started, 1e-9)
            out.print(
                f"flow={s.flow} copied={s.records} bytes={s.bytes} jobs={s.jobs} lag_records={s.lag} "
                f"lost={s.lost} seconds={elapsed:.1f} path={s.path.describe()}",
                markup=False,
            )

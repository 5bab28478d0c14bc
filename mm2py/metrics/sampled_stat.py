"""Kafka's SampledStat, as MM2's sensors use it: the window behind every ``_min``, ``_max``, ``_avg`` and rate.

MM2's metrics are Kafka sensors over Kafka's default MetricConfig (two samples of 30 s); dashboards written
for MM2 read those numbers, so the driver's collector keeps the same windows rather than Prometheus counters.
"""

from __future__ import annotations

import math

# Kafka's MetricConfig defaults, which MM2's sensors use: two samples of 30 s each.
SAMPLES = 2
SAMPLE_SECONDS = 30.0


class SampledStat:
    """Kafka's SampledStat: events land in the newest sample; a sample lives ``SAMPLES * SAMPLE_SECONDS``.

    Min, max and avg look at the live samples (NaN when empty); a rate divides their total by the time since
    the oldest one started, counted as at least ``(SAMPLES - 1) * SAMPLE_SECONDS`` (Kafka's Rate.windowSize),
    so one burst does not read as a huge rate.
    """

    def __init__(self) -> None:
        self._samples: list[list[float]] = []  # start, events, total, min, max

    def record(self, now: float, events: int, total: float, low: float = math.nan, high: float = math.nan) -> None:
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_SECONDS:
            self._samples.append([now, 0, 0.0, math.inf, -math.inf])
            del self._samples[:-SAMPLES]
        sample = self._samples[-1]
        sample[1] += events
        sample[2] += total
        if events and not math.isnan(low):
            sample[3] = min(sample[3], low)
            sample[4] = max(sample[4], high)

    def _live(self, now: float) -> list[list[float]]:
        return [s for s in self._samples if now - s[0] < SAMPLES * SAMPLE_SECONDS]

    def stats(self, now: float) -> tuple[float, float, float]:
        """(min, max, avg) over the window."""
        live = [s for s in self._live(now) if s[1]]
        if not live:
            return math.nan, math.nan, math.nan
        events = sum(s[1] for s in live)
        return min(s[3] for s in live), max(s[4] for s in live), sum(s[2] for s in live) / events

    def rate(self, now: float) -> float:
        """Total per second over the window."""
        live = self._live(now)
        if not live:
            return 0.0
        elapsed = now - live[0][0]
        full_samples = int(elapsed // SAMPLE_SECONDS)
        if full_samples < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full_samples) * SAMPLE_SECONDS
        return sum(s[2] for s in live) / elapsed

"""What ``/health`` and ``/ready`` answer while a run goes on (driver side), from what its flows report.

Kubernetes probes and load balancers ask these (KIP-1017 gave Kafka Connect, and so MM2 on Connect, a
``/health`` endpoint that Strimzi's probes use). A run is

- *ready* once every flow has started: it holds its lease and has placed its partitions, or it stands by for
  a lease another run holds (a hot standby is as ready as it can be);
- *healthy* while every flow it holds copies and heartbeats: no step of the flow is failing and being retried
  (an unreachable cluster, a copy job that failed), and the flow's heartbeat reached its target within
  ``max(15 s, 10 x emit.heartbeats.interval.seconds)``. A flow that is still starting is not healthy yet,
  as a Connect worker that is starting answers 503.

Each answer names every flow that is not ready or not healthy on a line of its own, with the reason. A
continuous run's ``/health`` ends with the address its following copy tasks report to (never the token that
opens it): an operator opening firewalls between executors and the driver needs it, and so do the tests that
knock on that door.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

STALE_HEARTBEAT_MIN_S = 15.0
STALE_HEARTBEAT_INTERVALS = 10


@dataclass
class _Flow:
    state: str = "starting"  # starting, copying, standing by
    detail: str = ""
    since: float = 0.0
    failing: str | None = None  # why the step being retried failed
    failing_since: float = 0.0
    without: list[str] = field(default_factory=list)  # optional features an ACL refused (mm2py.control.features)


class RunHealth:
    """The flows of one run, as the probes see them. ``clock`` returns Unix seconds; tests pass their own."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._flows: dict[str, _Flow] = {}
        self._intervals: dict[tuple[str, str], float] = {}  # heartbeat pair -> emit interval
        self._beats: dict[tuple[str, str], float] = {}  # heartbeat pair -> when it last reached the target
        self._task_control = ""  # the URL following tasks report to, once the run serves it

    # -- what the run reports ----------------------------------------------------------------------------

    def starting(self, flow: str) -> None:
        self._set(flow, "starting")

    def copying(self, flow: str) -> None:
        self._set(flow, "copying")

    def standing_by(self, flow: str, holder: str = "another run") -> None:
        self._set(flow, "standing by", f"the lease is held by {holder}")

    def handed_over(self, flow: str, to: str) -> None:
        self._set(flow, "handed over", f"to {to}; standing by until it ends")

    def cut_over(self, flow: str, mark: str) -> None:
        self._set(flow, "cut over", f"{mark}; this run copies nothing more for it")

    def failing(self, flow: str, reason: str) -> None:
        """A step of ``flow`` failed and is being retried."""
        with self._lock:
            entry = self._flows.setdefault(flow, _Flow(since=self._clock()))
            if entry.failing is None:
                entry.failing_since = self._clock()
            entry.failing = reason.splitlines()[0] if reason else "failed"

    def succeeded(self, flow: str) -> None:
        """A step of ``flow`` succeeded (the steps of a flow run one after the other)."""
        with self._lock:
            entry = self._flows.get(flow)
            if entry is not None:
                entry.failing = None

    def skipped(self, flow: str, feature: str) -> None:
        """``flow`` runs without an optional ``feature`` its principal may not use: shown, not unhealthy."""
        with self._lock:
            entry = self._flows.setdefault(flow, _Flow(since=self._clock()))
            if feature not in entry.without:
                entry.without.append(feature)

    def heartbeats_expected(self, source: str, target: str, interval_s: float) -> None:
        with self._lock:
            self._intervals[(source, target)] = interval_s

    def heartbeat_written(self, source: str, target: str, at: float | None = None) -> None:
        with self._lock:
            self._beats[(source, target)] = self._clock() if at is None else at

    def task_control_at(self, url: str) -> None:
        """The run's task-control endpoint (``mm2py.engine.task_control``) serves at ``url``."""
        with self._lock:
            self._task_control = url

    # -- what the probes ask -------------------------------------------------------------------------------

    def ready(self) -> tuple[bool, list[str]]:
        with self._lock:
            lines = [f"flow {name}: {self._describe(f)}" for name, f in sorted(self._flows.items())]
            return all(f.state != "starting" for f in self._flows.values()), lines

    def health(self) -> tuple[bool, list[str]]:
        """Healthy or not, and one line per flow: the reason for each flow that is not."""
        with self._lock:
            now = self._clock()
            problems: list[str] = []
            fine: list[str] = []
            for name, f in sorted(self._flows.items()):
                reason = self._problem(name, f, now)
                (problems if reason else fine).append(f"flow {name}: {reason or self._describe(f)}")
            lines = problems or fine
            if lines and self._task_control:
                lines.append(f"task control: {self._task_control}")
            return not problems, lines

    def _set(self, flow: str, state: str, detail: str = "") -> None:
        with self._lock:
            entry = self._flows.setdefault(flow, _Flow())
            entry.state, entry.detail, entry.since = state, detail, self._clock()

    def _describe(self, f: _Flow) -> str:
        without = f"; without {', '.join(f.without)} (refused by an ACL)" if f.without else ""
        return f.state + (f" ({f.detail})" if f.detail else "") + without

    def _problem(self, name: str, f: _Flow, now: float) -> str | None:
        if f.failing is not None:
            return f"failing for {now - f.failing_since:.0f} s, retrying: {f.failing}"
        if f.state == "starting":
            return "starting (planning, taking its lease, reading its progress)"
        if f.state != "copying":
            return None
        source, _, target = name.partition("->")
        interval = self._intervals.get((source, target))
        if interval is None:
            return None  # emit.heartbeats.enabled = false: nothing to expect
        last = max(self._beats.get((source, target), f.since), f.since)
        stale_after = max(STALE_HEARTBEAT_MIN_S, STALE_HEARTBEAT_INTERVALS * interval)
        if now - last > stale_after:
            return f"no heartbeat reached {target} for {now - last:.0f} s (one is written every {interval:g} s)"
        return None

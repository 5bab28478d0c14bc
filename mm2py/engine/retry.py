"""Retrying a flow's steps on the driver: transient failures (a stalled broker, a failed Spark job, an admin
call that timed out) are tried again with backoff for up to ``mm2py.retry.timeout.seconds``; permanent ones
(a record larger than the target accepts, a denied authorisation) are raised at once.

Nothing is lost while a step is retried: progress only moves after a range is copied. While a step is being
retried, the run's ``/health`` names the flow and why (:mod:`mm2py.metrics.health`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from mm2py.backoff import ExponentialBackoff
from mm2py.config.flow import FlowConfig
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger(__name__)
T = TypeVar("T")
# A flow's step is retried after 1 s, 2 s, 4 s, ... up to 30 s (each within ±20 %), until its retry timeout.
STEP_BACKOFF = ExponentialBackoff(initial_s=1.0, max_s=30.0)


class Retrier:
    """Runs a flow's steps, counting every retry in the flow's stats and metrics."""

    def __init__(
        self,
        flow: FlowConfig,
        stats: FlowStats,
        metrics: RunMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        retries: Callable[[KafkaOperationError], bool] = lambda exc: not exc.refused,
        backoff: ExponentialBackoff = STEP_BACKOFF,
    ) -> None:
        self.flow = flow
        self.stats = stats
        self.metrics = metrics
        self.clock = clock
        # Which failed Kafka calls are worth another try: by default all but an authorizer's refusal, which
        # only a new ACL changes (the line names principal, operation and resource at once).
        self.retries = retries
        self.backoff = backoff

    def retriable(self, exc: ReplicationError | KafkaOperationError) -> bool:
        """Whether another try of a step that failed with ``exc`` may succeed."""
        return exc.retriable if isinstance(exc, ReplicationError) else self.retries(exc)

    def __call__(self, step: Callable[[], T], stop: threading.Event) -> T:
        """Run ``step``; a stop request ends the retries (the last failure is raised).

        The retry timeout counts from the first failure, not from the start: a step may run for hours (a
        generation of following tasks) before it fails, and it deserves its retries then too."""
        deadline: float | None = None
        failures = 0
        while True:
            try:
                result = step()
            except (ReplicationError, KafkaOperationError) as exc:
                if deadline is None:
                    deadline = self.clock() + self.flow.retry_timeout_seconds
                retriable = self.retriable(exc)
                backoff = self.backoff.backoff(failures)
                failures += 1
                if not retriable or self.clock() + backoff > deadline or stop.is_set():
                    raise
                self.stats.retries += 1
                if self.metrics is not None:
                    self.metrics.retried(self.flow.source, self.flow.target, exc.code or "")
                    self.metrics.health.failing(self.flow.name, str(exc))
                log.warning("flow=%s will retry in %.1f s: %s", self.flow.name, backoff, exc)
                stop.wait(backoff)
                continue
            if self.metrics is not None:
                self.metrics.health.succeeded(self.flow.name)
            return result

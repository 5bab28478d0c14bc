"""The driver of one flow in ``mm2py run`` (runs on the driver, never touches records).

Per flow: plan topics, create what is missing on the target, take the flow's lease, read progress from the
target, then run copy jobs (:class:`~mm2py.engine.copy_rounds.CopyRounds`) with the flow's periodic work
(:class:`~mm2py.engine.flow_sync.FlowSync`) between them. ``--once`` copies what the source partitions held when
the run started; continuous mode keeps going until asked to stop, then lets the job in flight finish so its
progress is recorded. On the batch path a continuous run's jobs *follow* their partitions for
``mm2py.continuous.follow.ms`` (or until the next periodic job is due): new records are copied as they arrive,
and a job ends early when a partition has more than a job takes (a backlog).
"""

from __future__ import annotations

import functools
import logging
import threading

from mm2py.config.flow import FlowConfig
from mm2py.control.group_sync import GroupSyncCoordinator
from mm2py.control.plan import AdminPool, FlowPlan
from mm2py.control.progress_store import read_replication_state
from mm2py.control.topics import ensure_internal_topics, ensure_remote_topics, internal_topics
from mm2py.engine.copy_rounds import CopyRounds, TopicPartition
from mm2py.engine.flow_sync import FlowSync
from mm2py.engine.retry import Retrier
from mm2py.engine.spark import SparkRunner
from mm2py.engine.spec import copy_spec
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger(__name__)
MIN_FOLLOW_S = 1.0  # a following job shorter than this would cost more in Spark than it saves


class FlowRunner:
    """Replicates one flow ``source->target`` through a shared SparkRunner."""

    def __init__(
        self,
        flow: FlowConfig,
        plan: FlowPlan,
        spark: SparkRunner | None,
        pool: AdminPool,
        coordinator: GroupSyncCoordinator | None = None,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.flow = flow
        self.pool = pool
        self.metrics = metrics
        self.stats = FlowStats(flow.name, path=plan.copy_path)
        self.spec = copy_spec(flow, plan.copy_path)
        self.rounds = CopyRounds(flow, plan, self.spec, pool, self.stats, metrics)
        self.rounds.spark = spark
        self.sync = FlowSync(flow, self.rounds, pool, coordinator, metrics)
        self.retrying = Retrier(flow, self.stats, metrics)
        if metrics is not None:
            metrics.set_metric_names_formats(flow.source, flow.target, flow.metric_names_formats)

    def ensure_topics(self) -> None:
        """Create what the flow needs on the target (driver, admin calls only)."""
        f = self.flow
        admins = {f.source: self.pool.admin(f.source, f), f.target: self.pool.admin(f.target, f)}
        ensure_internal_topics(admins, internal_topics(f))
        ensure_remote_topics(f, self.rounds.plan, admins[f.source], admins[f.target])

    def prepare(self) -> None:
        """Once this run holds the flow: sync configs, and resume every partition from the stored progress."""
        f = self.flow
        self.sync.start()
        self.rounds.positions = {}
        state = read_replication_state(f.target, f.target_consumer.settings(), f.source)
        self.rounds.losses.load(state.losses)
        self.rounds.place(state.progress)
        if self.metrics is not None:
            self.metrics.set_copy_path(f.source, f.target, self.spec.copy_path)

    def save_tails(self) -> None:
        """When the flow's work ends, however it ends: keep the source ends this run saw beyond what it copied
        (:meth:`CopyRounds.save_tails`). Never hides why the work ended."""
        try:
            self.rounds.save_tails()
        except Exception as exc:  # the count of a later re-created topic is a nicety next to the run's outcome
            log.warning("flow=%s: could not keep the source end offsets this run saw: %s", self.flow.name, exc)

    def run_once(self, stop: threading.Event) -> None:
        """Copy up to the end offsets the source had when the run started; a signal stops after the job in
        flight (what it copied is recorded, the rest is left for the next run)."""
        rounds = self.rounds
        self._copy_up_to(self.retrying(rounds.end_offsets, stop), stop)
        unfinished: KafkaOperationError | ReplicationError | None = None
        if rounds.unavailable and not stop.is_set():
            try:  # the partitions whose leader was away at the start, once it is back
                self._copy_up_to(self.retrying(rounds.ends_of_unavailable, stop), stop)
            except (KafkaOperationError, ReplicationError) as exc:
                unfinished = exc  # raised after the checkpoints of what was copied
        self.retrying(self.sync.checkpoint, stop)
        self.retrying(self.sync.report_lag, stop)
        if unfinished is not None:
            raise unfinished

    def _copy_up_to(self, ends: dict[TopicPartition, int], stop: threading.Event) -> None:
        while not stop.is_set() and self.retrying(lambda: self.rounds.copy_round(ends), stop):
            pass

    def run_continuous(self, stop: threading.Event, lost: threading.Event) -> None:
        """Copy until ``stop`` (a signal) or ``lost`` (the lease went to another run) is set."""
        idle = max(self.flow.consumer_poll_timeout_ms / 1000, 0.1)
        schedule = self.sync.schedule()
        follow_s = self.rounds.follow_seconds()
        while not stop.is_set() and not lost.is_set():
            schedule.run_due(lambda action: self.retrying(action, stop))
            # A following job ends when the next periodic job is due, so checkpoints and refreshes keep their pace.
            follow = min(follow_s, max(MIN_FOLLOW_S, schedule.seconds_until_due())) if follow_s else 0.0
            if not self.retrying(functools.partial(self.rounds.copy_available, follow), stop):
                stop.wait(idle)

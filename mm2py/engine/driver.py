"""The driver of one flow in ``mm2py run`` (runs on the driver, never touches records).

Per flow: plan topics, create what is missing on the target, take the flow's lease, read progress from the
target, then copy (:class:`~mm2py.engine.copy_rounds.CopyRounds`) with the flow's periodic work
(:class:`~mm2py.engine.flow_sync.FlowSync`). ``--once`` copies what the source partitions held when the run
started, in rounds of jobs with the periodic work between them. Continuous mode on the batch path runs
*generations*: one Spark job whose tasks follow every partition, copying records as they arrive, until the run
stops, the lease is lost or the topics change; the periodic work runs beside them in a thread of its own
(:mod:`mm2py.engine.task_control` carries the tasks' reports and the end of a generation). The record path
copies in rounds in continuous mode too.
"""

from __future__ import annotations

import functools
import logging
import threading
import time

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.fencing import InitializedIds, SlotEpochs, fence, target_connection
from mm2py.control.group_sync import GroupSyncCoordinator
from mm2py.control.plan import FlowPlan
from mm2py.control.progress_store import read_replication_state
from mm2py.engine.copy_rounds import CopyRounds
from mm2py.engine.flow_sync import FlowSync
from mm2py.engine.retry import Retrier
from mm2py.engine.spark import SparkRunner
from mm2py.engine.spec import copy_spec
from mm2py.engine.stats import FlowStats
from mm2py.engine.task_control import FlowChannel, TaskControl
from mm2py.errors import KafkaOperationError, ReplicationError
from mm2py.metrics.registry import RunMetrics
from mm2py.mirror.topic_partition import TopicPartition

PERIODIC_CHECK_S = 0.5  # how soon the periodic jobs' thread sees a stop or a lost lease
PLACE_PENDING_EVERY_S = 5.0  # following: how often a partition left unplaced (its leader away) is tried again
log = logging.getLogger(__name__)


class FlowRunner:
    """Replicates one flow ``source->target`` through a shared SparkRunner.

    Built once the run holds the flow and Spark is up (:func:`mm2py.engine.run.run_flows`), with everything it
    works with: nothing is handed to it afterwards."""

    def __init__(
        self,
        flow: FlowConfig,
        plan: FlowPlan,
        spark: SparkRunner | None,
        pool: AdminPool,
        coordinator: GroupSyncCoordinator | None = None,
        metrics: RunMetrics | None = None,
        *,
        control: TaskControl | None = None,
        stats: FlowStats | None = None,
    ) -> None:
        self.flow = flow
        self.pool = pool
        self.metrics = metrics
        self.stats = stats or FlowStats(flow.name, path=plan.copy_path)
        self.spec = copy_spec(flow, plan.copy_path)
        self.rounds = CopyRounds(flow, plan, self.spec, pool, self.stats, metrics, spark)
        self.sync = FlowSync(flow, self.rounds, pool, coordinator, metrics)
        self.retrying = Retrier(flow, self.stats, metrics)
        self.control = control  # the run's endpoint for following tasks (none for --once)

    def prepare(self) -> None:
        """Once this run holds the flow: sync configs, fence earlier exactly-once producers, and resume every
        partition from the stored progress."""
        f = self.flow
        self.sync.start()
        self._fence_earlier_transactions()
        self.rounds.resume(read_replication_state(f.target, f.target_consumer.settings(), f.source))
        if self.metrics is not None:
            self.metrics.set_copy_path(f.source, f.target, self.spec.copy_path)

    def _fence_earlier_transactions(self) -> None:
        """Exactly-once: one transactional producer per task slot, every earlier one fenced first
        (:mod:`mm2py.control.fencing`), before any task of this run reads progress or copies."""
        spark = self.rounds.spark
        if not self.spec.exactly_once or spark is None:
            return
        f = self.flow
        slots = spark.exactly_once_slots if self.control is None else self.rounds.following_tasks()
        timeout_s = self.spec.stall_timeout_s
        epochs: SlotEpochs | None = None  # the batch path's: its driver holds the slots' epochs from now on
        fencer: SlotEpochs | InitializedIds
        if self.spec.copy_path.batch:
            connect = target_connection(f.target, self.spec.producer_connection, timeout_s)
            fencer = epochs = SlotEpochs(f.name, f.source, connect, self.spec.transaction_timeout_ms, timeout_s)
        else:
            fencer = InitializedIds(f.name, f.source, self.spec.producer_settings, timeout_s)
        fence(
            fencer,
            f.target,
            self.spec.producer_settings,
            f.target_consumer.settings(),
            self.spec.progress_topic,
            slots,
            tasks_max=f.tasks_max,
        )
        self.spec = self.rounds.fenced(epochs, slots)

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
        ends = self.retrying(rounds.end_offsets, stop)
        self._copy_up_to(ends, stop)
        late = [tp for tp in rounds.partitions() if tp not in ends]  # their leader was away at the start
        unfinished: KafkaOperationError | ReplicationError | None = None
        if late and not stop.is_set():
            try:  # once their leaders are back
                self._copy_up_to(self.retrying(functools.partial(rounds.ends_of_unavailable, late), stop), stop)
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
        """Copy until ``stop`` (a signal) or ``lost`` (the lease went to another run) is set: following, or in
        rounds until the flow can follow (a cluster's executors register after the run started)."""
        idle = max(self.flow.consumer_poll_timeout_ms / 1000, 0.1)
        schedule = self.sync.schedule()
        while not stop.is_set() and not lost.is_set():
            if self.control is not None and self.rounds.follows():
                self._follow(stop, lost, self.control)
                return
            schedule.run_due(lambda action: self.retrying(action, stop))
            if not self.retrying(self.rounds.copy_available, stop):
                stop.wait(idle)

    def _follow(self, stop: threading.Event, lost: threading.Event, control: TaskControl) -> None:
        """Continuous mode on the batch path: generations of tasks that follow their partitions, and MM2's
        periodic jobs beside them in a thread of their own (never between copies: nothing waits for them)."""
        channel = self.rounds.channel = control.channel(
            self.flow.name, self.rounds.on_report, lambda: len(self.rounds.partitions())
        )
        # Set when following ends, also by a failure: the periodic jobs end with it, so the failure is reported
        # at once rather than when the run's stop would have ended them.
        followed = threading.Event()
        periodic = threading.Thread(
            target=self._periodic_beside,
            args=(stop, lost, followed, channel),
            name=f"periodic {self.flow.name}",
            daemon=True,
        )
        periodic.start()
        try:
            idle = max(self.flow.consumer_poll_timeout_ms / 1000, 0.1)
            while not stop.is_set() and not lost.is_set():
                if not self.retrying(functools.partial(self.rounds.follow, channel), stop):
                    stop.wait(idle)  # nothing to follow yet: the topic refresh beside may find partitions
        finally:
            followed.set()
            channel.stop()
            channel.end()
            periodic.join(timeout=60)
            self.rounds.channel = None

    def _place_pending_beside(self, channel: FlowChannel) -> None:
        """A partition whose leader was away when the flow was placed: once it is back, the running generation
        ends, so that the next one follows it too."""
        try:
            placed = self.rounds.place_pending()
        except (KafkaOperationError, ReplicationError) as exc:  # still away, or the source is: tried again later
            log.debug("flow=%s: placing the partitions left out failed: %s", self.flow.name, exc)
            return
        if placed:
            channel.end()

    def _periodic_beside(
        self, stop: threading.Event, lost: threading.Event, followed: threading.Event, channel: FlowChannel
    ) -> None:
        """MM2's periodic jobs while the tasks follow, until the run stops, the lease is lost or following ends; a
        stop or a lost lease ends the running generation (its tasks record their progress and return within
        seconds)."""
        schedule = self.sync.schedule()
        try:
            next_placing = 0.0
            while not (stop.is_set() or lost.is_set() or followed.is_set()):
                schedule.run_due(lambda action: self.retrying(action, stop))
                if self.rounds.pending() and time.monotonic() >= next_placing:
                    next_placing = time.monotonic() + PLACE_PENDING_EVERY_S
                    self._place_pending_beside(channel)
                stop.wait(min(PERIODIC_CHECK_S, schedule.seconds_until_due()))
        except BaseException:
            log.exception("flow=%s: a periodic job failed; stopping the flow", self.flow.name)
            stop.set()
            raise
        finally:
            channel.stop()
            channel.end()

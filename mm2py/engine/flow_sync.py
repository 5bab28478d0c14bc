"""One flow's periodic work besides copying (driver side): MM2's scheduled jobs of a connector pair.

Topic refresh (``refresh.topics.*``), topic-config and ACL sync (``sync.topic.configs.*``,
``sync.topic.acls.*``), checkpoints and group offset sync (``emit.checkpoints.*``, ``sync.group.offsets.*``;
the offset syncs and the progress they translate with are read on every few seconds in between), and the lag a
run's metrics endpoint shows. Each runs on MM2's interval, with MM2's first-run delays
(:meth:`FlowSync.schedule`); what they read of the copy (positions, ends) comes from the flow's
:class:`~mm2py.engine.copy_rounds.CopyRounds`.
"""

from __future__ import annotations

import logging

from mm2py.config.flow import FlowConfig
from mm2py.control.acls import sync_topic_acls
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import CheckpointWriter, FlowTranslator, GroupOffset, now_ms
from mm2py.control.config_sync import TopicConfigSync
from mm2py.control.features import ACL_SYNC, CONFIG_SYNC, Feature, SkippedFeature, without
from mm2py.control.group_sync import GroupSyncCoordinator
from mm2py.control.offset_sync_store import OffsetSyncStore
from mm2py.control.plan import build_plan
from mm2py.control.progress_store import ProgressTail
from mm2py.control.topics import ensure_remote_topics
from mm2py.engine.copy_rounds import CopyRounds
from mm2py.engine.schedule import Periodic, Schedule
from mm2py.errors import KafkaOperationError
from mm2py.metrics.measurement import CheckpointMeasurement
from mm2py.metrics.registry import RunMetrics
from mm2py.tools.lag import PartitionLag, record_ages

log = logging.getLogger(__name__)
LAG_INTERVAL_S = 10.0  # how often a run measures its lag in seconds for the metrics endpoint
# How often a run reads on in the offset syncs and the progress between checkpoints: a following task records
# each partition every second, so a checkpoint that read a whole interval at once (60 s over 800 partitions: about
# a second of the driver's CPU) took that second from the copy tasks on the same cores in one piece.
READ_ON_INTERVAL_S = 5.0


def say_skipped(skip: SkippedFeature, metrics: RunMetrics | None) -> None:
    """One line, once per flow and feature, and the same on ``/health`` and in ``mm2py_feature_skipped``."""
    log.warning("%s", skip.line())
    if metrics is not None:
        metrics.feature_skipped(skip.source, skip.target, skip.feature.name)


class FlowSync:
    """The periodic jobs of one flow, reading and updating the flow's copy rounds."""

    def __init__(
        self,
        flow: FlowConfig,
        rounds: CopyRounds,
        pool: AdminPool,
        coordinator: GroupSyncCoordinator | None = None,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.flow = flow
        self.rounds = rounds
        self.pool = pool
        self.coordinator = coordinator
        if coordinator is not None:
            coordinator.add(flow, self.latest_group_offsets)
        self.metrics = metrics
        self._checkpoints: CheckpointWriter | None = None
        self._syncs: OffsetSyncStore | None = None  # tailed, not re-read, at every checkpoint
        self._progress: ProgressTail | None = None  # likewise
        self.group_offsets: list[GroupOffset] = []  # the latest translation of every group, for group sync
        self._configs = TopicConfigSync(flow)

    def start(self) -> None:
        """Once the run holds the flow: configs and ACLs synced now (MM2 syncs them when a connector starts)."""
        self.sync_configs()
        self.sync_acls()
        if self.flow.emit_checkpoints_enabled and self.flow.emit_offset_syncs_enabled:
            self._checkpoints = CheckpointWriter(self.flow)

    def schedule(self) -> Schedule:
        """MM2's periodic jobs of this flow, with MM2's intervals and first-run delays."""
        f = self.flow
        # MM2 runs refresh, config sync and ACL sync first after one interval (ACLs and configs are also synced
        # when the flow starts), checkpoints every interval. Beside the checkpoints, as often, the source ends
        # listed beyond what was copied are kept on the target: `mm2py failover` counts what the target lacks
        # from them, also when the run dies with the source or cannot stop without it.
        periodic = (
            (f.refresh_topics_enabled, "refresh topics", f.refresh_topics_interval_seconds, self.refresh_topics),
            (
                f.sync_topic_configs_enabled,
                "sync topic configs",
                f.sync_topic_configs_interval_seconds,
                self.sync_configs,
            ),
            (f.sync_topic_acls_enabled, "sync topic acls", f.sync_topic_acls_interval_seconds, self.sync_acls),
            (True, "checkpoints", f.emit_checkpoints_interval_seconds, self.checkpoint_and_sync),
            (True, "read offset syncs", min(READ_ON_INTERVAL_S, f.emit_checkpoints_interval_seconds), self.read_on),
            (True, "keep listed ends", f.emit_checkpoints_interval_seconds, self.rounds.save_tails),
        )
        jobs = [
            Periodic(name, interval, action, first_after_s=interval)
            for enabled, name, interval, action in periodic
            if enabled
        ]
        if self.metrics is not None:
            jobs.append(Periodic("lag", LAG_INTERVAL_S, self.report_lag))
        return Schedule(jobs)

    # -- checkpoints (MirrorCheckpointConnector) -------------------------------------------------------------

    def _tails(self) -> tuple[OffsetSyncStore, ProgressTail]:
        if self._syncs is None or self._progress is None:
            f = self.flow
            self._syncs = OffsetSyncStore(f)
            self._progress = ProgressTail(f.target, f.target_consumer.settings(), f.source)
        return self._syncs, self._progress

    def read_on(self) -> None:
        """Read what was recorded since the last read, so that the next checkpoint reads only the rest."""
        if self._checkpoints is None:
            return
        for tail in self._tails():
            tail.read_new()

    def checkpoint(self) -> None:
        """Translate every selected source group and write the checkpoints that moved (MM2's checkpoint rule)."""
        if self._checkpoints is None:
            return
        listed_at = now_ms()
        syncs, progress = self._tails()
        admin = self.pool.admin(self.flow.source, self.flow)
        translator = FlowTranslator(self.flow, self.rounds.plan, admin, syncs, progress)
        rows = [row for group in translator.groups() for row in translator.translate(group)]
        written = self._checkpoints.emit(rows, listed_at)
        self.group_offsets = rows
        if self.metrics is not None:
            latency = now_ms() - listed_at  # MM2: from listing the group's offsets to the target's acknowledgement
            self.metrics.record_checkpoints(
                CheckpointMeasurement(
                    self.flow.source, self.flow.target, cp.consumer_group_id, cp.topic, cp.partition, latency
                )
                for cp in written
            )
        log.info("checkpoints flow=%s groups=%d written=%d", self.flow.name, len({r.group for r in rows}), len(written))

    def latest_group_offsets(self) -> list[GroupOffset]:
        return self.group_offsets

    def checkpoint_and_sync(self) -> None:
        self.checkpoint()
        if self.coordinator is not None:
            self.coordinator.maybe_sync(self.flow.target)

    # -- lag for the metrics endpoint ------------------------------------------------------------------------

    def report_lag(self) -> None:
        """Lag in records and seconds per partition for the metrics endpoint (the age of the oldest record
        not copied yet, read from the source like ``mm2py lag`` does)."""
        rounds = self.rounds
        if self.metrics is None or not rounds.ends:
            return
        # No record can be read from a partition whose leader is away: its age is left at 0 until it is back.
        lagging = {
            tp: rounds.positions.get(tp, end)
            for tp, end in rounds.ends.items()
            if end > rounds.positions.get(tp, end) and tp not in rounds.unavailable
        }
        ages = record_ages(self.flow, lagging, now_ms()) if lagging else {}
        rows = []
        for (topic, partition), end in sorted(rounds.ends.items()):
            position = rounds.positions.get((topic, partition), end)
            lag = max(0, end - position)
            rows.append(
                PartitionLag(
                    self.flow.name,
                    self.flow.source,
                    self.flow.target,
                    topic,
                    rounds.remote.get(topic, topic),
                    partition,
                    end,
                    position,
                    lag,
                    ages.get((topic, partition), 0.0) if lag else 0.0,
                )
            )
        self.metrics.set_lag(self.flow.source, self.flow.target, rows)

    # -- topics, configs and ACLs (MirrorSourceConnector's own jobs) -----------------------------------------

    def refresh_topics(self) -> None:
        """Pick up new source topics and partitions (MM2's refresh.topics.interval.seconds)."""
        plan = build_plan([self.flow], self.pool, refresh=True).flows[0]
        if plan == self.rounds.plan:
            return
        for gone in sorted(set(self.rounds.remote) - {t.topic for t in plan.topics}):
            log.warning(
                "flow=%s: source topic %s is gone (deleted, or no longer selected); its replication "
                "stops and its remote topic %s is kept, as MM2 does",
                self.flow.name,
                gone,
                self.rounds.remote[gone],
            )
        ensure_remote_topics(
            self.flow, plan, self.pool.admin(self.flow.source, self.flow), self.pool.admin(self.flow.target, self.flow)
        )
        self.rounds.replan(plan)
        log.info("topics refreshed flow=%s topics=%d", self.flow.name, len(plan.topics))

    def sync_acls(self) -> None:
        """MM2's ACL sync (``sync.topic.acls.*``): the source's topic ACLs, by MM2's rules, onto the target."""
        if not self.flow.sync_topic_acls_enabled:
            return
        f = self.flow
        try:
            created = sync_topic_acls(f, self.pool.admin(f.source, f), self.pool.admin(f.target, f))
        except KafkaOperationError as exc:
            grant = f"Describe on cluster {f.source} (DescribeAcls) and Alter on cluster {f.target} (CreateAcls)"
            self._skip_if_refused(exc, ACL_SYNC, grant)
            return
        if created:
            log.info("topic ACLs synced flow=%s bindings=%d", f.name, created)

    def sync_configs(self) -> None:
        """MM2's topic-config sync (``sync.topic.configs.*``): source configs onto the remote topics."""
        if not self.flow.sync_topic_configs_enabled:
            return
        f = self.flow
        try:
            altered = self._configs.sync(self.rounds.plan, self.pool.admin(f.source, f), self.pool.admin(f.target, f))
        except KafkaOperationError as exc:
            grant = (
                f"DescribeConfigs on the source topics ({f.source}) and AlterConfigs on the remote topics ({f.target})"
            )
            self._skip_if_refused(exc, CONFIG_SYNC, grant)
            return
        log.info("topic configs synced flow=%s topics=%d", f.name, altered)

    def _skip_if_refused(self, exc: KafkaOperationError, feature: Feature, grant: str) -> None:
        """An ACL refused an optional job: the flow runs without it from now on (said once); anything else is
        raised to be retried as every step is."""
        if not exc.refused:
            raise exc
        self.flow = without(self.flow, feature)
        say_skipped(SkippedFeature(self.flow.source, self.flow.target, feature, grant, exc), self.metrics)

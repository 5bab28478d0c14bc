"""Topics on the target (driver side): remote topics like MM2 creates them, and MM2's internal topics.

Remote topics get the widest source's partition count (N->1 merges), ``replication.factor`` and the source's
topic configs that pass the ConfigPropertyFilter (docs/mm2-semantics.md, *Remote topics*); they grow when a
source grows and are never shrunk or deleted. Internal topics are compacted and named exactly as MM2 names them
(docs/mm2-semantics.md, *Internal topics*), so MM2's own tools read them; mm2py's own (leases, dense offset
syncs) carry the ``mm2py`` prefix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from confluent_kafka.admin import NewTopic

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.features import CHECKPOINTS, DENSE_OFFSET_SYNCS, HEARTBEATS, LEASE, OFFSET_SYNCS, Feature
from mm2py.control.plan import FlowPlan, ReplicationPlan, flow_policy
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin, TopicConfigValue
from mm2py.mirror.filters import ConfigPropertyFilter, load_config_property_filter
from mm2py.mirror.progress import progress_topic

log = logging.getLogger(__name__)

COMPACT = {"cleanup.policy": "compact"}
# mm2py's own: the lease of every flow into this target (mm2py.control.lease); MM2's filters never replicate it.
LEASE_TOPIC = "mm2py-leases.internal"


@dataclass(frozen=True)
class InternalTopic:
    cluster: str
    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=lambda: dict(COMPACT))
    feature: Feature | None = None  # the optional feature that writes it; None: the copy cannot go on without it


def offset_syncs_topic(flow: FlowConfig) -> str:
    """``mm2-offset-syncs.<other>.internal`` on the cluster ``offset-syncs.topic.location`` names."""
    other = flow.target if flow.offset_syncs_topic_location == "source" else flow.source
    return flow_policy(flow).offset_syncs_topic(other)


def dense_offset_syncs_topic(flow: FlowConfig) -> str:
    """``mm2py-offset-syncs.<other>.internal``, beside MM2's syncs topic: mm2py's dense syncs.

    MM2's syncs topic is compacted by (topic, partition), so the log cleaner keeps one sync per partition and
    exact translation of a lagging group would be lost. mm2py's dense syncs therefore live in a topic of their
    own with ``cleanup.policy=delete`` and ``retention.ms = mm2py.offset-syncs.dense.retention.ms`` (7 days,
    Kafka's default retention): a group that lags less than that translates exactly; older positions fall back
    to MM2's rule. Always ``.``-separated, like ``mm2-offsets.<source>.internal``.
    """
    other = flow.target if flow.offset_syncs_topic_location == "source" else flow.source
    return f"mm2py-offset-syncs.{other}.internal"


def checkpoints_topic(flow: FlowConfig) -> str:
    return flow_policy(flow).checkpoints_topic(flow.source)


def internal_topics(flow: FlowConfig) -> list[InternalTopic]:
    topics = [
        InternalTopic(
            flow.target,
            progress_topic(flow.source),
            flow.offset_storage_partitions,
            flow.offset_storage_replication_factor,
        ),
        *heartbeats_topics(flow),
    ]
    if flow.emit_offset_syncs_enabled:
        topics.append(
            InternalTopic(
                flow.offset_syncs_cluster,
                offset_syncs_topic(flow),
                1,
                flow.offset_syncs_topic_replication_factor,
                feature=OFFSET_SYNCS,
            )
        )
    if flow.emit_offset_syncs_enabled and flow.dense_offset_syncs:
        topics.append(
            InternalTopic(
                flow.offset_syncs_cluster,
                dense_offset_syncs_topic(flow),
                1,
                flow.offset_syncs_topic_replication_factor,
                {"cleanup.policy": "delete", "retention.ms": str(flow.dense_offset_syncs_retention_ms)},
                DENSE_OFFSET_SYNCS,
            )
        )
    if flow.emit_checkpoints_enabled and flow.emit_offset_syncs_enabled:
        topics.append(
            InternalTopic(
                flow.target, checkpoints_topic(flow), 1, flow.checkpoints_topic_replication_factor, feature=CHECKPOINTS
            )
        )
    if flow.lease_enabled:
        topics.append(lease_topic(flow))
    return topics


def heartbeats_topics(pair: FlowConfig) -> list[InternalTopic]:
    """The ``heartbeats`` topic a herder pair writes to, on the pair's target (MM2 creates it for every pair)."""
    return [
        InternalTopic(
            pair.target,
            flow_policy(pair).heartbeats_topic(),
            1,
            pair.heartbeats_topic_replication_factor,
            feature=HEARTBEATS,
        )
    ]


def lease_topic(flow: FlowConfig) -> InternalTopic:
    """mm2py's lease topic on the target: one partition, the holder records compacted by flow."""
    return InternalTopic(flow.target, LEASE_TOPIC, 1, flow.offset_storage_replication_factor, feature=LEASE)


# Answers about the topic's settings rather than about who asks: the replication factor keys are what to fix.
_SETTINGS_ERRORS = frozenset({"INVALID_REPLICATION_FACTOR", "POLICY_VIOLATION", "INVALID_CONFIG"})


def ensure_internal_topics(
    admins: dict[str, ClusterAdmin], topics: Iterable[InternalTopic]
) -> list[tuple[InternalTopic, KafkaOperationError]]:
    """Create missing internal topics; returns the optional ones whose creation an ACL refused.

    A topic the copy needs (the progress topic) that cannot be created stops the run: without it mm2py could
    not record what it copied. An optional feature's topic that an authorizer refuses is returned, so the flow
    runs without that feature (:mod:`mm2py.control.features`), as MM2 logs such a refusal and goes on.
    """
    refused: list[tuple[InternalTopic, KafkaOperationError]] = []
    by_cluster: dict[str, list[InternalTopic]] = {}
    for topic in topics:
        by_cluster.setdefault(topic.cluster, []).append(topic)
    for cluster, wanted in by_cluster.items():
        admin = admins[cluster]
        existing = admin.list_topics()
        missing = [t for t in wanted if t.name not in existing]
        outcome = admin.create_topics(
            [NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.config)) for t in missing]
        )
        for topic in missing:
            error = outcome.get(topic.name)
            if error is None:
                log.info("created internal topic cluster=%s topic=%s", cluster, topic.name)
            elif error.refused and topic.feature is not None:
                refused.append((topic, error))
            else:
                hint = (
                    " (check the *.replication.factor keys for a small cluster)"
                    if error.code in _SETTINGS_ERRORS
                    else ""
                )
                raise KafkaOperationError(
                    cluster,
                    f"creating internal topic {topic.name}",
                    f"{error.cause}{hint}",
                    code=error.code,
                    principal=error.principal,
                )
    return refused


def config_property_filter(flow: FlowConfig) -> ConfigPropertyFilter:
    return load_config_property_filter(flow.config_property_filter_class, flow.plugin_config())


def left_out_configs(flow: FlowConfig, source_configs: Mapping[str, TopicConfigValue]) -> dict[str, str]:
    """Properties set on the source topic that the ConfigPropertyFilter keeps off the remote topic (tiered
    storage's among them, by default): what ``plan`` names, so nobody wonders why a remote topic lacks them."""
    prop_filter = config_property_filter(flow)
    return {
        k: v.value
        for k, v in sorted(source_configs.items())
        if not v.is_default and not prop_filter.should_replicate_config_property(k)
    }


def remote_topic_configs(flow: FlowConfig, source_configs: Mapping[str, TopicConfigValue]) -> dict[str, str]:
    """Source topic configs MM2 copies to a remote topic: set on the source topic (or a source default when
    ``use.defaults.from = source``) and not excluded by ``config.properties.exclude``."""
    prop_filter = config_property_filter(flow)
    return {
        k: v.value
        for k, v in source_configs.items()
        if prop_filter.should_replicate_config_property(k)
        and (not v.is_default or prop_filter.should_replicate_source_default(k))
    }


def ensure_remote_topics(flow: FlowConfig, plan: FlowPlan, source: ClusterAdmin, target: ClusterAdmin) -> None:
    """Create or grow the remote topics of ``plan``; anything but "already exists" fails the run.

    A remote topic gets ``target_partitions``: for a topic several sources merge into, the largest source's
    count, so the first flow to create it does not leave the others' high partitions out. Another flow or host
    may create the same topic at the same moment with fewer partitions ("already exists"), so the counts are
    checked again after creation and any shortfall is grown.
    """
    to_create = [t for t in plan.topics if t.action == "create"]
    configs = source.describe_topic_configs([t.topic for t in to_create])
    new = [
        NewTopic(
            t.remote_topic,
            t.target_partitions,
            flow.replication_factor,
            config=remote_topic_configs(flow, configs.get(t.topic, {})),
        )
        for t in to_create
    ]
    for name, error in target.create_topics(new).items():
        if error is not None:
            raise _named(error, flow.target, f"creating remote topic {name}")
        log.info("created remote topic flow=%s topic=%s", flow.name, name)
    wanted = remote_partition_counts(plan)
    if not wanted:
        return
    existing = target.list_topics()
    grow = {name: n for name, n in wanted.items() if name in existing and existing[name].partitions < n}
    for name, error in target.create_partitions(grow).items():
        if error is not None:
            raise _named(error, flow.target, f"adding partitions to {name}")
        log.info("grew remote topic flow=%s topic=%s partitions=%d", flow.name, name, grow[name])


def _named(error: KafkaOperationError, cluster: str, operation: str) -> KafkaOperationError:
    return KafkaOperationError(cluster, operation, error.cause, code=error.code, principal=error.principal)


def remote_partition_counts(plan: FlowPlan) -> dict[str, int]:
    """The partition count each remote topic of ``plan`` must have at least (never fewer than its source's)."""
    return {t.remote_topic: max(t.target_partitions, t.partitions) for t in plan.topics}


def with_configs_not_synced(flows: list[FlowConfig], plan: ReplicationPlan, pool: AdminPool) -> ReplicationPlan:
    """``plan`` with, per topic, the source-set properties config sync leaves out (:func:`left_out_configs`);
    a principal that may not describe the source's configs leaves them unknown (plan's rights say so)."""
    flow_plans = []
    for flow, flow_plan in zip(flows, plan.flows, strict=True):
        try:
            configs = pool.admin(flow.source, flow).describe_topic_configs([t.topic for t in flow_plan.topics])
        except KafkaOperationError as exc:
            if not exc.refused:
                raise
            configs = {}
        topics = tuple(
            replace(t, configs_not_synced=tuple(left_out_configs(flow, configs.get(t.topic, {})).items()))
            for t in flow_plan.topics
        )
        flow_plans.append(replace(flow_plan, topics=topics))
    return replace(plan, flows=tuple(flow_plans))

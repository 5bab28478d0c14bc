"""Typed, frozen per-flow configuration: what the planner, the engine and the tools actually read.

A FlowConfig carries every MM2 key with MM2's default, already parsed, plus ready librdkafka settings for
each client the flow uses. It is small, plain and picklable, so the engine can ship it to executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from mm2py.client_settings import ClientSettings
from mm2py.config.client_keys.client_settings_reader import read_client_keys
from mm2py.config.key_types import KeyDef
from mm2py.config.keys import CONNECTOR_KEYS, WORKER_KEYS
from mm2py.config.mirror_maker import (
    ClientKind,
    Flow,
    MirrorMakerConfig,
    Props,
    Side,
    client_props,
    worker_producer_props,
)
from mm2py.config.mm2py_keys import FLOW_MM2PY_KEYS, MM2PY_KEYS, MM2PY_RENAMED_KEYS, SPARK_CONF_PREFIX
from mm2py.config.problems import Problem, ProblemSink
from mm2py.config.values import Setting, ValueProblem, parse_value
from mm2py.librdkafka.settings import masked

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ClientConfig:
    """One Kafka client of a flow: MM2's Java view, the librdkafka settings derived from it, and how it reaches
    and logs in to its cluster (``connection``, library-neutral, what the batch path's client connects with)."""

    role: str
    kind: ClientKind
    java: Pairs = field(repr=False)
    librdkafka: Pairs = field(repr=False)
    connection: ClientSettings = field(repr=False)

    def settings(self, **overrides: str) -> dict[str, str]:
        """librdkafka settings for confluent-kafka, with call-site additions (group.id, ...)."""
        result = dict(self.librdkafka)
        result.update(overrides)
        return result

    def __repr__(self) -> str:  # never print secrets, even in a traceback
        return f"ClientConfig(role={self.role!r}, kind={self.kind!r}, settings={masked(dict(self.librdkafka))})"


def _key(name: str) -> Any:
    return field(metadata={"key": name})


@dataclass(frozen=True)
class FlowConfig:
    """Everything one flow ``source->target`` needs, typed. Field names are MM2 keys in snake_case."""

    source: str
    target: str
    source_file: str
    source_consumer: ClientConfig
    source_admin: ClientConfig
    target_admin: ClientConfig
    target_consumer: ClientConfig
    target_producer: ClientConfig  # writes replicated records, checkpoints, heartbeats
    offset_syncs_producer: ClientConfig
    enabled: bool = _key("enabled")
    topics: tuple[str, ...] = _key("topics")
    topics_exclude: tuple[str, ...] = _key("topics.exclude")
    groups: tuple[str, ...] = _key("groups")
    groups_exclude: tuple[str, ...] = _key("groups.exclude")
    topic_filter_class: str = _key("topic.filter.class")
    group_filter_class: str = _key("group.filter.class")
    config_property_filter_class: str = _key("config.property.filter.class")
    config_properties_exclude: tuple[str, ...] = _key("config.properties.exclude")
    use_defaults_from: str = _key("use.defaults.from")
    replication_policy_class: str = _key("replication.policy.class")
    replication_factor: int = _key("replication.factor")
    offset_syncs_topic_replication_factor: int = _key("offset-syncs.topic.replication.factor")
    offset_syncs_topic_location: str = _key("offset-syncs.topic.location")
    offset_lag_max: int = _key("offset.lag.max")
    emit_offset_syncs_enabled: bool = _key("emit.offset-syncs.enabled")
    heartbeats_replication_enabled: bool = _key("heartbeats.replication.enabled")
    metric_names_formats: tuple[str, ...] = _key("metric.names.formats")
    use_incremental_alter_configs: str = _key("use.incremental.alter.configs")
    refresh_topics_enabled: bool = _key("refresh.topics.enabled")
    refresh_topics_interval_seconds: int = _key("refresh.topics.interval.seconds")
    sync_topic_configs_enabled: bool = _key("sync.topic.configs.enabled")
    sync_topic_configs_interval_seconds: int = _key("sync.topic.configs.interval.seconds")
    sync_topic_acls_enabled: bool = _key("sync.topic.acls.enabled")
    sync_topic_acls_interval_seconds: int = _key("sync.topic.acls.interval.seconds")
    refresh_groups_enabled: bool = _key("refresh.groups.enabled")
    refresh_groups_interval_seconds: int = _key("refresh.groups.interval.seconds")
    emit_checkpoints_enabled: bool = _key("emit.checkpoints.enabled")
    emit_checkpoints_interval_seconds: int = _key("emit.checkpoints.interval.seconds")
    sync_group_offsets_enabled: bool = _key("sync.group.offsets.enabled")
    sync_group_offsets_interval_seconds: int = _key("sync.group.offsets.interval.seconds")
    checkpoints_topic_replication_factor: int = _key("checkpoints.topic.replication.factor")
    emit_heartbeats_enabled: bool = _key("emit.heartbeats.enabled")
    emit_heartbeats_interval_seconds: int = _key("emit.heartbeats.interval.seconds")
    heartbeats_topic_replication_factor: int = _key("heartbeats.topic.replication.factor")
    consumer_poll_timeout_ms: int = _key("consumer.poll.timeout.ms")
    admin_timeout_ms: int = _key("admin.timeout.ms")
    tasks_max: int = _key("tasks.max")
    exactly_once_source_support: str = _key("exactly.once.source.support")  # worker key of the target
    offset_flush_interval_ms: int = _key("offset.flush.interval.ms")  # worker key of the target
    task_shutdown_graceful_timeout_ms: int = _key("task.shutdown.graceful.timeout.ms")  # worker key of the target
    offset_storage_partitions: int = _key("offset.storage.partitions")  # worker key of the target
    offset_storage_replication_factor: int = _key("offset.storage.replication.factor")
    range_max_records: int = _key("mm2py.range.max.records")
    continuous_tasks: str = _key("mm2py.continuous.tasks")
    continuous_fetch_min_interval_ms: int = _key("mm2py.continuous.fetch.min.interval.ms")
    provenance_header_enabled: bool = _key("mm2py.provenance.header.enabled")
    copy_mode: str = _key("mm2py.copy.mode")
    dense_offset_syncs: bool = _key("mm2py.offset-syncs.dense.enabled")
    retry_timeout_seconds: int = _key("mm2py.retry.timeout.seconds")
    lease_enabled: bool = _key("mm2py.lease.enabled")
    lease_session_timeout_ms: int = _key("mm2py.lease.session.timeout.ms")
    dense_offset_syncs_retention_ms: int = _key("mm2py.offset-syncs.dense.retention.ms")
    spark_master: str = _key("mm2py.spark.master")
    spark_deploy_mode: str = _key("mm2py.spark.deploy-mode")
    metrics_port: int = _key("mm2py.metrics.port")
    metrics_host: str = _key("mm2py.metrics.host")
    source_loss: str = _key("mm2py.source.loss")
    start_timestamp_ms: int | None = _key("mm2py.start.timestamp")  # None: auto.offset.reset decides
    throughput_max_bytes_per_second: int = _key("mm2py.throughput.max.bytes.per.second")  # 0: no limit
    spark_conf: Pairs = field(default=(), repr=False)
    connector_config: Pairs = field(default=(), repr=False)  # MM2's flattened map, for user plugins

    @property
    def flow(self) -> Flow:
        return Flow(self.source, self.target)

    @property
    def name(self) -> str:
        return str(self.flow)

    def plugin_config(self) -> dict[str, str]:
        return dict(self.connector_config)

    @property
    def exactly_once(self) -> bool:
        """MM2's worker key of the target, ``<target>.exactly.once.source.support = enabled``."""
        return self.exactly_once_source_support == "enabled"

    @property
    def offset_syncs_cluster(self) -> str:
        """Alias of the cluster holding ``mm2-offset-syncs.*`` (MM2's ``offset-syncs.topic.location``)."""
        return self.source if self.offset_syncs_topic_location == "source" else self.target


_KEY_FIELDS = [f for f in fields(FlowConfig) if "key" in f.metadata]
_DEFINITIONS: dict[str, KeyDef] = {**CONNECTOR_KEYS, **WORKER_KEYS, **MM2PY_KEYS}

# (attribute, side, kind, MM2 role) of the clients a flow uses.
_CLIENTS: tuple[tuple[str, Side, ClientKind, str], ...] = (
    ("source_consumer", "source", "consumer", "replication-consumer"),
    ("source_admin", "source", "admin", "replication-source-admin"),
    ("target_admin", "target", "admin", "replication-target-admin"),
    ("target_consumer", "target", "consumer", "checkpoints-target-consumer"),
)


def build_flow_config(mm: MirrorMakerConfig, flow: Flow, sink: ProblemSink | None = None) -> FlowConfig:
    """Parse one flow's settings; raises ConfigError on the first error unless ``sink`` collects them."""
    sink = sink or ProblemSink(collect=False)
    connector = mm.connector_props(flow)
    worker = mm.worker_props(flow)
    top = {k: Setting(v, k) for k, v in mm.resolved_values().items() if k.startswith("mm2py.")}
    for old, new in MM2PY_RENAMED_KEYS.items():
        if old in top:
            top.setdefault(new, top.pop(old))
    values: dict[str, Any] = {}
    for f in _KEY_FIELDS:
        key = f.metadata["key"]
        definition = _DEFINITIONS[key]
        if key in FLOW_MM2PY_KEYS:
            setting = connector.get(key) or top.get(key)  # A->B.mm2py.<key> wins over the top-level one
        else:
            setting = (worker if key in WORKER_KEYS else top if key in MM2PY_KEYS else connector).get(key)
        values[f.name] = _parse(mm, definition, setting, sink)
    clients: dict[str, Any] = {}
    for attr, side, kind, role in _CLIENTS:
        clients[attr] = _client(mm, flow, role, kind, client_props(connector, side, kind), sink)
    for attr, side in (("source_admin", "source"), ("target_admin", "target")):
        alias = flow.source if side == "source" else flow.target
        _driver_cannot_log_in(mm, alias, client_props(connector, side, "admin"), clients[attr], sink)
    clients["target_producer"] = _client(
        mm, flow, "replication-producer", "producer", worker_producer_props(worker, connector), sink
    )
    syncs_side: Side = "source" if values["offset_syncs_topic_location"] == "source" else "target"
    clients["offset_syncs_producer"] = _client(
        mm,
        flow,
        f"offset-syncs-{syncs_side}-producer",
        "producer",
        client_props(connector, syncs_side, "producer"),
        sink,
    )
    spark_conf = tuple(
        (k[len(SPARK_CONF_PREFIX) :], s.value) for k, s in top.items() if k.startswith(SPARK_CONF_PREFIX)
    )
    return FlowConfig(
        source=flow.source,
        target=flow.target,
        source_file=mm.source,
        spark_conf=spark_conf,
        connector_config=tuple((k, s.value) for k, s in connector.items()),
        **values,
        **clients,
    )


def _parse(mm: MirrorMakerConfig, definition: KeyDef, setting: Setting | None, sink: ProblemSink) -> Any:
    default = definition.default or ""
    if setting is None:
        return parse_value(definition, default)
    try:
        return parse_value(definition, setting.value)
    except ValueProblem as exc:
        sink.add(
            Problem.make(
                "error",
                mm.source,
                mm.line_of(setting.raw_key),
                setting.raw_key or definition.name,
                setting.value,
                exc.reason,
                exc.allowed,
            )
        )
        return parse_value(definition, default)


def _client(
    mm: MirrorMakerConfig, flow: Flow, role: str, kind: ClientKind, props: Props, sink: ProblemSink
) -> ClientConfig:
    java = {k: s.value for k, s in props.items()}
    user_client_id = java.get("client.id")
    # MM2's client.id shape: [<user client.id>|]<src>-><tgt>|<connector>|<role>
    connector = "MirrorCheckpointConnector" if "checkpoint" in role else "MirrorSourceConnector"
    java["client.id"] = "|".join(p for p in (user_client_id, str(flow), connector, role) if p)
    keys = read_client_keys(java, kind)
    for issue in keys.issues:
        raw_key = props[issue.key].raw_key if issue.key in props else None
        sink.add(
            Problem(
                issue.severity,
                mm.source,
                mm.line_of(raw_key),
                raw_key or issue.key,
                issue.value,
                issue.reason,
                issue.allowed,
            )
        )
    return ClientConfig(role, kind, tuple(java.items()), tuple(keys.librdkafka.items()), keys.connection)


def _driver_cannot_log_in(
    mm: MirrorMakerConfig, alias: str, props: Props, admin: ClientConfig, sink: ProblemSink
) -> None:
    """Refuse a cluster the driver cannot reach: AWS_MSK_IAM, which only the batch path's wire client speaks.

    Planning, topic creation, progress and the lease all go through librdkafka clients on the driver, so a flow
    whose source or target needs AWS_MSK_IAM could copy but never plan; refusing here beats a half-working run.
    """
    if admin.connection.sasl_mechanism != "AWS_MSK_IAM":
        return
    key = "sasl.mechanisms" if "sasl.mechanisms" in props else "sasl.mechanism"
    raw_key = props[key].raw_key if key in props else None
    reason = (
        f"cluster {alias} logs in with AWS_MSK_IAM, which mm2py's batch path can copy with but its driver cannot: "
        "the driver's admin, progress and lease clients are librdkafka's, which has no AWS_MSK_IAM login"
    )
    allowed = "for an MSK cluster, its SASL/SCRAM or mTLS listener (both copy paths)"
    sink.add(Problem("error", mm.source, mm.line_of(raw_key), raw_key or key, "AWS_MSK_IAM", reason, allowed))

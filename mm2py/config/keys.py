"""Every configuration key mm2py understands, with MM2's types and defaults.

The tables follow MM2's ConfigDefs (MirrorMakerConfig, MirrorConnectorConfig, MirrorSourceConfig,
MirrorCheckpointConfig, MirrorHeartbeatConfig) so that a key means here what it means to MM2. Validation
uses them to find unknown keys (with a did-you-mean), and the typed flow configuration takes its defaults
from them. mm2py's own keys all live under ``mm2py.``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mm2py.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
)


class KeyType(enum.Enum):
    STRING = "string"
    LIST = "list"
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    SHORT = "short"
    DOUBLE = "double"
    CLASS = "class"
    PASSWORD = "password"


@dataclass(frozen=True)
class KeyDef:
    """One key: its type and default as MM2 declares them, the connectors that read it, and what it is for."""

    name: str
    type: KeyType
    default: str | None
    doc: str
    connectors: str = "SCH"  # S = source, C = checkpoint, H = heartbeat connector; "M" = top level only
    choices: tuple[str, ...] = ()
    minimum: int | None = None


def _k(
    name: str,
    type_: KeyType,
    default: str | None,
    doc: str,
    connectors: str = "SCH",
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
) -> KeyDef:
    return KeyDef(name, type_, default, doc, connectors, choices, minimum)


S, L, B, INT, LG, SH, C = (
    KeyType.STRING,
    KeyType.LIST,
    KeyType.BOOLEAN,
    KeyType.INT,
    KeyType.LONG,
    KeyType.SHORT,
    KeyType.CLASS,
)

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

CONNECTOR_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        # Common to the three connectors (MirrorConnectorConfig)
        _k("enabled", B, "true", "whether this flow replicates (the driver inserts false unless set)"),
        _k("source.cluster.alias", S, None, "source alias; filled in per flow"),
        _k("target.cluster.alias", S, "target", "target alias; filled in per flow"),
        _k("admin.timeout.ms", LG, "60000", "timeout of each admin step", minimum=1),
        _k("replication.policy.class", C, DEFAULT_POLICY, "remote-topic naming policy"),
        _k("replication.policy.separator", S, ".", "separator of remote topic names"),
        _k(
            "replication.policy.internal.topic.separator.enabled",
            B,
            "true",
            "use the separator in internal topic names too (KIP-949)",
        ),
        _k("forwarding.admin.class", C, "org.apache.kafka.clients.admin.ForwardingAdmin", "admin wrapper (KIP-787)"),
        _k("metric.reporters", L, "org.apache.kafka.common.metrics.JmxReporter", "metrics reporters"),
        _k("name", S, None, "connector name"),
        _k("connector.class", C, None, "connector class"),
        _k("tasks.max", INT, "1", "maximum number of tasks", minimum=1),
        _k("tasks.max.enforce", B, "true", "enforce tasks.max"),
        _k("key.converter", C, None, "Connect key converter"),
        _k("value.converter", C, None, "Connect value converter"),
        _k("header.converter", C, None, "Connect header converter"),
        _k("transforms", L, "", "single message transforms"),
        _k("predicates", L, "", "SMT predicates"),
        _k("config.action.reload", S, "restart", "Connect config reload action"),
        _k("errors.retry.timeout", LG, "0", "Connect error retry timeout"),
        _k("errors.retry.delay.max.ms", LG, "60000", "Connect error retry delay"),
        _k("errors.tolerance", S, "none", "Connect error tolerance", choices=("none", "all")),
        _k("errors.log.enable", B, "false", "Connect error logging"),
        _k("errors.log.include.messages", B, "false", "Connect error logging of messages"),
        # MirrorSourceConnector
        _k("topics", L, DEFAULT_TOPICS, "topics to replicate (regexes, whole-name match)", "SC"),
        _k("topics.exclude", L, DEFAULT_TOPICS_EXCLUDE, "topics never replicated; wins over topics", "SC"),
        _k("topic.filter.class", C, "org.apache.kafka.connect.mirror.DefaultTopicFilter", "topic filter plugin", "SC"),
        _k("config.properties.exclude", L, DEFAULT_CONFIG_PROPERTIES_EXCLUDE, "topic configs never copied", "S"),
        _k(
            "config.property.filter.class",
            C,
            "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
            "config property filter plugin",
            "S",
        ),
        _k("consumer.poll.timeout.ms", LG, "1000", "poll timeout of the replication consumer", "SC", minimum=0),
        _k("refresh.topics.enabled", B, "true", "re-scan source topics periodically", "S"),
        _k("refresh.topics.interval.seconds", LG, "600", "how often to re-scan source topics", "S", minimum=0),
        _k("sync.topic.configs.enabled", B, "true", "copy topic configs periodically", "S"),
        _k("sync.topic.configs.interval.seconds", LG, "600", "how often to copy topic configs", "S", minimum=0),
        _k("sync.topic.acls.enabled", B, "true", "copy topic ACLs periodically", "S"),
        _k("sync.topic.acls.interval.seconds", LG, "600", "how often to copy topic ACLs", "S", minimum=0),
        _k(
            "replication.factor",
            INT,
            "2",
            "replication factor of new remote topics (-1 = broker default)",
            "S",
            minimum=-1,
        ),
        _k(
            "offset-syncs.topic.replication.factor",
            SH,
            "3",
            "replication factor of the offset-syncs topic",
            "S",
            minimum=-1,
        ),
        _k(
            "offset-syncs.topic.location",
            S,
            "source",
            "cluster that holds the offset-syncs topic",
            "SC",
            choices=("source", "target"),
        ),
        _k("offset.lag.max", LG, "100", "maximum downstream staleness before an offset sync is sent", "S", minimum=0),
        _k("emit.offset-syncs.enabled", B, "true", "write offset syncs at all", "SC"),
        _k("heartbeats.replication.enabled", B, "true", "replicate heartbeats topics even if filtered out", "S"),
        _k(
            "exactly.once.support",
            S,
            "requested",
            "connector exactly-once support (flow level)",
            "S",
            choices=("requested", "required"),
        ),
        _k(
            "transaction.boundary",
            S,
            "poll",
            "Connect transaction boundary (flow level)",
            "S",
            choices=("poll", "interval", "connector"),
        ),
        # MirrorCheckpointConnector
        _k("groups", L, DEFAULT_GROUPS, "consumer groups to checkpoint (regexes)", "C"),
        _k("groups.exclude", L, DEFAULT_GROUPS_EXCLUDE, "consumer groups never checkpointed", "C"),
        _k("group.filter.class", C, "org.apache.kafka.connect.mirror.DefaultGroupFilter", "group filter plugin", "C"),
        _k("refresh.groups.enabled", B, "true", "re-list source groups periodically", "C"),
        _k("refresh.groups.interval.seconds", LG, "600", "how often to re-list source groups", "C", minimum=0),
        _k("emit.checkpoints.enabled", B, "true", "write checkpoints", "C"),
        _k("emit.checkpoints.interval.seconds", LG, "60", "how often to write checkpoints", "C", minimum=0),
        _k("sync.group.offsets.enabled", B, "false", "commit translated offsets to target groups (KIP-545)", "C"),
        _k("sync.group.offsets.interval.seconds", LG, "60", "how often to commit translated offsets", "C", minimum=0),
        _k(
            "checkpoints.topic.replication.factor",
            SH,
            "3",
            "replication factor of the checkpoints topic",
            "C",
            minimum=-1,
        ),
        # MirrorHeartbeatConnector
        _k("emit.heartbeats.enabled", B, "true", "write heartbeats", "H"),
        _k("emit.heartbeats.interval.seconds", LG, "1", "how often to write heartbeats", "H", minimum=0),
        _k(
            "heartbeats.topic.replication.factor",
            SH,
            "3",
            "replication factor of the heartbeats topic",
            "H",
            minimum=-1,
        ),
        # Read only by DefaultConfigPropertyFilter; not a ConfigDef key, so MM2 honours it at flow level only.
        _k("use.defaults.from", S, "target", "whose topic-config defaults apply", "S"),
    )
}

# Keys that MirrorMakerConfig itself defines (top level only).
MIRROR_MAKER_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        _k("clusters", L, None, "cluster aliases", "M"),
        _k("dedicated.mode.enable.internal.rest", B, "false", "KIP-710 internal REST server", "M"),
        _k("config.providers", L, "", "config providers for ${provider:path:key}", "M"),
        _k("listeners", L, "http://:8083", "internal REST listeners", "M"),
        _k("rest.advertised.host.name", S, None, "advertised REST host", "M"),
        _k("rest.advertised.port", INT, None, "advertised REST port", "M"),
        _k("rest.advertised.listener", S, None, "advertised REST listener", "M"),
        _k("access.control.allow.origin", S, "", "REST CORS origin", "M"),
        _k("access.control.allow.methods", S, "", "REST CORS methods", "M"),
        _k("response.http.headers.config", S, "", "REST response headers", "M"),
        _k("ssl.client.auth", S, "none", "REST TLS client auth", "M"),
    )
}

# Keys of mm2py itself (house rule: one prefix, mm2py.).
MM2PY_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        _k("mm2py.spark.master", S, "local[*]", "Spark master URL for run", "M"),
        _k("mm2py.spark.deploy-mode", S, "client", "Spark deploy mode", "M", choices=("client", "cluster")),
        _k(
            "mm2py.batch.max.records",
            INT,
            "500000",
            "records one copy task moves per partition and batch",
            "M",
            minimum=1,
        ),
        _k(
            "mm2py.continuous.follow.ms",
            INT,
            "10000",
            "continuous mode on the batch path: how long each copy task keeps copying new records as they arrive "
            "before it reports its progress (a stop waits for it); 0 copies in rounds, one Spark job each",
            "M",
            minimum=0,
        ),
        _k(
            "mm2py.retry.timeout.seconds",
            INT,
            "300",
            "how long a run retries failing batches (broker stalls, task failures) before it gives up",
            "M",
            minimum=0,
        ),
        _k(
            "mm2py.lease.enabled",
            B,
            "true",
            "a run holds a lease on each flow (a consumer-group membership on the target), so one run copies it",
            "M",
        ),
        _k(
            "mm2py.lease.session.timeout.ms",
            INT,
            "10000",
            "how long a dead lease holder keeps its flow before a standby takes over (the target broker must allow "
            "it: group.min.session.timeout.ms, 6000 by default)",
            "M",
            minimum=1000,
        ),
        _k(
            "mm2py.offset-syncs.dense.retention.ms",
            LG,
            "604800000",
            "how long mm2py's dense offset syncs (its own topic, cleanup.policy=delete) are kept",
            "M",
            minimum=-1,
        ),
        _k(
            "mm2py.offset-syncs.dense.enabled",
            B,
            "true",
            "also sync the first and last record of every run, for exact offset translation",
            "M",
        ),
        _k(
            "mm2py.provenance.header.enabled",
            B,
            "false",
            "stamp each copied record with its origin (source cluster, topic, partition, offset)",
            "M",
        ),
        _k(
            "mm2py.copy.mode",
            S,
            "auto",
            "how records are copied: batch forwards whole record batches, record re-produces each record, auto "
            "takes batch unless the flow needs per-record work",
            "M",
            choices=("auto", "batch", "record"),
        ),
        _k(
            "mm2py.metrics.port",
            INT,
            "0",
            "port of the Prometheus /metrics endpoint that run serves while it runs (0: no endpoint)",
            "M",
            minimum=0,
        ),
        _k("mm2py.metrics.host", S, "0.0.0.0", "address the /metrics endpoint listens on", "M"),
    )
}
SPARK_CONF_PREFIX = "mm2py.spark.conf."

# "Connection keys" (MirrorConnectorConfig; docs/mm2-semantics.md, *Client settings*): what a cluster-level
# setting contributes to every client.
CONNECTION_KEYS: frozenset[str] = frozenset(
    (
        "bootstrap.servers",
        "security.protocol",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
    )
)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")

# Top-level keys copied by raw prefix into Connect worker configs (MirrorMakerConfig.workerConfig).
WORKER_PREFIXES = (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "replication.policy",
)

# Connect worker keys that make sense per target cluster (`B.<key>`).
WORKER_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        _k(
            "exactly.once.source.support",
            S,
            "disabled",
            "transactional copy on this target (KIP-618)",
            "M",
            choices=("disabled", "preparing", "enabled"),
        ),
        _k("offset.flush.interval.ms", LG, "60000", "how often progress is recorded", "M", minimum=0),
        _k("offset.flush.timeout.ms", LG, "5000", "progress flush timeout", "M", minimum=0),
        _k("group.id", S, None, "Connect worker group", "M"),
        _k("client.id", S, None, "Connect worker client id", "M"),
        _k("offset.storage.topic", S, None, "Connect offsets topic", "M"),
        _k("config.storage.topic", S, None, "Connect configs topic", "M"),
        _k("status.storage.topic", S, None, "Connect status topic", "M"),
        _k("offset.storage.replication.factor", SH, "3", "RF of the Connect offsets topic", "M", minimum=-1),
        _k("config.storage.replication.factor", SH, "3", "RF of the Connect configs topic", "M", minimum=-1),
        _k("status.storage.replication.factor", SH, "3", "RF of the Connect status topic", "M", minimum=-1),
        _k("offset.storage.partitions", INT, "25", "partitions of the Connect offsets topic", "M", minimum=1),
        _k("status.storage.partitions", INT, "5", "partitions of the Connect status topic", "M", minimum=1),
        _k("topic.creation.enable", B, "true", "Connect topic creation (MM2 creates its topics itself)", "M"),
    )
}

# 3.x aliases removed in Kafka 4.0 (KAFKA-17529): accepted as their new key, with a warning.
RENAMED_KEYS = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}

# Keys that appear in old docs and blog posts but were never MM2 keys; MM2 silently ignores them.
NEVER_VALID_KEYS = {
    "emit.heartbeats": "emit.heartbeats.enabled",
    "sync.group.offsets": "sync.group.offsets.enabled",
    "emit.checkpoints": "emit.checkpoints.enabled",
    "sync.acls.enabled": "sync.topic.acls.enabled",
    "emit.checkpoints.interval": "emit.checkpoints.interval.seconds",
    "emit.heartbeats.interval": "emit.heartbeats.interval.seconds",
    "sync.topic.configs.interval": "sync.topic.configs.interval.seconds",
    "refresh.topics.interval": "refresh.topics.interval.seconds",
    "refresh.groups.interval": "refresh.groups.interval.seconds",
    "sync.group.offsets.interval": "sync.group.offsets.interval.seconds",
}


# Keys read by plugins or Connect, not by a MM2 ConfigDef: MM2 drops them at the top level (*Flattening*).
FLOW_LEVEL_ONLY_KEYS = frozenset({"use.defaults.from", "exactly.once.support", "transaction.boundary"})


def all_top_level_names() -> list[str]:
    """Every exact top-level key name, for did-you-mean suggestions."""
    return sorted({*CONNECTOR_KEYS, *MIRROR_MAKER_KEYS, *MM2PY_KEYS, *CONNECTION_KEYS})


def is_known_top_level(key: str) -> bool:
    """Whether MM2 (or mm2py) gives a top-level key a meaning."""
    return (
        key in CONNECTOR_KEYS
        or key in MIRROR_MAKER_KEYS
        or key in MM2PY_KEYS
        or key in CONNECTION_KEYS
        or key.startswith(SPARK_CONF_PREFIX)
        or key.startswith("config.providers.")
        or key.startswith(CLIENT_PREFIXES)
        or key.startswith(WORKER_PREFIXES)
        or key.startswith(("transforms.", "predicates.", "ssl.", "sasl."))
    )

"""Every configuration key mm2py understands, with MM2's types and defaults.

The tables follow MM2's ConfigDefs (MirrorMakerConfig, MirrorConnectorConfig, MirrorSourceConfig,
MirrorCheckpointConfig, MirrorHeartbeatConfig) so that a key means here what it means to MM2. Validation
uses them to find unknown keys (with a did-you-mean), and the typed flow configuration takes its defaults
from them. mm2py's own keys all live under ``mm2py.``.
"""

from __future__ import annotations

from mm2py.config.key_types import INT, LG, SH, B, C, KeyDef, L, S, k
from mm2py.config.mm2py_keys import MM2PY_KEYS, SPARK_CONF_PREFIX
from mm2py.mirror.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
)

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

CONNECTOR_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        # Common to the three connectors (MirrorConnectorConfig)
        k("enabled", B, "true", "whether this flow replicates (the driver inserts false unless set)"),
        k("source.cluster.alias", S, None, "source alias; filled in per flow"),
        k("target.cluster.alias", S, "target", "target alias; filled in per flow"),
        k("admin.timeout.ms", LG, "60000", "timeout of each admin step", minimum=1),
        k("replication.policy.class", C, DEFAULT_POLICY, "remote-topic naming policy"),
        k("replication.policy.separator", S, ".", "separator of remote topic names"),
        k(
            "replication.policy.internal.topic.separator.enabled",
            B,
            "true",
            "use the separator in internal topic names too (KIP-949)",
        ),
        k("forwarding.admin.class", C, "org.apache.kafka.clients.admin.ForwardingAdmin", "admin wrapper (KIP-787)"),
        k("metric.reporters", L, "org.apache.kafka.common.metrics.JmxReporter", "metrics reporters"),
        k("name", S, None, "connector name"),
        k("connector.class", C, None, "connector class"),
        k("tasks.max", INT, "1", "maximum number of tasks", minimum=1),
        k("tasks.max.enforce", B, "true", "enforce tasks.max"),
        k("key.converter", C, None, "Connect key converter"),
        k("value.converter", C, None, "Connect value converter"),
        k("header.converter", C, None, "Connect header converter"),
        k("transforms", L, "", "single message transforms"),
        k("predicates", L, "", "SMT predicates"),
        k("config.action.reload", S, "restart", "Connect config reload action"),
        k("errors.retry.timeout", LG, "0", "Connect error retry timeout"),
        k("errors.retry.delay.max.ms", LG, "60000", "Connect error retry delay"),
        k("errors.tolerance", S, "none", "Connect error tolerance", choices=("none", "all")),
        k("errors.log.enable", B, "false", "Connect error logging"),
        k("errors.log.include.messages", B, "false", "Connect error logging of messages"),
        # MirrorSourceConnector
        k("topics", L, DEFAULT_TOPICS, "topics to replicate (regexes, whole-name match)", "SC"),
        k("topics.exclude", L, DEFAULT_TOPICS_EXCLUDE, "topics never replicated; wins over topics", "SC"),
        k("topic.filter.class", C, "org.apache.kafka.connect.mirror.DefaultTopicFilter", "topic filter plugin", "SC"),
        k("config.properties.exclude", L, DEFAULT_CONFIG_PROPERTIES_EXCLUDE, "topic configs never copied", "S"),
        k(
            "config.property.filter.class",
            C,
            "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
            "config property filter plugin",
            "S",
        ),
        k("consumer.poll.timeout.ms", LG, "1000", "poll timeout of the replication consumer", "SC", minimum=0),
        k("refresh.topics.enabled", B, "true", "re-scan source topics periodically", "S"),
        k("refresh.topics.interval.seconds", LG, "600", "how often to re-scan source topics", "S", minimum=0),
        k("sync.topic.configs.enabled", B, "true", "copy topic configs periodically", "S"),
        k("sync.topic.configs.interval.seconds", LG, "600", "how often to copy topic configs", "S", minimum=0),
        k("sync.topic.acls.enabled", B, "true", "copy topic ACLs periodically", "S"),
        k("sync.topic.acls.interval.seconds", LG, "600", "how often to copy topic ACLs", "S", minimum=0),
        k(
            "replication.factor",
            INT,
            "2",
            "replication factor of new remote topics (-1 = broker default)",
            "S",
            minimum=-1,
        ),
        k(
            "offset-syncs.topic.replication.factor",
            SH,
            "3",
            "replication factor of the offset-syncs topic",
            "S",
            minimum=-1,
        ),
        k(
            "offset-syncs.topic.location",
            S,
            "source",
            "cluster that holds the offset-syncs topic",
            "SC",
            choices=("source", "target"),
        ),
        k("offset.lag.max", LG, "100", "maximum downstream staleness before an offset sync is sent", "S", minimum=0),
        k("emit.offset-syncs.enabled", B, "true", "write offset syncs at all", "SC"),
        k("heartbeats.replication.enabled", B, "true", "replicate heartbeats topics even if filtered out", "S"),
        k(
            "metric.names.formats",
            L,
            "legacy",
            "names the connectors' metrics have (KIP-1280, Kafka 4.3): legacy (kafka.connect.mirror MBeans), new "
            "(kafka.connect:type=plugins MBeans), or legacy,new for both while dashboards move",
            "SC",
            choices=("legacy", "new"),
        ),
        k(
            "use.incremental.alter.configs",
            S,
            "requested",
            "which Admin API syncs topic configs (KIP-894): requested = IncrementalAlterConfigs, falling back to "
            "AlterConfigs on a broker without it; required = IncrementalAlterConfigs or fail; never = AlterConfigs "
            "(Kafka 4.0 removed the key from MM2, which always acts as required)",
            "S",
            choices=("requested", "required", "never"),
        ),
        k(
            "exactly.once.support",
            S,
            "requested",
            "connector exactly-once support (flow level)",
            "S",
            choices=("requested", "required"),
        ),
        k(
            "transaction.boundary",
            S,
            "poll",
            "Connect transaction boundary (flow level)",
            "S",
            choices=("poll", "interval", "connector"),
        ),
        # MirrorCheckpointConnector
        k("groups", L, DEFAULT_GROUPS, "consumer groups to checkpoint (regexes)", "C"),
        k("groups.exclude", L, DEFAULT_GROUPS_EXCLUDE, "consumer groups never checkpointed", "C"),
        k("group.filter.class", C, "org.apache.kafka.connect.mirror.DefaultGroupFilter", "group filter plugin", "C"),
        k("refresh.groups.enabled", B, "true", "re-list source groups periodically", "C"),
        k("refresh.groups.interval.seconds", LG, "600", "how often to re-list source groups", "C", minimum=0),
        k("emit.checkpoints.enabled", B, "true", "write checkpoints", "C"),
        k("emit.checkpoints.interval.seconds", LG, "60", "how often to write checkpoints", "C", minimum=0),
        k("sync.group.offsets.enabled", B, "false", "commit translated offsets to target groups (KIP-545)", "C"),
        k("sync.group.offsets.interval.seconds", LG, "60", "how often to commit translated offsets", "C", minimum=0),
        k(
            "checkpoints.topic.replication.factor",
            SH,
            "3",
            "replication factor of the checkpoints topic",
            "C",
            minimum=-1,
        ),
        # MirrorHeartbeatConnector
        k("emit.heartbeats.enabled", B, "true", "write heartbeats", "H"),
        k("emit.heartbeats.interval.seconds", LG, "1", "how often to write heartbeats", "H", minimum=0),
        k(
            "heartbeats.topic.replication.factor",
            SH,
            "3",
            "replication factor of the heartbeats topic",
            "H",
            minimum=-1,
        ),
        # Read only by DefaultConfigPropertyFilter; not a ConfigDef key, so MM2 honours it at flow level only.
        k("use.defaults.from", S, "target", "whose topic-config defaults apply", "S"),
    )
}

# Keys that MirrorMakerConfig itself defines (top level only).
MIRROR_MAKER_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        k("clusters", L, None, "cluster aliases", "M"),
        k("dedicated.mode.enable.internal.rest", B, "false", "KIP-710 internal REST server", "M"),
        k("config.providers", L, "", "config providers for ${provider:path:key}", "M"),
        k("listeners", L, "http://:8083", "internal REST listeners", "M"),
        k("rest.advertised.host.name", S, None, "advertised REST host", "M"),
        k("rest.advertised.port", INT, None, "advertised REST port", "M"),
        k("rest.advertised.listener", S, None, "advertised REST listener", "M"),
        k("access.control.allow.origin", S, "", "REST CORS origin", "M"),
        k("access.control.allow.methods", S, "", "REST CORS methods", "M"),
        k("response.http.headers.config", S, "", "REST response headers", "M"),
        k("ssl.client.auth", S, "none", "REST TLS client auth", "M"),
    )
}

# Keys of mm2py itself (house rule: one prefix, mm2py.).
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
        # Kafka 4.1 (KIP-1139): the OIDC client's token retriever and client credentials as client keys.
        "sasl.oauthbearer.jwt.retriever.class",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.scope",
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
        k(
            "exactly.once.source.support",
            S,
            "disabled",
            "transactional copy on this target (KIP-618)",
            "M",
            choices=("disabled", "preparing", "enabled"),
        ),
        k("offset.flush.interval.ms", LG, "60000", "how often progress is recorded", "M", minimum=0),
        k("offset.flush.timeout.ms", LG, "5000", "progress flush timeout", "M", minimum=0),
        k(
            "task.shutdown.graceful.timeout.ms",
            LG,
            "5000",
            "how long a stopping run waits for its copy tasks before cancelling them",
            "M",
            minimum=0,
        ),
        k("group.id", S, None, "Connect worker group", "M"),
        k("client.id", S, None, "Connect worker client id", "M"),
        k("offset.storage.topic", S, None, "Connect offsets topic", "M"),
        k("config.storage.topic", S, None, "Connect configs topic", "M"),
        k("status.storage.topic", S, None, "Connect status topic", "M"),
        k("offset.storage.replication.factor", SH, "3", "RF of the Connect offsets topic", "M", minimum=-1),
        k("config.storage.replication.factor", SH, "3", "RF of the Connect configs topic", "M", minimum=-1),
        k("status.storage.replication.factor", SH, "3", "RF of the Connect status topic", "M", minimum=-1),
        k("offset.storage.partitions", INT, "25", "partitions of the Connect offsets topic", "M", minimum=1),
        k("status.storage.partitions", INT, "5", "partitions of the Connect status topic", "M", minimum=1),
        k("topic.creation.enable", B, "true", "Connect topic creation (MM2 creates its topics itself)", "M"),
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

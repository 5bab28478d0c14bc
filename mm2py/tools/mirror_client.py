"""MirrorClient: answers replication questions from one cluster's MM2 topics, as MM2's ``MirrorClient`` does.

Applications failing over from cluster A to cluster B need two answers that only MM2's own topics hold: where
a consumer group should resume on B (the checkpoints in ``A.checkpoints.internal``), and which clusters
replicate into B and over how many hops (the names of the ``heartbeats`` topics and their replicas). MM2
answers them with ``MirrorClient`` / ``RemoteClusterUtils``; this module gives the same answers from the same
bytes, so it works on topics written by Java MM2 as well as by mm2py.

The topic-name logic is in pure functions (``upstream_clusters_in``, ``replication_hops_in``, ...) that take a
policy and a set of names, so it is tested without a broker; ``MirrorClient`` only adds the Kafka reads.
Never imports pyspark: ``mm2py translate-offsets`` must start fast.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

from mm2py.client_settings import ClientKind, KeyIssue
from mm2py.config.client_keys.client_settings_reader import read_client_keys
from mm2py.config.keys import CLIENT_PREFIXES, CONNECTION_KEYS
from mm2py.errors import ConfigError, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.librdkafka.settings import masked
from mm2py.mirror.policy import (
    DEFAULT_REPLICATION_POLICY_CLASS,
    INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG,
    PluginError,
    ReplicationPolicy,
    load_replication_policy,
)
from mm2py.mirror.record_formats import Checkpoint, Heartbeat, RecordFormatError

logger = logging.getLogger(__name__)

REPLICATION_POLICY_CLASS_CONFIG = "replication.policy.class"
FORWARDING_ADMIN_CLASS_CONFIG = "forwarding.admin.class"
DEFAULT_FORWARDING_ADMIN_CLASS = "org.apache.kafka.clients.admin.ForwardingAdmin"
DEFAULT_TIMEOUT_S = 30.0

_Record = TypeVar("_Record", Checkpoint, Heartbeat)


# --------------------------------------------------------------------------------------------------------
# Topic-name logic (pure)
# --------------------------------------------------------------------------------------------------------


def heartbeat_topics_in(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """The heartbeats topics among ``topics``: the local one and its replicas from any number of hops."""
    return {topic for topic in topics if policy.is_heartbeats_topic(topic)}


def checkpoint_topics_in(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """The checkpoints topics among ``topics`` (one per source cluster whose groups MM2 checkpoints here)."""
    return {topic for topic in topics if policy.is_checkpoints_topic(topic)}


def is_remote_topic(policy: ReplicationPolicy, topic: str) -> bool:
    """Whether ``topic`` was replicated here: not internal, and the policy names a source cluster for it."""
    return not policy.is_internal_topic(topic) and policy.topic_source(topic) is not None


def remote_topics_in(policy: ReplicationPolicy, topics: Iterable[str], source_alias: str | None = None) -> set[str]:
    """The remote topics among ``topics``; with ``source_alias``, only those replicated directly from it."""
    return {
        topic
        for topic in topics
        if is_remote_topic(policy, topic) and (source_alias is None or policy.topic_source(topic) == source_alias)
    }


def all_sources(policy: ReplicationPolicy, topic: str) -> set[str]:
    """Every cluster alias along ``topic``'s replication chain (``c.b.heartbeats`` -> {c, b}).

    Stops at the first repeated alias, because a policy that cannot prevent cycles (Identity) would
    otherwise walk the chain forever.
    """
    sources: set[str] = set()
    current: str | None = topic
    while current is not None:
        source = policy.topic_source(current)
        if source is None or source in sources:
            break
        sources.add(source)
        current = policy.upstream_topic(current)
    return sources


def count_hops_for_topic(policy: ReplicationPolicy, topic: str, source_cluster_alias: str) -> int:
    """How many replication hops ``topic`` travelled from ``source_cluster_alias``; -1 if it did not come from it.

    ``b.a.t`` is 1 hop from b and 2 from a. A repeated alias means a cycle that can never reach the alias
    asked for, so it also answers -1.
    """
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == source_cluster_alias:
            return hops
        if source in visited:
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def upstream_clusters_in(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """The clusters replicating into the cluster holding ``topics``, directly or over several hops.

    Found from the heartbeats topics alone: every flow A->B writes heartbeats on B, and their replicas carry
    each alias of the path in their names.
    """
    upstream: set[str] = set()
    for topic in heartbeat_topics_in(policy, topics):
        upstream |= all_sources(policy, topic)
    return upstream


def replication_hops_in(policy: ReplicationPolicy, topics: Iterable[str], upstream_alias: str) -> int:
    """The fewest hops from ``upstream_alias`` to the cluster holding ``topics``; -1 when it is unreachable."""
    hops = [count_hops_for_topic(policy, topic, upstream_alias) for topic in heartbeat_topics_in(policy, topics)]
    return min((h for h in hops if h != -1), default=-1)


# --------------------------------------------------------------------------------------------------------
# Configuration (MirrorClientConfig)
# --------------------------------------------------------------------------------------------------------


def mirror_client_java_config(props: Mapping[str, str], kind: ClientKind) -> dict[str, str]:
    """The Java client settings MM2's ``MirrorClientConfig`` gives its ``kind`` client.

    Only connection keys (bootstrap, security, TLS, SASL) are kept, the top-level value overridden by the
    ``<kind>.``-prefixed one; anything else, such as ``consumer.client.id``, is dropped as MM2 drops it.
    """
    java = {key: props[key] for key in CONNECTION_KEYS if key in props}
    prefix = f"{kind}."
    java.update({key: props[prefix + key] for key in CONNECTION_KEYS if prefix + key in props})
    return java


def _raise_first_error(alias: str, kind: ClientKind, props: Mapping[str, str], issues: list[KeyIssue]) -> None:
    errors = [issue for issue in issues if issue.severity == "error"]
    if not errors:
        return
    first = errors[0]
    # Name the key the user actually wrote: the <kind>.-prefixed override when there is one.
    key = f"{kind}.{first.key}" if f"{kind}.{first.key}" in props else first.key
    more = f" ({len(errors) - 1} more problem(s) in the {kind} settings)" if len(errors) > 1 else ""
    raise ConfigError(f"{first.reason} (cluster {alias}){more}", key=key, value=first.value, allowed=first.allowed)


def _replication_policy(alias: str, props: Mapping[str, str]) -> ReplicationPolicy:
    enabled = props.get(INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG)
    if enabled is not None and enabled.strip().lower() not in ("true", "false"):
        # MirrorClientConfig declares it BOOLEAN, so Java refuses anything else before the policy sees it.
        raise ConfigError(
            f"not a boolean (cluster {alias})",
            key=INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG,
            value=enabled,
            allowed="true or false",
        )
    class_name = props.get(REPLICATION_POLICY_CLASS_CONFIG, DEFAULT_REPLICATION_POLICY_CLASS)
    try:
        return load_replication_policy(class_name, props)
    except PluginError as exc:
        raise ConfigError(str(exc), key=REPLICATION_POLICY_CLASS_CONFIG, value=class_name) from None


# --------------------------------------------------------------------------------------------------------
# MirrorClient
# --------------------------------------------------------------------------------------------------------


class MirrorClient:
    """Reads one cluster's MM2 topics (heartbeats, checkpoints) to answer replication questions, like MM2's
    MirrorClient.

    Runs on the driver (or in any plain Python process). Each read opens its own consumer and closes it, as
    ``RemoteClusterUtils`` does, so an instance holds no open consumer; the admin client that lists topics
    is created on first use and kept. Not picklable by design: never ship it to executors.
    """

    def __init__(
        self,
        alias: str,
        consumer_settings: Mapping[str, str],
        admin_settings: Mapping[str, str],
        policy: ReplicationPolicy,
    ) -> None:
        """Use librdkafka settings that are already complete (``from_properties`` builds them from MM2 keys).

        ``alias`` names the cluster in errors and log lines only; ``policy`` must be the one MM2 uses for
        this cluster, or remote topic names and the checkpoints topic name will not match.
        """
        self.alias = alias
        self.consumer_settings: dict[str, str] = dict(consumer_settings)
        self.admin_settings: dict[str, str] = dict(admin_settings)
        self.policy = policy
        self._admin = ClusterAdmin(alias, self.admin_settings)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], alias: str = "cluster") -> MirrorClient:
        """Build a client from MM2's ``MirrorClientConfig`` keys, so a config written for MM2 works unchanged.

        Reads ``bootstrap.servers``, ``security.protocol``, the ``ssl.*``/``sasl.*`` keys, ``consumer.*`` and
        ``admin.*`` overrides of those, and ``replication.policy.class``/``.separator``/
        ``.internal.topic.separator.enabled`` (the policy is configured with all of ``props``, as MM2 does).
        Raises ConfigError for anything that would make the client fail or behave otherwise than under MM2.
        """
        forwarding_admin = props.get(FORWARDING_ADMIN_CLASS_CONFIG, "").strip()
        if forwarding_admin and forwarding_admin != DEFAULT_FORWARDING_ADMIN_CLASS:
            logger.warning(
                "ignoring Java class key=%s value=%s cluster=%s: topics are listed with a plain admin",
                FORWARDING_ADMIN_CLASS_CONFIG,
                forwarding_admin,
                alias,
            )
        dropped = sorted(
            key for key in props if key.startswith(CLIENT_PREFIXES) and key.partition(".")[2] not in CONNECTION_KEYS
        )
        if dropped:
            logger.info(
                "only connection keys reach MirrorClient's clients, as in MM2; dropped keys=%s cluster=%s",
                ",".join(dropped),
                alias,
            )
        settings: dict[ClientKind, dict[str, str]] = {}
        warned: set[tuple[str, str]] = set()
        for kind in ("consumer", "admin"):
            java = mirror_client_java_config(props, kind)
            if not java.get("bootstrap.servers", "").strip():
                key = f"{kind}.bootstrap.servers" if f"{kind}.bootstrap.servers" in props else "bootstrap.servers"
                raise ConfigError(
                    f"required to reach cluster {alias}",
                    key=key,
                    value=props.get(key),
                    allowed="host:port[,host:port...]",
                )
            keys = read_client_keys(java, kind)
            translated, issues = keys.librdkafka, keys.issues
            _raise_first_error(alias, kind, props, issues)
            for issue in issues:
                if (issue.key, issue.reason) not in warned:
                    warned.add((issue.key, issue.reason))
                    logger.warning(
                        "client setting key=%s value=%s cluster=%s: %s", issue.key, issue.value, alias, issue.reason
                    )
            settings[kind] = translated
        policy = _replication_policy(alias, props)
        logger.info(
            "mirror client cluster=%s policy=%s consumer=%s admin=%s",
            alias,
            type(policy).__name__,
            masked(settings["consumer"]),
            masked(settings["admin"]),
        )
        return cls(alias, settings["consumer"], settings["admin"], policy)

    def _list_topics(self) -> set[str]:
        return set(self._admin.list_topics())

    def heartbeat_topics(self) -> set[str]:
        """The heartbeats topics on this cluster: ``heartbeats`` and its replicas (``a.heartbeats``, ...)."""
        return heartbeat_topics_in(self.policy, self._list_topics())

    def checkpoint_topics(self) -> set[str]:
        """The checkpoints topics on this cluster, one per cluster whose groups MM2 checkpoints here."""
        return checkpoint_topics_in(self.policy, self._list_topics())

    def upstream_clusters(self) -> set[str]:
        """The clusters replicating into this one, directly or over several hops (from heartbeats topics)."""
        return upstream_clusters_in(self.policy, self._list_topics())

    def replication_hops(self, upstream_alias: str) -> int:
        """The fewest hops from ``upstream_alias`` to this cluster (A->B->C: 2 from A to C); -1 if unreachable."""
        return replication_hops_in(self.policy, self._list_topics(), upstream_alias)

    def remote_topics(self, source_alias: str | None = None) -> set[str]:
        """The replicated topics on this cluster, internal topics excluded; only those directly from
        ``source_alias`` when given."""
        return remote_topics_in(self.policy, self._list_topics(), source_alias)

    def remote_consumer_offsets(
        self, group: str, remote_alias: str, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> dict[tuple[str, int], int]:
        """Where ``group`` of cluster ``remote_alias`` should resume here: (local topic, partition) -> offset.

        MM2's ``RemoteClusterUtils.translateOffsets``: the newest checkpoint per partition wins. Topic names
        are already this cluster's (checkpoints carry the renamed topic). Empty if the checkpoints topic does
        not exist. Unlike MM2, which returns what it has read when the timeout passes, this raises
        KafkaOperationError, because a partial answer would silently move the group backwards on failover.
        """
        offsets: dict[tuple[str, int], int] = {}
        for checkpoint in self.checkpoints(remote_alias, timeout_s):
            if checkpoint.consumer_group_id == group:
                offsets[(checkpoint.topic, checkpoint.partition)] = checkpoint.downstream_offset
        logger.info(
            "read checkpoints group=%s cluster=%s remote=%s partitions=%d",
            group,
            self.alias,
            remote_alias,
            len(offsets),
        )
        return offsets

    def checkpoints(self, remote_alias: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Checkpoint]:
        """Every decodable checkpoint of ``remote_alias``'s groups on this cluster, in topic order.

        Records that are not MM2 checkpoints are skipped and logged, as MM2 does, so one bad record cannot
        hide every group's position.
        """
        topic = self.policy.checkpoints_topic(remote_alias)
        deadline = time.monotonic() + timeout_s
        return list(self._decoded(Checkpoint, topic, "reading checkpoints", deadline))

    def latest_heartbeats(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[tuple[str, str], Heartbeat]:
        """The newest heartbeat per flow (source, target) found in any heartbeats topic on this cluster.

        A flow's heartbeats can arrive over several paths; the highest timestamp wins. How old it is tells
        whether that flow (and every hop after it) is still replicating.
        """
        deadline = time.monotonic() + timeout_s
        latest: dict[tuple[str, str], Heartbeat] = {}
        for topic in sorted(self.heartbeat_topics()):
            for heartbeat in self._decoded(Heartbeat, topic, "reading heartbeats", deadline):
                flow = (heartbeat.source_cluster_alias, heartbeat.target_cluster_alias)
                newest = latest.get(flow)
                if newest is None or heartbeat.timestamp >= newest.timestamp:
                    latest[flow] = heartbeat
        return latest

    def _decoded(self, record_type: type[_Record], topic: str, purpose: str, deadline: float) -> Iterator[_Record]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaOperationError(self.alias, f"{purpose} ({topic})", "timed out before it started")
        for msg in read_topic(self.alias, self.consumer_settings, topic, purpose=purpose, timeout_s=remaining):
            try:
                yield record_type.from_record(msg.key(), msg.value())
            except RecordFormatError as exc:
                # str(exc), not exc: a captured log record would keep the traceback, and with it this client.
                logger.warning(
                    "skipping undecodable record cluster=%s topic=%s partition=%s offset=%s: %s",
                    self.alias,
                    topic,
                    msg.partition(),
                    msg.offset(),
                    str(exc),
                )

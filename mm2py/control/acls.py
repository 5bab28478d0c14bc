"""Topic ACL sync, by MirrorMaker 2's rules (``sync.topic.acls.enabled``, ``sync.topic.acls.interval.seconds``).

Why it exists: consumers that fail over to the target must be allowed to read the remote topics, so MM2
copies the source's topic ACLs — but only so far that nobody gains write access to a replica, which would
let them fork it from its source. The rule (:func:`target_topic_acls`) is pure, so it is tested without a
broker; :func:`sync_topic_acls` does the two admin calls. Where it runs: on the driver, from the flow's
schedule (first run at start, then every ``sync.topic.acls.interval.seconds``). It needs no plan: like MM2,
it judges each ACL by its topic name alone, so ACLs for topics that do not exist yet are copied as well.

MM2's rules, kept exactly:

* all TOPIC ACLs of the source are described; only LITERAL patterns are kept (PREFIXED ones never);
* ALLOW + WRITE bindings are dropped;
* a binding is kept when its topic passes the flow's topic filter and MM2's replicate rules (not internal,
  no cycle back to the target; heartbeats topics when their replication is on), so a literal ``*`` becomes an
  ACL on the literal topic ``<source>.*`` when the filter accepts ``*``;
* the resource becomes the LITERAL topic ``format_remote_topic(source, name)``; ALLOW + ALL becomes
  ALLOW + READ; everything else, DENY included, is copied unchanged;
* ACLs are created on the target and never deleted there.

A source without an authorizer answers SECURITY_DISABLED: when the client reports it, one hint is logged and
the flow never asks again (as MM2 does). librdkafka 2.x reports it as an empty list instead (measured against
Kafka 4.3), and nothing is created when nothing passes, so a source that cannot hold ACLs never leads to
CreateAcls either way; the same keeps the sync away from brokers without ACL support that answer DescribeAcls
with an empty list (tansu, whose CreateAcls aborts the client process). A target without an authorizer is
one warning per sync, not a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from mm2py.config.flow import FlowConfig
from mm2py.control.plan import flow_policy, flow_topic_filter
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.admin_acls import SecurityDisabledError, TopicAcl
from mm2py.mirror.filters import should_replicate_topic
from mm2py.mirror.policy import ReplicationPolicy

log = logging.getLogger(__name__)

# (flow, source bootstrap servers) whose source has no authorizer: asked once, hinted once, never asked again
# in this process, like MM2's connector.
_WITHOUT_AUTHORIZER: set[tuple[str, str]] = set()


def target_topic_acls(
    acls: Iterable[TopicAcl], source_alias: str, policy: ReplicationPolicy, should_replicate: Callable[[str], bool]
) -> list[TopicAcl]:
    """The ACLs MM2 would create on the target for the source's topic ACLs ``acls``, in their order."""
    result: list[TopicAcl] = []
    for acl in acls:
        if acl.pattern_type != "LITERAL":
            continue
        if acl.permission == "ALLOW" and acl.operation == "WRITE":
            continue
        if not should_replicate(acl.topic):
            continue
        operation = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
        remote = policy.format_remote_topic(source_alias, acl.topic)
        target_acl = TopicAcl(remote, "LITERAL", acl.principal, acl.host, operation, acl.permission)
        if target_acl not in result:
            result.append(target_acl)
    return result


def _may(operation: str, allowed: frozenset[str] | None) -> bool:
    """Whether a cluster's authorized operations allow ``operation`` (unknown: try it and see)."""
    return allowed is None or operation in allowed or "ALL" in allowed


def sync_topic_acls(flow: FlowConfig, source_admin: ClusterAdmin, target_admin: ClusterAdmin) -> int:
    """Copy the flow's topic ACLs from source to target once; returns how many bindings the target accepted.

    Runs on the driver. Does nothing when ``sync.topic.acls.enabled`` is false or the source has no
    authorizer. Bindings the target refuses are logged as warnings and left for the next run, as in MM2;
    an unreachable cluster raises (KafkaOperationError), like every other admin call of a flow.
    """
    source_key = (flow.name, flow.source_admin.settings().get("bootstrap.servers", ""))
    if not flow.sync_topic_acls_enabled or source_key in _WITHOUT_AUTHORIZER:
        return 0
    if not _may("DESCRIBE", source_admin.cluster_operations()):
        raise KafkaOperationError(
            flow.source,
            "describing topic ACLs",
            "the cluster does not authorize Describe on it (its authorized operations, KIP-430)",
            code="CLUSTER_AUTHORIZATION_FAILED",
            principal=source_admin.principal,
        )
    try:
        source_acls = source_admin.describe_topic_acls()
    except SecurityDisabledError:
        _WITHOUT_AUTHORIZER.add(source_key)
        log.info(
            "no authorizer on the source, so no topic ACLs are synced flow=%s source=%s; set "
            "sync.topic.acls.enabled = false to skip asking",
            flow.name,
            flow.source,
        )
        return 0
    policy, topic_filter = flow_policy(flow), flow_topic_filter(flow)

    def should_replicate(topic: str) -> bool:
        return should_replicate_topic(
            topic,
            topic_filter=topic_filter,
            policy=policy,
            target_cluster_alias=flow.target,
            heartbeats_replication_enabled=flow.heartbeats_replication_enabled,
        )

    wanted = target_topic_acls(source_acls, flow.source, policy, should_replicate)
    if not wanted:
        return 0
    try:
        outcome = target_admin.create_topic_acls(wanted)
    except SecurityDisabledError:
        log.warning(
            "the target has no authorizer, so %d topic ACLs cannot be created flow=%s target=%s",
            len(wanted),
            flow.name,
            flow.target,
        )
        return 0
    for acl, error in outcome.items():
        if error is not None:
            log.warning(
                "could not create ACL flow=%s topic=%s principal=%s operation=%s permission=%s: %s",
                flow.name,
                acl.topic,
                acl.principal,
                acl.operation,
                acl.permission,
                error,
            )
    created = sum(error is None for error in outcome.values())
    log.info("synced topic ACLs flow=%s described=%d created=%d", flow.name, len(source_acls), created)
    return created

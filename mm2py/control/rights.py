"""Which of a flow's features its principals may run, from the brokers' own answers, before anything runs.

Why: ``plan`` is where a team checks a setup before the first run; on a secured cluster the question is which
ACLs are missing. Kafka answers it itself (KIP-430's authorized operations of the cluster and of each topic the
principal can see), so ``plan`` lists, per flow, each feature as possible, refused (with the ACL it lacks) or
not known before it is tried: the rights to create a topic that does not exist yet, or to use a group, are not
among those answers. The names are those of :mod:`mm2py.control.features`, whose lines ``run`` logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.plan import FlowPlan, ReplicationPlan, flow_policy
from mm2py.control.topics import checkpoints_topic, dense_offset_syncs_topic, offset_syncs_topic
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.mirror.progress import progress_topic

# Kafka's implied operations (AclEntry.java, supportedOperations / implies): Read, Write, Delete and Alter
# imply Describe; AlterConfigs implies DescribeConfigs; All implies everything.
_IMPLIED = {"READ": "DESCRIBE", "WRITE": "DESCRIBE", "DELETE": "DESCRIBE", "ALTER": "DESCRIBE"}


@dataclass(frozen=True)
class FeatureRight:
    """One feature of one flow: ``allowed`` True, False (``missing`` names what) or None (known only by trying)."""

    feature: str
    allowed: bool | None
    missing: str = ""

    def to_json(self) -> dict[str, object]:
        return {"feature": self.feature, "allowed": self.allowed, "missing": self.missing}


def _has(allowed: frozenset[str], operation: str) -> bool:
    return "ALL" in allowed or operation in allowed or any(_IMPLIED.get(op) == operation for op in allowed)


class _Checks:
    """The answers of both clusters for one flow, asked once."""

    def __init__(self, flow: FlowConfig, plan: FlowPlan, source: ClusterAdmin, target: ClusterAdmin) -> None:
        self.flow = flow
        self.cluster = {flow.source: source.cluster_operations(), flow.target: target.cluster_operations()}
        self.admins = {flow.source: source, flow.target: target}
        wanted: dict[str, list[str]] = {flow.source: [t.topic for t in plan.topics], flow.target: []}
        wanted[flow.target] += [t.remote_topic for t in plan.topics]
        self.heartbeats = flow_policy(flow).heartbeats_topic()
        wanted[flow.target] += [progress_topic(flow.source), checkpoints_topic(flow), self.heartbeats]
        wanted[flow.offset_syncs_cluster] += [offset_syncs_topic(flow), dense_offset_syncs_topic(flow)]
        self.topics: dict[str, Mapping[str, frozenset[str]]] = {
            alias: admin.topic_operations(sorted(set(wanted[alias]))) for alias, admin in self.admins.items()
        }
        self.existing = {alias: set(admin.list_topics()) for alias, admin in self.admins.items()}

    def on_cluster(self, alias: str, *operations: str) -> tuple[bool | None, str]:
        allowed = self.cluster[alias]
        if allowed is None:
            return None, ""
        lacking = [op for op in operations if not _has(allowed, op)]
        return not lacking, f"{', '.join(o.title() for o in lacking)} on cluster {alias}" if lacking else ""

    def on_topics(self, alias: str, topics: list[str], *operations: str) -> tuple[bool | None, str]:
        """Every operation on every topic; a missing topic needs Create (on the cluster, or on its name)."""
        verdict: bool | None = True
        missing: list[str] = []
        for topic in topics:
            if topic not in self.existing[alias]:
                created, _ = self.on_cluster(alias, "CREATE")
                if not created:  # a Create ACL on the topic's name would do, and cannot be asked before
                    verdict = None if verdict else verdict
                continue
            allowed = self.topics[alias].get(topic)
            if allowed is None:
                verdict = None if verdict else verdict
                continue
            lacking = [op for op in operations if not _has(allowed, op)]
            if lacking:
                verdict = False
                missing.append(f"{', '.join(o.title().replace('_', '') for o in lacking)} on topic {topic}")
        return verdict, "; ".join(missing) + (f" (cluster {alias})" if missing else "")


def _both(*answers: tuple[bool | None, str]) -> tuple[bool | None, str]:
    """All must hold: False if any is, else None if any is unknown."""
    verdicts = [a for a, _ in answers]
    missing = "; ".join(m for _, m in answers if m)
    if False in verdicts:
        return False, missing
    return (None if None in verdicts else True), missing


def flow_rights(flow: FlowConfig, plan: FlowPlan, source: ClusterAdmin, target: ClusterAdmin) -> list[FeatureRight]:
    """Each feature of ``flow`` as its principals may run it, by the brokers' answers (see the module)."""
    checks = _Checks(flow, plan, source, target)
    f, sources, remotes = flow, [t.topic for t in plan.topics], [t.remote_topic for t in plan.topics]
    syncs_at = f.offset_syncs_cluster
    answers = {
        "copy": _both(
            checks.on_topics(f.source, sources, "READ"),
            checks.on_topics(f.target, remotes, "WRITE"),
            checks.on_topics(f.target, [progress_topic(f.source)], "READ", "WRITE"),
        ),
        "topic config sync": _both(
            checks.on_topics(f.source, sources, "DESCRIBE_CONFIGS"),
            checks.on_topics(f.target, remotes, "ALTER_CONFIGS"),
        ),
        "topic ACL sync": _both(checks.on_cluster(f.source, "DESCRIBE"), checks.on_cluster(f.target, "ALTER")),
        "offset syncs": checks.on_topics(syncs_at, [offset_syncs_topic(f)], "READ", "WRITE"),
        "dense offset syncs": checks.on_topics(syncs_at, [dense_offset_syncs_topic(f)], "READ", "WRITE"),
        "checkpoints": checks.on_topics(f.target, [checkpoints_topic(f)], "READ", "WRITE"),
        "heartbeats": checks.on_topics(f.target, [checks.heartbeats], "WRITE"),
    }
    enabled = {
        "topic config sync": f.sync_topic_configs_enabled,
        "topic ACL sync": f.sync_topic_acls_enabled,
        "offset syncs": f.emit_offset_syncs_enabled,
        "dense offset syncs": f.emit_offset_syncs_enabled and f.dense_offset_syncs,
        "checkpoints": f.emit_checkpoints_enabled and f.emit_offset_syncs_enabled,
        "heartbeats": f.emit_heartbeats_enabled,
    }
    return [
        FeatureRight(name, allowed, missing) for name, (allowed, missing) in answers.items() if enabled.get(name, True)
    ]


def plan_rights(flows: list[FlowConfig], plan: ReplicationPlan, pool: AdminPool) -> dict[str, list[FeatureRight]]:
    """:func:`flow_rights` of every flow of ``plan``, by flow name."""
    return {
        p.name: flow_rights(f, p, pool.admin(f.source, f), pool.admin(f.target, f))
        for f, p in zip(flows, plan.flows, strict=True)
    }

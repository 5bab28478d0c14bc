"""The replication plan: which source topics each flow copies, under which remote name, and what ``run``
must do to the target first (create, grow, nothing).

Planning runs on the driver and never touches records. It also finds what MM2 never tells you: several
sources feeding one remote topic (an N->1 merge, usual with IdentityReplicationPolicy) and sources of such
a merge that disagree on the partition count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.copy_path import choose_copy_path
from mm2py.executor.contract import CopyPath
from mm2py.mirror.filters import TopicFilter, load_topic_filter, should_replicate_topic
from mm2py.mirror.policy import ReplicationPolicy, load_replication_policy

Action = Literal["create", "grow", "up to date"]


@dataclass(frozen=True)
class TopicPlan:
    topic: str
    remote_topic: str
    partitions: int  # source partitions
    action: Action
    # The remote topic's partition count once run has acted: the largest of every source feeding it (N->1) and
    # of what the target already has (topics are never shrunk).
    target_partitions: int
    merged_from: tuple[str, ...] = ()  # every source alias feeding remote_topic on this target (N->1)
    # Properties set on the source topic that the ConfigPropertyFilter keeps off the remote topic (tiered
    # storage's, by default): filled in for ``mm2py plan`` only (control.topics.with_configs_not_synced).
    configs_not_synced: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "topic": self.topic,
            "remote_topic": self.remote_topic,
            "partitions": self.partitions,
            "action": self.action,
            "target_partitions": self.target_partitions,
        }
        if self.merged_from:
            data["merged_from"] = list(self.merged_from)
        if self.configs_not_synced:
            data["configs_not_synced"] = dict(self.configs_not_synced)
        return data


@dataclass(frozen=True)
class FlowPlan:
    source: str
    target: str
    topics: tuple[TopicPlan, ...]
    copy_path: CopyPath  # the path run takes, decided here once (mm2py.control.copy_path)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "path": self.copy_path.describe(),
            "topics": [t.to_json() for t in self.topics],
        }


@dataclass(frozen=True)
class Merge:
    """One remote topic fed by several sources."""

    target: str
    remote_topic: str
    source_partitions: Mapping[str, int]

    @property
    def conflict(self) -> bool:
        return len(set(self.source_partitions.values())) > 1

    def describe(self) -> str:
        parts = ", ".join(f"{s} ({n} partitions)" for s, n in sorted(self.source_partitions.items()))
        text = f"{self.target}:{self.remote_topic} merges {parts}"
        if self.conflict:
            most = max(self.source_partitions.values())
            text += (
                f"; the partition counts differ: the remote topic gets {most}, and a partition n "
                "receives records only from sources that have partition n"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "remote_topic": self.remote_topic,
            "sources": dict(sorted(self.source_partitions.items())),
            "partition_conflict": self.conflict,
        }


@dataclass(frozen=True)
class ReplicationPlan:
    flows: tuple[FlowPlan, ...]
    merges: tuple[Merge, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"flows": [f.to_json() for f in self.flows], "merges": [m.to_json() for m in self.merges]}


def flow_policy(flow: FlowConfig) -> ReplicationPolicy:
    """The flow's ReplicationPolicy, configured as MM2 configures it (with the flow's connector config)."""
    return load_replication_policy(flow.replication_policy_class, flow.plugin_config())


def flow_topic_filter(flow: FlowConfig) -> TopicFilter:
    return load_topic_filter(flow.topic_filter_class, flow.plugin_config())


def select_topics(flow: FlowConfig, source_topics: Iterable[str]) -> list[str]:
    """Source topics the flow replicates: MM2's filter, internal-topic and cycle rules
    (docs/mm2-semantics.md, *Which topics a flow replicates*)."""
    policy = flow_policy(flow)
    topic_filter = flow_topic_filter(flow)
    return sorted(
        t
        for t in source_topics
        if should_replicate_topic(
            t,
            topic_filter=topic_filter,
            policy=policy,
            target_cluster_alias=flow.target,
            heartbeats_replication_enabled=flow.heartbeats_replication_enabled,
        )
    )


def build_plan(flows: list[FlowConfig], pool: AdminPool | None = None, refresh: bool = False) -> ReplicationPlan:
    """Ask every cluster involved what exists and compute each flow's topic actions."""
    pool = pool or AdminPool()
    selected: list[tuple[FlowConfig, list[tuple[str, str, int]]]] = []
    wanted: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)  # (target, remote) -> source -> parts
    for flow in flows:
        source_topics = pool.topics(flow.source, flow, refresh)
        pool.topics(flow.target, flow, refresh)  # fail early, naming the target, when it is unreachable
        policy = flow_policy(flow)
        rows = []
        for topic in select_topics(flow, source_topics):
            remote = policy.format_remote_topic(flow.source, topic)
            partitions = source_topics[topic].partitions
            rows.append((topic, remote, partitions))
            wanted[(flow.target, remote)][flow.source] = partitions
        selected.append((flow, rows))

    flow_plans = []
    for flow, rows in selected:
        target_topics = pool.topics(flow.target, flow)
        topic_plans = []
        for topic, remote, partitions in rows:
            sources = wanted[(flow.target, remote)]
            existing = target_topics.get(remote)
            # A merged remote topic must hold the partitions of its widest source, whichever flow creates it
            # first: every source partition p lands in remote partition p.
            final = max([*sources.values(), existing.partitions if existing else 0])
            action: Action
            if existing is None:
                action = "create"
            elif existing.partitions < final:
                action = "grow"
            else:
                action = "up to date"
            merged = tuple(sorted(sources)) if len(sources) > 1 else ()
            topic_plans.append(TopicPlan(topic, remote, partitions, action, final, merged))
        flow_plans.append(FlowPlan(flow.source, flow.target, tuple(topic_plans), choose_copy_path(flow)))
    merges = tuple(
        Merge(target, remote, dict(sources)) for (target, remote), sources in sorted(wanted.items()) if len(sources) > 1
    )
    return ReplicationPlan(tuple(flow_plans), merges)

"""What a flow can do without: its optional features, and what the run says and does when an ACL refuses one.

Why: MirrorMaker 2 logs a refused topic creation, config sync or ACL sync and goes on replicating, so teams
grant its user only what Strimzi's documentation lists. mm2py writes more than MM2 (its dense offset syncs, its
lease), and a flow must not stop because the security team did not grant those. Each optional feature is
therefore switched off for the run when the cluster refuses it, with one line per flow naming the feature, the
principal, the ACL that would enable it, the key that switches it off for good and what the run does instead;
``/health`` and the ``mm2py_feature_skipped`` metric show the same. What the copy cannot live without (reading
the source topics, writing the remote topics and the progress topic) is never optional: a refusal of that stops
the flow at once (no retrying an authorization answer).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.errors import KafkaOperationError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Feature:
    """An optional feature of a flow: its name, the key that switches it off (and its FlowConfig field), what
    the run does without it."""

    name: str
    key: str
    field: str
    without: str


HEARTBEATS = Feature("heartbeats", "emit.heartbeats.enabled", "emit_heartbeats_enabled", "no heartbeats are written")
OFFSET_SYNCS = Feature(
    "offset syncs",
    "emit.offset-syncs.enabled",
    "emit_offset_syncs_enabled",
    "no offset syncs, so no checkpoints and no group offset sync",
)
DENSE_OFFSET_SYNCS = Feature(
    "dense offset syncs",
    "mm2py.offset-syncs.dense.enabled",
    "dense_offset_syncs",
    "offsets are translated with MM2's syncs alone (exact within offset.lag.max of the copy)",
)
CHECKPOINTS = Feature(
    "checkpoints", "emit.checkpoints.enabled", "emit_checkpoints_enabled", "no checkpoints and no group offset sync"
)
LEASE = Feature(
    "lease", "mm2py.lease.enabled", "lease_enabled", "the run copies without a lease (nothing keeps a second run out)"
)
CONFIG_SYNC = Feature(
    "topic config sync",
    "sync.topic.configs.enabled",
    "sync_topic_configs_enabled",
    "remote topics keep the configs they have",
)
ACL_SYNC = Feature(
    "topic ACL sync",
    "sync.topic.acls.enabled",
    "sync_topic_acls_enabled",
    "no source topic ACLs are copied to the target",
)
GROUP_OFFSET_SYNC = Feature(
    "group offset sync",
    "sync.group.offsets.enabled",
    "sync_group_offsets_enabled",
    "group offsets are not committed on the target",
)


@dataclass(frozen=True)
class SkippedFeature:
    """A feature a flow runs without, because ``error`` (an authorization refusal) said it may not."""

    source: str
    target: str
    feature: Feature
    grant: str  # the ACL that would enable it, e.g. "Create, Write and Read on topic X (cluster src)"
    error: KafkaOperationError

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def line(self) -> str:
        who = self.error.principal or "this principal"
        return (
            f"flow={self.flow}: {self.feature.name} skipped: {self.error.alias} refused {who} "
            f"({self.error.operation}: {self.error.cause}); grant {self.grant} to enable it, or set "
            f"{self.feature.key} = false; {self.feature.without}"
        )


def without(flow: FlowConfig, feature: Feature) -> FlowConfig:
    """``flow`` with ``feature`` switched off for this run, as its key set to false would."""
    switched: dict[str, Any] = {feature.field: False}
    return replace(flow, **switched)


def topic_grant(cluster: str, topic: str) -> str:
    """The ACL a refused internal topic needs (creation, then writing and reading it)."""
    return f"Create, Write and Read on topic {topic} (cluster {cluster})"

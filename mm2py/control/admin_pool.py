"""The driver's admin clients: one per cluster alias, shared by every flow of a command, with each cluster's topic
listing kept until a caller asks for a fresh one.

Why one pool: a run of six flows into one target would otherwise open six admin connections to it, and plan,
topic creation, syncs, lag and the cut-over commands all ask the same clusters the same questions.
"""

from __future__ import annotations

from collections.abc import Callable

from mm2py.config.flow import FlowConfig
from mm2py.librdkafka.admin import ClusterAdmin, TopicInfo


class AdminPool:
    """One admin client per cluster alias, shared by all flows of a command."""

    def __init__(self, factory: Callable[[str, FlowConfig, str], ClusterAdmin] | None = None) -> None:
        self._admins: dict[str, ClusterAdmin] = {}
        self._topics: dict[str, dict[str, TopicInfo]] = {}
        self._factory = factory or _default_admin

    def admin(self, alias: str, flow: FlowConfig) -> ClusterAdmin:
        if alias not in self._admins:
            side = "source" if alias == flow.source else "target"
            self._admins[alias] = self._factory(alias, flow, side)
        return self._admins[alias]

    def topics(self, alias: str, flow: FlowConfig, refresh: bool = False) -> dict[str, TopicInfo]:
        if refresh or alias not in self._topics:
            self._topics[alias] = self.admin(alias, flow).list_topics()
        return self._topics[alias]


def _default_admin(alias: str, flow: FlowConfig, side: str) -> ClusterAdmin:
    client = flow.source_admin if side == "source" else flow.target_admin
    assert client is not None
    return ClusterAdmin(alias, client.settings(), flow.admin_timeout_ms / 1000)

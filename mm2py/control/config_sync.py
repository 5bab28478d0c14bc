"""MM2's periodic topic-config sync (driver side): the source topics' configs onto their remote topics.

Which properties: those the ConfigPropertyFilter lets through (``config.properties.exclude``, by default MM2's
list plus tiered storage's configs, and ``use.defaults.from``). How, as KIP-894 defines
``use.incremental.alter.configs`` (MirrorSourceConnector, Kafka 3.5 to 3.9; Kafka 4.0 removed the key and
always behaves as ``required``):

- ``requested`` (the default): IncrementalAlterConfigs, which sets the copied properties and deletes those that
  are defaults on the source, touching nothing else; a target broker without that API (UNSUPPORTED_VERSION)
  makes the flow fall back to AlterConfigs for the rest of the run, with a warning;
- ``required``: IncrementalAlterConfigs only; a target without it stops the run (exit 3), as MM2 fails the
  connector;
- ``never``: AlterConfigs, which replaces the remote topic's whole dynamic config with the copied properties
  (so an override set on the target alone is removed, as MM2's deprecated path does).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from mm2py.config.flow import FlowConfig
from mm2py.control.plan import FlowPlan
from mm2py.control.topics import config_property_filter, remote_topic_configs
from mm2py.errors import ReplicationError
from mm2py.librdkafka.admin import ClusterAdmin, TopicConfigValue, UnsupportedByBrokerError

log = logging.getLogger(__name__)


def config_sync_ops(flow: FlowConfig, source_configs: Mapping[str, TopicConfigValue]) -> dict[str, str | None]:
    """MM2's incremental config sync for one topic: property -> value to SET, or None to DELETE.

    Every property the ConfigPropertyFilter lets through is considered, defaults included: a source default is
    deleted on the remote topic (so the target's own default applies again, undoing an override an earlier sync
    or a person set), unless ``use.defaults.from = source``, in which case the source's default value is SET.
    Excluded properties are never touched, so a target-side override of one survives.
    """
    prop_filter = config_property_filter(flow)
    ops: dict[str, str | None] = {}
    for name, value in source_configs.items():
        if not prop_filter.should_replicate_config_property(name):
            continue
        if value.is_default and not prop_filter.should_replicate_source_default(name):
            ops[name] = None
        else:
            ops[name] = value.value
    return ops


class TopicConfigSync:
    """One flow's config sync, remembering (as MM2's connector does) that its target lacks the incremental API."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self.incremental = flow.use_incremental_alter_configs != "never"

    def sync(self, plan: FlowPlan, source: ClusterAdmin, target: ClusterAdmin) -> int:
        """Sync every remote topic of ``plan``; returns how many topics were altered."""
        pairs = [(t.topic, t.remote_topic) for t in plan.topics]
        source_configs = source.describe_topic_configs([s for s, _ in pairs])
        if not self.incremental:
            return self._replace(pairs, source_configs, target)
        try:
            return target.incremental_alter_configs(self._incremental_resources(pairs, source_configs))
        except UnsupportedByBrokerError as exc:
            if self.flow.use_incremental_alter_configs == "required":
                raise ReplicationError(
                    f"flow {self.flow.name}: use.incremental.alter.configs = required, but {self.flow.target} "
                    f"does not support IncrementalAlterConfigs ({exc.cause}); set it to requested or never",
                    code="UNSUPPORTED_VERSION",
                    retriable=False,
                ) from None
            log.warning(
                "flow=%s: %s does not support IncrementalAlterConfigs (%s); syncing topic configs with the "
                "deprecated AlterConfigs from now on (use.incremental.alter.configs = requested)",
                self.flow.name,
                self.flow.target,
                exc.cause,
            )
            self.incremental = False
            return self._replace(pairs, source_configs, target)

    def _incremental_resources(
        self, pairs: list[tuple[str, str]], source_configs: Mapping[str, Mapping[str, TopicConfigValue]]
    ) -> list[ConfigResource]:
        resources = []
        for topic, remote in pairs:
            ops = config_sync_ops(self.flow, source_configs.get(topic, {}))
            entries = [
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                if v is not None
                else ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE)
                for k, v in sorted(ops.items())
            ]
            if entries:
                resources.append(ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=entries))
        return resources

    def _replace(
        self,
        pairs: list[tuple[str, str]],
        source_configs: Mapping[str, Mapping[str, TopicConfigValue]],
        target: ClusterAdmin,
    ) -> int:
        """AlterConfigs: each remote topic's dynamic config becomes exactly what MM2 copies (MM2's
        ``targetConfig`` with incremental off: set properties, and source defaults under use.defaults.from)."""
        resources = [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                remote,
                set_config=remote_topic_configs(self.flow, source_configs.get(topic, {})),
            )
            for topic, remote in pairs
        ]
        return target.alter_configs(resources)

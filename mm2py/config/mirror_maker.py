"""MirrorMakerConfig: the one class that understands ``A.`` and ``A->B.`` prefixes and flattens them.

It reproduces MM2's layering exactly (docs/mm2-semantics.md, *Flattening*; MirrorMakerConfig.java): which keys a flow's
connectors see, how cluster-level keys reach clients, and which flows exist. Every flattened value keeps the
raw key it came from, so a problem found anywhere downstream can still be reported as ``file:line``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mm2py.config.keys import (
    CLIENT_PREFIXES,
    CONNECTION_KEYS,
    CONNECTOR_KEYS,
    FLOW_LEVEL_ONLY_KEYS,
    RENAMED_KEYS,
    WORKER_KEYS,
    WORKER_PREFIXES,
)
from mm2py.config.properties import ProviderProblem, RawProperties, read_properties, resolve_variables
from mm2py.config.values import Setting
from mm2py.mirror.filters import parse_list

Side = Literal["source", "target"]
ClientKind = Literal["consumer", "producer", "admin"]
Props = dict[str, Setting]

# ConfigDef names copied from the top level into every connector config (*Flattening*, step 1). The connector
# ConfigDefs define security.protocol, ssl.* and sasl.* but not bootstrap.servers, which reaches clients
# only through the cluster props.
_CONNECTOR_CONFIG_NAMES = (frozenset(CONNECTOR_KEYS) - FLOW_LEVEL_ONLY_KEYS) | (CONNECTION_KEYS - {"bootstrap.servers"})


@dataclass(frozen=True, order=True)
class Flow:
    """An ordered pair of cluster aliases, printed the MM2 way: ``dc1->target``."""

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"

    @classmethod
    def parse(cls, text: str) -> Flow:
        source, sep, target = text.partition("->")
        if not sep or not source.strip() or not target.strip():
            raise ValueError(f"'{text}' is not a flow; write SOURCE->TARGET, e.g. dc1->target")
        return cls(source.strip(), target.strip())


class MirrorMakerConfig:
    """The whole file, resolved (config providers applied) and ready to be flattened per flow."""

    def __init__(self, raw: RawProperties, environ: Mapping[str, str] | None = None) -> None:
        self.raw = raw
        self.source = raw.source
        resolved, problems, provided = resolve_variables(raw.values(), environ)
        self.provider_problems: list[ProviderProblem] = problems
        self.provided_values: frozenset[str] = frozenset(provided)  # what config providers gave: never printed
        self._props: Props = {k: Setting(v, k) for k, v in resolved.items()}
        # MM2 keeps the aliases in a set: an alias listed twice still yields each flow once.
        aliases = parse_list(resolved.get("clusters", ""))
        self.clusters: tuple[str, ...] = tuple(dict.fromkeys(aliases))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> MirrorMakerConfig:
        return cls(read_properties(Path(path)), environ)

    # -- raw access ---------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        setting = self._props.get(key)
        return setting.value if setting else None

    def resolved_values(self) -> dict[str, str]:
        """Every key with its value after config-provider resolution."""
        return {k: s.value for k, s in self._props.items()}

    def line_of(self, raw_key: str | None) -> int | None:
        return self.raw.line_of(raw_key) if raw_key else None

    def _with_prefix(self, prefix: str) -> Props:
        """Keys starting with ``prefix``, prefix stripped (Kafka's originalsWithPrefix)."""
        return {k[len(prefix) :]: s for k, s in self._props.items() if k.startswith(prefix)}

    # -- flows --------------------------------------------------------------------------------------

    def _flow_flag(self, flow: Flow, key: str) -> str | None:
        return self.get(f"{flow}.{key}")

    def is_enabled(self, flow: Flow) -> bool:
        """The connectors' ``enabled``: ``A->B.enabled``, else a top-level ``enabled``, else false.

        The connectors parse it as a ConfigDef boolean (trimmed, any case). It only matters for flows that
        have a herder at all (cluster_pairs).
        """
        value = self._flow_flag(flow, "enabled")
        if value is None:
            value = self.get("enabled")
        return value is not None and value.strip().lower() == "true"

    def emits_heartbeats(self, flow: Flow) -> bool:
        value = self._flow_flag(flow, "emit.heartbeats.enabled")
        if value is None:
            value = self.get("emit.heartbeats.enabled")
        return value is None or value.lower() == "true"

    def cluster_pairs(self) -> list[Flow]:
        """The herders MM2 would run: ``A->B.enabled`` true, or heartbeats on for the pair
        (docs/mm2-semantics.md, *Which flows exist*).

        Only the flow-level ``enabled`` counts here, read with Java's Boolean.parseBoolean (untrimmed, any
        case): a top-level ``enabled = true`` creates no herder once heartbeats are off.
        """
        return [
            f
            for f in self._all_pairs()
            if (self._flow_flag(f, "enabled") or "").lower() == "true" or self.emits_heartbeats(f)
        ]

    def enabled_flows(self) -> list[Flow]:
        """Flows that replicate records (a herder whose connectors are enabled): one Spark job each."""
        return [f for f in self.cluster_pairs() if self.is_enabled(f)]

    def _all_pairs(self) -> list[Flow]:
        return [Flow(s, t) for s in self.clusters for t in self.clusters if s != t]

    # -- MM2's flattening (docs/mm2-semantics.md, *Flattening*) ------------------------------------

    def cluster_props(self, alias: str) -> Props:
        """MirrorMakerConfig.clusterProps: ``alias.*`` stripped, plus connection keys spread to clients."""
        props = self._with_prefix(f"{alias}.")
        for key in CONNECTION_KEYS:
            if key in props:
                for prefix in CLIENT_PREFIXES:
                    props.setdefault(prefix + key, props[key])
        for key in CONNECTION_KEYS:
            top = self._props.get(key)
            if top is not None:
                for prefix in CLIENT_PREFIXES:
                    props.setdefault(prefix + key, top)
                props.setdefault(key, top)
        return props

    def connector_props(self, flow: Flow) -> Props:
        """The connector config of herder ``flow`` (union of the three connectors' views)."""
        props: Props = {k: s for k, s in self._props.items() if k in _CONNECTOR_CONFIG_NAMES}
        props.update({k: s for k, s in self._props.items() if k.startswith(("config.providers", "replication.policy"))})
        for side, alias in (("source", flow.source), ("target", flow.target)):
            for key, setting in self.cluster_props(alias).items():
                if key.startswith(CLIENT_PREFIXES):
                    props[f"{side}.{key}"] = setting
                else:
                    props[f"{side}.cluster.{key}"] = setting
        props.setdefault("source.cluster.alias", Setting(flow.source, None))
        props.setdefault("target.cluster.alias", Setting(flow.target, None))
        props.update(self._with_prefix(f"{flow}."))
        props.setdefault("enabled", Setting("false", None))
        # Kafka 3.x's ConfigUtils.translateDeprecatedConfigs on the flattened connector config: a removed name
        # (topics.blacklist) gives its value to the new one (topics.exclude) unless the new one is set.
        for old, new in RENAMED_KEYS.items():
            renamed = props.pop(old, None) or self._props.get(old)
            if renamed is not None:
                props.setdefault(new, renamed)
        return props

    def worker_props(self, flow: Flow) -> Props:
        """The Connect worker config of herder ``flow``: the *target's* cluster props and defaults
        (*Worker settings*)."""
        props = self.cluster_props(flow.target)
        props.update({k: s for k, s in self._props.items() if k.startswith(WORKER_PREFIXES)})
        props.update({k: s for k, s in self._props.items() if k.startswith("config.providers")})
        defaults = {
            "client.id": str(flow),
            "group.id": f"{flow.source}-mm2",
            "offset.storage.topic": f"mm2-offsets.{flow.source}.internal",
            "status.storage.topic": f"mm2-status.{flow.source}.internal",
            "config.storage.topic": f"mm2-configs.{flow.source}.internal",
        }
        for key, value in defaults.items():
            props.setdefault(key, Setting(value, None))
        for key, definition in WORKER_KEYS.items():
            if definition.default is not None:
                props.setdefault(key, Setting(definition.default, None))
        return props


def client_props(connector: Props, side: Side, kind: ClientKind) -> Props:
    """MirrorConnectorConfig's client layering (*Client settings*) for one side and kind, later layers winning.

    1. ``<side>.cluster.<k>`` restricted to connection keys; 2. connector-level ``<kind>.<k>`` (normally from
    ``A->B.<kind>.*``); 3. ``<side>.<kind>.<k>`` (normally from cluster-level ``<alias>.<kind>.*``);
    4. consumers: auto-commit forced off, ``auto.offset.reset=earliest`` unless set.
    """
    props: Props = {}
    cluster_prefix = f"{side}.cluster."
    for key, setting in connector.items():
        if key.startswith(cluster_prefix) and key[len(cluster_prefix) :] in CONNECTION_KEYS:
            props[key[len(cluster_prefix) :]] = setting
    kind_prefix = f"{kind}."
    for key, setting in connector.items():
        # consumer.poll.timeout.ms is a connector key, and producer.override.* belongs to the worker producer.
        if key.startswith(kind_prefix) and key not in CONNECTOR_KEYS and not key.startswith("producer.override."):
            props[key[len(kind_prefix) :]] = setting
    side_prefix = f"{side}.{kind}."
    for key, setting in connector.items():
        if key.startswith(side_prefix):
            props[key[len(side_prefix) :]] = setting
    if kind == "consumer":
        props["enable.auto.commit"] = Setting("false", None)
        props.setdefault("auto.offset.reset", Setting("earliest", None))
    return props


def worker_producer_props(worker: Props, connector: Props) -> Props:
    """The producer that writes replicated records: Connect's worker producer of the herder (*Client settings*).

    Tuned with ``<target>.producer.*`` (cluster level) or ``A->B.producer.override.*`` (flow level); the
    flow-level ``A->B.producer.*`` keys only reach the offset-syncs producer, exactly as in MM2.
    """
    props: Props = {}
    if "bootstrap.servers" in worker:
        props["bootstrap.servers"] = worker["bootstrap.servers"]
    for key, setting in worker.items():
        if key.startswith("producer."):
            props[key[len("producer.") :]] = setting
    for key, setting in connector.items():
        if key.startswith("producer.override."):
            props[key[len("producer.override.") :]] = setting
    return props

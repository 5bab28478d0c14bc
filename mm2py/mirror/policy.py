"""Remote-topic naming: MM2's ``ReplicationPolicy`` and its two built-in implementations.

The policy is the one place that knows how a topic is named on another cluster, so planning (which topics to
copy, cycle detection), the internal topic names (heartbeats, checkpoints, offset-syncs) and the client side
(offset translation, upstream clusters) all agree with each other and with a running MM2. The built-in
policies reproduce MM2's Java classes name for name, including their edge cases, because a cluster that MM2
replicated before must keep the same topic names when mm2py takes over.

This module also holds the single plugin loader used for policies and filters (``load_plugin``).
"""

from __future__ import annotations

import abc
import importlib
import logging
from collections.abc import Iterator, Mapping
from typing import cast

logger = logging.getLogger(__name__)

JAVA_PACKAGE = "org.apache.kafka.connect.mirror"

SEPARATOR_CONFIG = "replication.policy.separator"
DEFAULT_SEPARATOR = "."
INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG = "replication.policy.internal.topic.separator.enabled"
SOURCE_CLUSTER_ALIAS_CONFIG = "source.cluster.alias"
DEFAULT_REPLICATION_POLICY_CLASS = f"{JAVA_PACKAGE}.DefaultReplicationPolicy"

HEARTBEATS_TOPIC = "heartbeats"


class PluginError(ValueError):
    """A plugin class name (policy or filter) cannot be turned into a working instance.

    A ``ValueError`` so the config layer can report it against the key and line that named the class.
    """


class ReplicationPolicy(abc.ABC):
    """Decides how topics are named on the target cluster and recognises MM2's internal topics.

    Implement this to plug in your own naming (``replication.policy.class = package.module:ClassName``).
    Only the three abstract methods are required; the others have MM2's interface defaults. mm2py creates
    the instance with no arguments and then calls ``configure`` once with the flow's connector config.
    Methods are called on the driver and inside Spark executors, so keep instances small and picklable.
    """

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook, like Java's default
        """Receive the flow's effective connector config (MM2 key names, raw string values).

        Called once, right after construction and before any other method. The default does nothing.
        """

    @abc.abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """Return the name that ``topic`` of cluster ``source_cluster_alias`` gets on the target cluster."""

    @abc.abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Return the alias of the cluster ``topic`` was replicated from, or None if it is not remote."""

    @abc.abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Return the name of ``topic`` on the cluster it was replicated from, or None if it is not remote.

        Topics may have travelled several hops, so the result may itself be a remote topic.
        """

    def original_topic(self, topic: str) -> str:
        """Return the name the topic had on the cluster where it was first written.

        Follows ``upstream_topic`` until it returns None or its own input; that last name is the answer.
        """
        *_, original = self.upstream_chain(topic)
        return original

    def upstream_chain(self, topic: str) -> Iterator[str]:
        """``topic``, then its name one hop upstream, and so on, back to where it was first written.

        Raises PluginError when ``upstream_topic`` leads back to a name already seen: MM2 would recurse until
        the stack overflows; this says which policy misbehaves instead.
        """
        seen = {topic}
        yield topic
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return
            if upstream in seen:
                raise PluginError(f"{type(self).__name__}.upstream_topic cycles back to {upstream!r}")
            seen.add(upstream)
            yield upstream
            topic = upstream

    def heartbeats_topic(self) -> str:
        """Return the name of the heartbeats topic MM2 writes on every target cluster."""
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """Return the offset-syncs topic named after ``cluster_alias`` (the cluster on the other side)."""
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """Return the checkpoints topic holding translated offsets of groups on ``cluster_alias``."""
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """Tell whether ``topic`` is a heartbeats topic, local or replicated any number of hops."""
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Tell whether ``topic`` is a checkpoints topic (of any source cluster)."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """Tell whether ``topic`` is one of MM2's own internal topics, which are never replicated."""
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """Tell whether ``topic`` is internal to MM2, Kafka or Connect, and so never replicated."""
        kafka_internal = topic.startswith(("__", "."))
        connect_internal = topic.endswith(("-internal", ".internal"))
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


def _java_split(text: str, separator: str) -> list[str]:
    """Split like Java's ``Pattern.compile(Pattern.quote(separator)).split(text)``.

    Java drops trailing empty pieces (a leading one is kept) and, for an empty separator, splits between
    characters without a leading empty piece.
    """
    pieces = (list(text) or [""]) if separator == "" else text.split(separator)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


class DefaultReplicationPolicy(ReplicationPolicy):
    """MM2's default: prefix the source alias, ``us-west.orders``.

    Reads ``replication.policy.separator`` (raw, not trimmed, default ``.``) and, when a separator is
    given, ``replication.policy.internal.topic.separator.enabled`` (default true; false keeps ``.`` in the
    checkpoints and offset-syncs topic names, as MM2 3.0 and older did). Like Java's
    ``Boolean.parseBoolean``, only the exact text ``true`` (any case) enables it.
    """

    def __init__(self) -> None:
        self.separator = DEFAULT_SEPARATOR
        self.internal_topic_separator_enabled = True

    def configure(self, config: Mapping[str, str]) -> None:
        self.separator = DEFAULT_SEPARATOR
        self.internal_topic_separator_enabled = True
        if SEPARATOR_CONFIG in config:
            self.separator = config[SEPARATOR_CONFIG]
            logger.info("custom remote topic separator separator=%r", self.separator)
            if INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG in config:
                enabled = config[INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG].lower() == "true"
                self.internal_topic_separator_enabled = enabled
                if not enabled:
                    logger.warning("internal topics keep '.' instead of separator=%r", self.separator)

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return source_cluster_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        pieces = _java_split(topic, self.separator)
        return pieces[0] if len(pieces) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_topic_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self._internal_separator() + cluster_alias + self._internal_suffix()

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_topic_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_topic_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Keep topic names unchanged (one-way migration, legacy MirrorMaker layouts).

    Heartbeats are still prefixed (any topic whose name ends in ``heartbeats``), so heartbeat-based
    discovery keeps working. Every other topic's source is the configured ``source.cluster.alias`` (None if
    not configured). Cycles cannot be detected: replicating A->B and B->A with this policy loops forever.
    """

    def __init__(self) -> None:
        super().__init__()
        self.source_cluster_alias: str | None = None

    def configure(self, config: Mapping[str, str]) -> None:
        super().configure(config)
        self.source_cluster_alias = config.get(SOURCE_CLUSTER_ALIAS_CONFIG)

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


def java_names(*classes: type) -> dict[str, type]:
    """Map MM2's fully qualified Java class names and their simple names to our built-in classes."""
    names: dict[str, type] = {}
    for cls in classes:
        names[f"{JAVA_PACKAGE}.{cls.__name__}"] = cls
        names[cls.__name__] = cls
    return names


def load_plugin(class_name: str, base: type, builtins: Mapping[str, type], config: Mapping[str, str]) -> object:
    """Create and configure the plugin a ``*.class`` key names; callers narrow the result to ``base``.

    ``class_name`` is one of MM2's Java class names in ``builtins`` (fully qualified or simple), or a Python
    path ``package.module:ClassName`` / ``package.module.ClassName`` to a subclass of ``base``. The class is
    created with no arguments and ``configure(config)`` is called, as Kafka's ``getConfiguredInstance``
    does. Any failure to find or create the class raises ``PluginError`` saying what is allowed; errors
    raised by ``configure`` itself (for example a bad regex) propagate unchanged.
    """
    name = class_name.strip()
    allowed = (
        ", ".join(k for k in builtins if "." in k)
        + f", or a Python path package.module:ClassName to a {base.__name__} subclass"
    )
    cls = builtins.get(name)
    if cls is None:
        cls = _import_class(name, base, allowed)
    try:
        instance = cls()
    except Exception as exc:
        raise PluginError(f"cannot create {name}: {exc}; allowed: {allowed}") from exc
    if not isinstance(instance, base):
        raise PluginError(f"{name} is not a {base.__name__}; allowed: {allowed}")
    configure = getattr(instance, "configure", None)
    if callable(configure):
        configure(config)
    return instance


def _import_class(name: str, base: type, allowed: str) -> type:
    if name.startswith(JAVA_PACKAGE + ".") or name.startswith("org.apache.kafka."):
        raise PluginError(f"unknown MM2 class {name!r}; allowed: {allowed}")
    if ":" in name:
        module_name, _, attr = name.partition(":")
    else:
        module_name, _, attr = name.rpartition(".")
    if not module_name or not attr:
        raise PluginError(f"unknown {base.__name__} {name!r}; allowed: {allowed}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or anything the module raises while importing
        raise PluginError(f"cannot import {module_name!r} for {name!r}: {exc}; allowed: {allowed}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise PluginError(f"module {module_name!r} has no {attr!r}; allowed: {allowed}")
    if not isinstance(cls, type) or not issubclass(cls, base):
        raise PluginError(f"{name} is not a {base.__name__} subclass; allowed: {allowed}")
    return cls


def load_replication_policy(class_name: str, config: Mapping[str, str]) -> ReplicationPolicy:
    """Create the policy ``replication.policy.class`` names, configured with the flow's connector config."""
    builtins = java_names(DefaultReplicationPolicy, IdentityReplicationPolicy)
    return cast(ReplicationPolicy, load_plugin(class_name, ReplicationPolicy, builtins, config))

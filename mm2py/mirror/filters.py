"""Which topics, consumer groups and topic config properties MM2 replicates.

MM2's include/exclude keys hold comma lists of *Java* regexes, joined with ``|`` and matched against the
whole name. Users copy these values from working MM2 files, so the same text must select the same names
here: lists are split the way Kafka's ConfigDef splits them, and the Java-only regex syntax people write
is translated to Python's ``re`` by :mod:`mm2py.mirror.java_regex` (or refused, never silently changed).
"""

from __future__ import annotations

import abc
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import cast

from mm2py.mirror.java_regex import PatternError as PatternError
from mm2py.mirror.java_regex import java_regex_to_python as java_regex_to_python
from mm2py.mirror.policy import ReplicationPolicy, java_names, load_plugin

TOPICS_CONFIG = "topics"
TOPICS_EXCLUDE_CONFIG = "topics.exclude"
GROUPS_CONFIG = "groups"
GROUPS_EXCLUDE_CONFIG = "groups.exclude"
CONFIG_PROPERTIES_EXCLUDE_CONFIG = "config.properties.exclude"
USE_DEFAULTS_FROM_CONFIG = "use.defaults.from"

DEFAULT_TOPICS = ".*"
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS = ".*"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
MM2_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)
# Tiered storage's topic configs (KIP-405): a broker without tiered storage rejects a topic that sets them
# (remote.storage.enable=true: "Tiered Storage functionality is disabled in the broker"), so copying them from a
# tiered source breaks creating and syncing the remote topic on a plain target. MM2's default list does not
# leave them out; mm2py's does. Setting config.properties.exclude replaces the whole list (as in MM2), so a
# target that has tiered storage gets them by a list without these entries.
TIERED_STORAGE_PROPERTIES = r"remote\.storage\.enable, remote\.log\..*, local\.retention\..*"
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = f"{MM2_CONFIG_PROPERTIES_EXCLUDE}, {TIERED_STORAGE_PROPERTIES}"
DEFAULT_USE_DEFAULTS_FROM = "target"

DEFAULT_TOPIC_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
DEFAULT_GROUP_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
DEFAULT_CONFIG_PROPERTY_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"

# Java's String.trim() and \s (no Unicode whitespace).
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_LIST_SEPARATOR = re.compile("[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def parse_list(value: str) -> list[str]:
    """Split a LIST value as Kafka's ConfigDef does: trim, split on ``\\s*,\\s*``, and ``""`` is ``[]``.

    Empty pieces are kept (``"a,"`` is ``["a", ""]``), as in Java, because they change what a pattern list
    matches.
    """
    trimmed = value.strip(_JAVA_TRIM)
    return _LIST_SEPARATOR.split(trimmed) if trimmed else []


def compile_pattern_list(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """Compile an include/exclude list the way MM2 does: join with ``|``; an empty list matches nothing.

    Joining happens before translation, as in MM2, so an entry's group may span a comma (``(a, b)``).
    Callers must use ``fullmatch``: MM2 matches whole names.
    """
    if not patterns:
        return None
    joined = "|".join(patterns)
    translated = java_regex_to_python(joined)
    try:
        with warnings.catch_warnings():
            # Python warns about "--", "||" and "~~" in classes, which Java reads literally too.
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(translated, re.ASCII)
    except re.error as exc:
        pos = exc.pos if translated == joined else None
        raise PatternError(f"invalid regex: {exc.msg}", joined, pos) from exc


def _compile_config_list(config: Mapping[str, str], key: str, default: str) -> re.Pattern[str] | None:
    try:
        return compile_pattern_list(parse_list(config.get(key, default)))
    except PatternError as exc:
        exc.key = key
        raise


def _full_match(pattern: re.Pattern[str] | None, name: str) -> bool:
    return pattern is not None and pattern.fullmatch(name) is not None


class TopicFilter(abc.ABC):
    """Decides which source topics a flow replicates (``topic.filter.class``); also used for checkpoints.

    mm2py creates the instance with no arguments and calls ``configure`` once with the flow's connector
    config. Instances run on the driver only, but should stay picklable.
    """

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook, like Java's default
        """Receive the flow's connector config (MM2 key names, raw string values). Default: no-op."""

    @abc.abstractmethod
    def should_replicate_topic(self, topic: str) -> bool:
        """Tell whether ``topic`` (a source topic name) should be replicated."""


class DefaultTopicFilter(TopicFilter):
    """``topics`` (include) and ``topics.exclude`` (exclude wins), whole-name Java regex lists."""

    def __init__(self) -> None:
        self.configure({})

    def configure(self, config: Mapping[str, str]) -> None:
        self.include = _compile_config_list(config, TOPICS_CONFIG, DEFAULT_TOPICS)
        self.exclude = _compile_config_list(config, TOPICS_EXCLUDE_CONFIG, DEFAULT_TOPICS_EXCLUDE)

    def should_replicate_topic(self, topic: str) -> bool:
        return _full_match(self.include, topic) and not _full_match(self.exclude, topic)


class GroupFilter(abc.ABC):
    """Decides which consumer groups get checkpoints (``group.filter.class``).

    Created with no arguments, then ``configure`` is called once with the flow's connector config.
    """

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook, like Java's default
        """Receive the flow's connector config (MM2 key names, raw string values). Default: no-op."""

    @abc.abstractmethod
    def should_replicate_group(self, group: str) -> bool:
        """Tell whether consumer group ``group`` (on the source cluster) should be checkpointed."""


class DefaultGroupFilter(GroupFilter):
    """``groups`` (include) and ``groups.exclude`` (exclude wins), whole-name Java regex lists."""

    def __init__(self) -> None:
        self.configure({})

    def configure(self, config: Mapping[str, str]) -> None:
        self.include = _compile_config_list(config, GROUPS_CONFIG, DEFAULT_GROUPS)
        self.exclude = _compile_config_list(config, GROUPS_EXCLUDE_CONFIG, DEFAULT_GROUPS_EXCLUDE)

    def should_replicate_group(self, group: str) -> bool:
        return _full_match(self.include, group) and not _full_match(self.exclude, group)


class ConfigPropertyFilter(abc.ABC):
    """Decides which topic config properties are copied to remote topics (``config.property.filter.class``).

    Created with no arguments, then ``configure`` is called once with the flow's connector config.
    """

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 - optional hook, like Java's default
        """Receive the flow's connector config (MM2 key names, raw string values). Default: no-op."""

    @abc.abstractmethod
    def should_replicate_config_property(self, prop: str) -> bool:
        """Tell whether topic config property ``prop`` is synced at all."""

    def should_replicate_source_default(self, prop: str) -> bool:
        """For a property whose source value is a default: copy that value (True) or use the target's.

        Only asked for properties ``should_replicate_config_property`` accepted. Default: False.
        """
        return False


class DefaultConfigPropertyFilter(ConfigPropertyFilter):
    """``config.properties.exclude`` (whole-name Java regexes) and ``use.defaults.from``.

    The default list is MM2's plus tiered storage's topic configs (``TIERED_STORAGE_PROPERTIES``).

    Only ``use.defaults.from = source`` (exactly, after trimming) copies source defaults; any other value,
    including the default ``target``, leaves the target's defaults in place.
    """

    def __init__(self) -> None:
        self.configure({})

    def configure(self, config: Mapping[str, str]) -> None:
        self.exclude = _compile_config_list(config, CONFIG_PROPERTIES_EXCLUDE_CONFIG, DEFAULT_CONFIG_PROPERTIES_EXCLUDE)
        use_defaults_from = config.get(USE_DEFAULTS_FROM_CONFIG, DEFAULT_USE_DEFAULTS_FROM)
        self.use_defaults_from = use_defaults_from.strip(_JAVA_TRIM)

    def should_replicate_config_property(self, prop: str) -> bool:
        return not _full_match(self.exclude, prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        return self.use_defaults_from == "source"


def load_topic_filter(class_name: str, config: Mapping[str, str]) -> TopicFilter:
    """Create the filter ``topic.filter.class`` names (MM2 Java name or Python path), configured."""
    return cast(TopicFilter, load_plugin(class_name, TopicFilter, java_names(DefaultTopicFilter), config))


def load_group_filter(class_name: str, config: Mapping[str, str]) -> GroupFilter:
    """Create the filter ``group.filter.class`` names (MM2 Java name or Python path), configured."""
    return cast(GroupFilter, load_plugin(class_name, GroupFilter, java_names(DefaultGroupFilter), config))


def load_config_property_filter(class_name: str, config: Mapping[str, str]) -> ConfigPropertyFilter:
    """Create the filter ``config.property.filter.class`` names (MM2 Java name or Python path), configured."""
    builtins = java_names(DefaultConfigPropertyFilter)
    return cast(ConfigPropertyFilter, load_plugin(class_name, ConfigPropertyFilter, builtins, config))


def is_cycle(policy: ReplicationPolicy, topic: str, target_cluster_alias: str) -> bool:
    """Tell whether ``topic`` already came from the target cluster, at any hop (so copying it would loop).

    Policies that cannot tell (Identity: ``upstream_topic(t) == t``) never report a cycle.
    """
    for hop in policy.upstream_chain(topic):
        source = policy.topic_source(hop)
        if source is None:
            return False
        if source == target_cluster_alias:
            return True
    return False


def should_replicate_topic(
    topic: str,
    *,
    topic_filter: TopicFilter,
    policy: ReplicationPolicy,
    target_cluster_alias: str,
    heartbeats_replication_enabled: bool,
) -> bool:
    """MM2's rule for a source topic: accepted by the filter (or a heartbeats topic, when heartbeat
    replication is on), and neither internal nor a cycle back to the target."""
    wanted = topic_filter.should_replicate_topic(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    if not wanted or policy.is_internal_topic(topic):
        return False
    return not is_cycle(policy, topic, target_cluster_alias)


def is_tiered_storage_property(prop: str) -> bool:
    """One of tiered storage's topic configs, which a broker without tiered storage rejects."""
    return _full_match(_TIERED, prop)


_TIERED = compile_pattern_list(parse_list(TIERED_STORAGE_PROPERTIES))

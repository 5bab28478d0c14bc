"""Which topics, consumer groups and topic config properties MM2 replicates.

MM2's include/exclude keys hold comma lists of *Java* regexes, joined with ``|`` and matched against the
whole name. Users copy these values from working MM2 files, so the same text must select the same names
here: lists are split the way Kafka's ConfigDef splits them, and the Java-only regex syntax people write
is translated to Python's ``re`` (or refused with a message naming the construct, never silently changed).
"""

from __future__ import annotations

import abc
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import cast

from mm2py.policy import PluginError, ReplicationPolicy, java_names, load_plugin

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
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)
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


class PatternError(ValueError):
    """A regex in an include/exclude list is invalid, or uses Java syntax Python's ``re`` cannot honour.

    Carries ``msg``, ``pattern`` and ``pos`` like ``re.error``, plus the config ``key`` when known, so the
    config layer can point at the key and value.
    """

    def __init__(
        self, msg: str, pattern: str | None = None, pos: int | None = None, key: str | None = None
    ) -> None:
        self.msg = msg
        self.pattern = pattern
        self.pos = pos
        self.key = key
        where = f" at position {pos}" if pos is not None else ""
        subject = f" in {pattern!r}" if pattern is not None else ""
        super().__init__(f"{msg}{where}{subject}")


# POSIX classes as Java defines them (US-ASCII only); values are character-class bodies.
_POSIX_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": r"\x00-\x7f", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": r"!-/:-@\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": r" \t",
    "Cntrl": r"\x00-\x1f\x7f", "XDigit": "0-9a-fA-F", "Space": r" \t\n\x0b\f\r",
}
_HORIZONTAL_SPACE = r" \t\xa0\u1680\u180e\u2000-\u200a\u202f\u205f\u3000"
_VERTICAL_SPACE = r"\n\x0b\f\r\x85\u2028\u2029"
_LINE_TERMINATOR = r"(?:\r\n|[\n\r\x85\u2028\u2029])"
_SCOPED_FLAGS = "imsx"
_UNSUPPORTED_FLAGS = {"d": "UNIX_LINES", "u": "UNICODE_CASE", "U": "UNICODE_CHARACTER_CLASS", "c": "CANON_EQ"}
_UNSUPPORTED_ESCAPES = {"G": "end of previous match", "X": "grapheme cluster", "b{": "grapheme boundary"}
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def java_regex_to_python(pattern: str) -> str:
    """Translate a Java regex into an equivalent Python ``re`` pattern, to be compiled with ``re.ASCII``.

    Handles ``\\Q...\\E``, ``(?<name>...)`` and ``\\k<name>``, POSIX classes (``\\p{Alpha}``), ``\\z``,
    ``\\Z``, ``\\h``, ``\\v``, ``\\R``, ``\\e``, ``\\cX``, ``\\x{...}``, ``\\0`` octals, and inline flags
    such as ``(?i)`` after the start (Java applies them up to the end of the enclosing group, which joining a
    list with ``|`` makes common). Raises ``PatternError`` naming what Python cannot express: Unicode
    properties (``\\p{L}``), nested classes and ``&&``, ``\\G``, ``\\X``, flags d/u/U/c, and Python's own
    ``(?P...)`` syntax, which MM2 would reject. ``re.ASCII`` because Java's ``\\w``, ``\\d``, ``\\s``,
    ``\\b`` and ``(?i)`` are ASCII-only by default.
    """
    return _JavaRegexTranslator(pattern).translate()


class _JavaRegexTranslator:
    """One left-to-right pass over a Java pattern; the only state is the class/group nesting."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.out: list[str] = []
        # For each open group, the inline-flag scopes opened inside it, to close at its ")" and around "|".
        self.scopes: list[list[str]] = [[]]
        self.class_start: int | None = None  # index of the first class member while inside [...]

    def fail(self, msg: str, pos: int) -> PatternError:
        return PatternError(msg, self.pattern, pos)

    def translate(self) -> str:
        p, i = self.pattern, 0
        while i < len(p):
            c = p[i]
            if c == "\\":
                text, i = self.escape(i)
                self.out.append(text)
                continue
            if self.class_start is not None:
                if c == "]" and i != self.class_start:
                    self.class_start = None
                elif c == "[":
                    raise self.fail("nested character class (Java class union) is not supported", i)
                elif p.startswith("&&", i):
                    raise self.fail("character class intersection && is not supported", i)
                self.out.append(c)
                i += 1
            elif c == "[":
                self.class_start = i + 2 if p.startswith("^", i + 1) else i + 1
                self.out.append(p[i:self.class_start])
                i = self.class_start
            elif c == "(":
                i = self.open_group(i)
            elif c == ")":
                self.out.append(")" * len(self.scopes[-1]) + ")")
                if len(self.scopes) > 1:
                    self.scopes.pop()
                i += 1
            elif c == "|":
                reopen = "".join(f"(?{spec}:" for spec in self.scopes[-1])
                self.out.append(")" * len(self.scopes[-1]) + "|" + reopen)
                i += 1
            else:
                self.out.append(c)
                i += 1
        self.out.append(")" * len(self.scopes[-1]))
        return "".join(self.out)

    def open_group(self, i: int) -> int:
        p = self.pattern
        if p.startswith("(?P", i):
            raise self.fail("(?P...) is Python syntax that MM2 rejects; write (?<name>...) instead", i)
        if p.startswith("(?<", i) and not p.startswith(("(?<=", "(?<!"), i):
            self.out.append("(?P<")
            self.scopes.append([])
            return i + 3
        flags = _INLINE_FLAGS.match(p, i)
        if flags is None or (not flags.group(1) and flags.group(2) is None):
            self.out.append("(")
            self.scopes.append([])
            return i + 1
        spec = self.python_flags(flags.group(1), i)
        if flags.group(2):
            spec += "-" + self.python_flags(flags.group(2), i)
        if flags.group(3) == ":":
            self.out.append(f"(?{spec}:")
            self.scopes.append([])
        else:
            # "(?i)" inside a pattern: Python only has scoped flags there, so open a scope that
            # translate() closes at the end of the enclosing group and around each "|".
            self.out.append(f"(?{spec}:")
            self.scopes[-1].append(spec)
        return flags.end()

    def python_flags(self, flags: str, pos: int) -> str:
        for flag in flags:
            if flag in _UNSUPPORTED_FLAGS:
                raise self.fail(f"inline flag {flag} ({_UNSUPPORTED_FLAGS[flag]}) is not supported", pos)
            if flag not in _SCOPED_FLAGS:
                raise self.fail(f"unknown inline flag {flag!r}", pos)
        return "".join(dict.fromkeys(flags))

    def escape(self, i: int) -> tuple[str, int]:
        """Translate the escape at backslash ``i``; returns the Python text and the index after it."""
        p, in_class = self.pattern, self.class_start is not None
        if i + 1 >= len(p):
            raise self.fail("pattern ends with a lone backslash", i)
        e = p[i + 1]
        for construct, meaning in _UNSUPPORTED_ESCAPES.items():
            if p.startswith(construct, i + 1):
                raise self.fail(f"\\{construct} ({meaning}) is not supported", i)
        if e == "Q":
            end = p.find("\\E", i + 2)
            end = len(p) if end < 0 else end
            return re.escape(p[i + 2:end]), min(end + 2, len(p))
        if e in "pP":
            return self.posix_class(i, e == "P", in_class)
        if e in "hv":
            body = _HORIZONTAL_SPACE if e == "h" else _VERTICAL_SPACE
            return (body if in_class else f"[{body}]"), i + 2
        if e in "HV" and not in_class:
            return f"[^{_HORIZONTAL_SPACE if e == 'H' else _VERTICAL_SPACE}]", i + 2
        if e in "HV":
            raise self.fail(f"negated \\{e} inside a character class is not supported", i)
        if e == "e":
            return r"\x1b", i + 2
        if e == "c" and i + 2 < len(p):
            return f"\\x{ord(p[i + 2]) ^ 64:02x}", i + 3
        if e == "x" and p.startswith("{", i + 2):
            code = re.match(r"\{([0-9a-fA-F]{1,6})\}", p[i + 2:])
            if code is None or int(code.group(1), 16) > 0x10FFFF:
                raise self.fail("\\x{...} needs a hexadecimal code point", i)
            return f"\\U{int(code.group(1), 16):08x}", i + 2 + code.end()
        if e == "0":
            octal = re.match(r"[0-3][0-7]{2}|[0-7]{1,2}", p[i + 2:])
            if octal is None:
                raise self.fail("\\0 must be followed by octal digits", i)
            return f"\\x{int(octal.group(0), 8):02x}", i + 2 + octal.end()
        if not in_class:
            if e == "z":
                return r"\Z", i + 2
            if e == "Z":
                return rf"(?={_LINE_TERMINATOR}?\Z)", i + 2
            if e == "R":
                return _LINE_TERMINATOR, i + 2
            if e == "k":
                ref = re.match(r"<([a-zA-Z][a-zA-Z0-9]*)>", p[i + 2:])
                if ref is None:
                    raise self.fail("\\k must be followed by <name>", i)
                return f"(?P={ref.group(1)})", i + 2 + ref.end()
        return p[i:i + 2], i + 2

    def posix_class(self, i: int, negated: bool, in_class: bool) -> tuple[str, int]:
        p = self.pattern
        braced = re.match(r"\{([^}]*)\}", p[i + 2:])
        name, end = (braced.group(1), i + 2 + braced.end()) if braced else (p[i + 2:i + 3], i + 3)
        construct = f"\\{'P' if negated else 'p'}{{{name}}}"
        body = _POSIX_CLASSES.get(name)
        if body is None:
            raise self.fail(f"{construct} is not supported (only POSIX classes such as \\p{{Alpha}})", i)
        if in_class and negated:
            raise self.fail(f"{construct} inside a character class is not supported", i)
        return (body if in_class else f"[{'^' if negated else ''}{body}]"), end


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

    Only ``use.defaults.from = source`` (exactly, after trimming) copies source defaults; any other value,
    including the default ``target``, leaves the target's defaults in place.
    """

    def __init__(self) -> None:
        self.configure({})

    def configure(self, config: Mapping[str, str]) -> None:
        self.exclude = _compile_config_list(
            config, CONFIG_PROPERTIES_EXCLUDE_CONFIG, DEFAULT_CONFIG_PROPERTIES_EXCLUDE
        )
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
    seen = {topic}
    while True:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_cluster_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        if upstream in seen:
            raise PluginError(f"{type(policy).__name__}.upstream_topic cycles back to {upstream!r}")
        seen.add(upstream)
        topic = upstream


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

"""Reading Java ``.properties`` files, keeping the line every key came from.

MM2 reads its file with ``java.util.Properties``; jproperties implements the same syntax (``=``, ``:`` or
whitespace separators, ``#``/``!`` comment lines, backslash escapes and continuations, ``\\uXXXX``, trailing
whitespace kept, last duplicate wins). jproperties does not report line numbers, so this module splits the
file into *logical lines* itself (the only part of the syntax that decides where an entry starts) and hands
each logical line to jproperties, which does all of the unescaping. Every error can then name ``file:line``.

This is the only place where a raw ``dict[str, str]`` is born; ``MirrorMakerConfig`` turns it into typed objects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import jproperties

from mm2py.errors import ConfigError
from mm2py.secrets import mask_value

# Kafka's ConfigTransformer pattern: ${provider:[path:]key}
_VARIABLE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")

JAVA_PROVIDER_CLASSES = {
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
}


@dataclass(frozen=True)
class Entry:
    """One ``key = value`` as written, with the physical line its logical line starts on."""

    key: str
    value: str
    line: int


@dataclass
class RawProperties:
    """The file as read: every entry in order (duplicates included) and the effective last-wins view."""

    source: str
    entries: list[Entry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._last: dict[str, Entry] = {}
        for entry in self.entries:
            self._last[entry.key] = entry

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        self._last[entry.key] = entry

    def values(self) -> dict[str, str]:
        """The last-wins key/value map, in first-seen key order (like java.util.Properties)."""
        return {key: entry.value for key, entry in self._last.items()}

    def line_of(self, key: str) -> int | None:
        entry = self._last.get(key)
        return entry.line if entry else None

    def entry(self, key: str) -> Entry | None:
        return self._last.get(key)

    def duplicates(self) -> Iterator[tuple[Entry, Entry]]:
        """(overridden, winning) pairs for keys set more than once."""
        for entry in self.entries:
            last = self._last[entry.key]
            if last is not entry:
                yield entry, last

    def __contains__(self, key: object) -> bool:
        return key in self._last

    def __len__(self) -> int:
        return len(self._last)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first physical line number, logical line text) for every non-comment, non-blank line.

    Mirrors java.util.Properties.LineReader: a natural line ending in an odd number of backslashes continues
    on the next one (whose leading whitespace is dropped); comment lines never continue.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        stripped = lines[i].lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            i += 1
            continue
        parts = [stripped]
        while _continues(parts[-1]) and i + 1 < len(lines):
            i += 1
            parts.append(lines[i].lstrip(" \t\f"))
        i += 1
        yield start + 1, "\n".join(parts)


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def parse_properties(text: str, source: str) -> RawProperties:
    """Parse properties text; ``source`` is the file name used in messages."""
    raw = RawProperties(source)
    for line_no, logical in _logical_lines(text):
        parsed = jproperties.Properties()
        try:
            parsed.load(logical.encode("utf-8"), "utf-8")
        except Exception as exc:  # jproperties raises its own ParseError and ValueErrors for bad \u escapes
            raise ConfigError(
                f"cannot parse this line as a Java property: {exc}", source=source, line=line_no
            ) from None
        for key in parsed:
            raw.add(Entry(str(key), str(parsed[key].data), line_no))
    return raw


def read_properties(path: str | os.PathLike[str]) -> RawProperties:
    """Read a properties file; missing, unreadable, binary or empty files are config errors (exit 2)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError("file not found", source=source) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a properties file", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source=source) from None
    if b"\x00" in data:
        raise ConfigError("is a binary file, not a Java properties file", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # java.util.Properties.load(InputStream) reads ISO-8859-1; accept such files as MM2 would.
        text = data.decode("latin-1")
    raw = parse_properties(text, source)
    if not raw.entries:
        raise ConfigError("contains no properties (is it the right file?)", source=source)
    return raw


@dataclass(frozen=True)
class ProviderProblem:
    """A ``${provider:...}`` reference that cannot be resolved; reported by validation with file:line."""

    key: str
    value: str
    reason: str
    allowed: str | None = None


def declared_providers(values: Mapping[str, str]) -> dict[str, str]:
    """provider name -> kind (env/file/dir) for providers declared with MM2's ``config.providers`` keys."""
    names = [n.strip() for n in values.get("config.providers", "").split(",") if n.strip()]
    result: dict[str, str] = {}
    for name in names:
        cls = values.get(f"config.providers.{name}.class", "").strip()
        kind = JAVA_PROVIDER_CLASSES.get(cls) or JAVA_PROVIDER_CLASSES.get(
            f"org.apache.kafka.common.config.provider.{cls}"
        )
        if kind:
            result[name] = kind
    return result


def resolve_variables(
    values: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[ProviderProblem], set[str]]:
    """Resolve ``${env:VAR}``, ``${file:path:key}`` and ``${dir:path:file}`` for declared providers: the
    values, the problems, and every value a provider gave (``validate`` never prints those).

    Unlike Kafka, which leaves an unresolvable reference in place (a literal ``${env:X}`` then fails as a
    password much later), every reference that cannot be resolved is reported.
    """
    env = os.environ if environ is None else environ
    providers = declared_providers(values)
    file_cache: dict[str, dict[str, str]] = {}
    problems: list[ProviderProblem] = []
    resolved: dict[str, str] = {}
    allowed = {name: _allowed_paths(values, name, problems) for name in providers}
    provided: set[str] = set()

    for key, value in values.items():
        if key.startswith("config.providers") or "${" not in value:
            resolved[key] = value
            continue

        def substitute(match: re.Match[str], key: str = key, value: str = value) -> str:
            name, path, item = match.group(1), match.group(2), match.group(3)
            kind = providers.get(name)
            shown = mask_value(key, value)
            if kind is None:
                problems.append(
                    ProviderProblem(
                        key,
                        shown,
                        f"uses config provider '{name}', which config.providers does not declare",
                        "declare it, e.g. config.providers = env and config.providers.env.class = "
                        "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                    )
                )
                return match.group(0)
            try:
                if path and allowed[name] is not None:
                    _check_allowed(name, path, allowed[name] or ())
                found = _lookup(kind, path, item, env, file_cache)
                provided.add(found)
                return found
            except _NotAllowed as exc:
                problems.append(ProviderProblem(key, shown, exc.reason, exc.allowed))
                return match.group(0)
            except LookupError as exc:
                problems.append(ProviderProblem(key, shown, str(exc)))
                return match.group(0)

        resolved[key] = _VARIABLE.sub(substitute, value)
    return resolved, problems, provided


class _NotAllowed(Exception):
    def __init__(self, reason: str, allowed: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.allowed = allowed


def _allowed_paths(
    values: Mapping[str, str], name: str, problems: list[ProviderProblem]
) -> tuple[PurePosixPath, ...] | None:
    """KIP-993's ``config.providers.<name>.param.allowed.paths``: the directories provider ``name`` may read
    under, normalised; None when the key is absent or empty (every path allowed, as in Kafka). An entry that is
    not absolute or does not exist is a problem, as Kafka refuses to start with it; the provider then reads
    nothing rather than everything.

    The rule is Kafka's, from clients/src/main/java/org/apache/kafka/common/config/internals/AllowedPaths.java
    (apache/kafka): each comma-separated entry is normalised lexically (``..`` and ``.`` removed, symlinks not
    followed) and must be absolute and exist; a path is allowed when, normalised the same way, it starts with
    an entry component by component (``/etc/kafka`` allows ``/etc/kafka/x``, not ``/etc/kafka-other``).
    Unlike Kafka, spaces around the commas are ignored."""
    key = f"config.providers.{name}.param.allowed.paths"
    value = values.get(key, "")
    if not value.strip():
        return None
    entries = []
    for entry in (e.strip() for e in value.split(",")):
        normalised = PurePosixPath(os.path.normpath(entry)) if entry else PurePosixPath("")
        if not normalised.is_absolute() or not Path(normalised).exists():
            problems.append(
                ProviderProblem(
                    key, value, f"path '{entry}' is not valid", "absolute paths that exist, separated by commas"
                )
            )
            continue
        entries.append(normalised)
    return tuple(entries)


def _check_allowed(name: str, path: str, allowed: tuple[PurePosixPath, ...]) -> None:
    """Raise _NotAllowed unless ``path`` (a file, or the dir provider's directory) is under ``allowed``."""
    normalised = PurePosixPath(os.path.normpath(path))
    if not normalised.is_absolute() or not any(normalised.is_relative_to(a) for a in allowed):
        listed = ", ".join(str(a) for a in allowed) or "(no valid entry)"
        raise _NotAllowed(f"path {path} is outside config.providers.{name}.param.allowed.paths", listed)


def _lookup(
    kind: str, path: str | None, item: str, env: Mapping[str, str], file_cache: dict[str, dict[str, str]]
) -> str:
    if kind == "env":
        if path:
            raise LookupError("the env provider takes ${env:VARIABLE}, without a path")
        if item not in env:
            raise LookupError(f"environment variable {item} is not set")
        return env[item]
    if not path:
        raise LookupError(f"the {kind} provider needs a path: ${{{kind}:/path:key}}")
    if kind == "dir":
        if item in ("", ".", "..") or "/" in item:
            # As Kafka's DirectoryConfigProvider: a key is the name of a file in the directory, never a path.
            raise LookupError(f"'{item}' is not the name of a file in {path}")
        target = Path(path) / item
        try:
            return target.read_text(encoding="utf-8")
        except OSError as exc:
            raise LookupError(f"cannot read {target}: {exc.strerror}") from None
    if path not in file_cache:
        try:
            file_cache[path] = read_properties(path).values()
        except ConfigError as exc:
            raise LookupError(f"cannot read {path}: {exc.reason}") from None
    if item not in file_cache[path]:
        raise LookupError(f"{path} has no key {item}")
    return file_cache[path][item]

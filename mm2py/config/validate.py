"""Offline validation: every problem in a MM2 properties file, at once, each on one line.

MM2 itself validates almost nothing up front: unknown keys are dropped, cluster-level behaviour keys are
ignored, inline ``# comments`` become part of values. Users learn that from replication that silently does
not happen. This module tells them instead, in MM2's own terms, with a did-you-mean where one fits.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace

from mm2py.config.flow import build_flow_config
from mm2py.config.keys import (
    CLIENT_PREFIXES,
    CONNECTION_KEYS,
    CONNECTOR_KEYS,
    FLOW_LEVEL_ONLY_KEYS,
    NEVER_VALID_KEYS,
    RENAMED_KEYS,
    SECURITY_PROTOCOLS,
    WORKER_KEYS,
    all_top_level_names,
    is_known_top_level,
)
from mm2py.config.mirror_maker import Flow, MirrorMakerConfig
from mm2py.config.mm2py_keys import FLOW_MM2PY_KEYS, MM2PY_KEYS, MM2PY_RENAMED_KEYS
from mm2py.config.not_acted_on import CONNECT_WORKER_KEYS, not_acted_on
from mm2py.config.problems import Problem, ProblemSink
from mm2py.config.values import ValueProblem, parse_value
from mm2py.librdkafka.key_tables import RDKAFKA_PROPERTIES, RENAMES
from mm2py.mirror.filters import PatternError, compile_pattern_list, parse_list
from mm2py.mirror.policy import PluginError, load_replication_policy
from mm2py.secrets import MASK, Redactor, is_secret_key

_INLINE_COMMENT = re.compile(r"\s[#!]")
_REGEX_KEYS = ("topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude")
_FLOW_CLIENT_PREFIXES = (*CLIENT_PREFIXES, "source.", "target.")


def validate(mm: MirrorMakerConfig) -> list[Problem]:
    """All problems of the file, ordered by line; errors make ``mm2py validate`` exit 2."""
    sink = ProblemSink(collect=True)
    v = _Validator(mm, sink)
    v.check_file()
    v.check_flows()
    problems = [_without_provided(p, mm) for p in sink.problems]
    return sorted(dict.fromkeys(problems), key=lambda p: (p.line or 0, p.key or "", p.reason))


def _without_provided(problem: Problem, mm: MirrorMakerConfig) -> Problem:
    """``problem`` with no value a config provider gave: a key written as a ``${provider:...}`` reference is
    shown as written, and any provided value quoted in the reason (a regex error quotes its pattern, a bad
    number its text) is masked, whatever the key's name. Why: a provider is how secrets are kept out of the file;
    validate must not print them back, and it cannot know which of them are secrets."""
    if not mm.provided_values:
        return problem
    written = mm.raw.values().get(problem.key or "")
    value = problem.value
    if written is not None and "${" in written and value is not None and value != MASK:
        value = written
    redactor = Redactor(mm.provided_values)
    return replace(
        problem,
        value=redactor.redact(value) if value is not None else None,
        reason=redactor.redact(problem.reason),
        allowed=redactor.redact(problem.allowed) if problem.allowed is not None else None,
    )


class _Validator:
    def __init__(self, mm: MirrorMakerConfig, sink: ProblemSink) -> None:
        self.mm = mm
        self.sink = sink
        self.src = mm.source

    def problem(
        self,
        severity: str,
        key: str | None,
        reason: str,
        allowed: str | None = None,
        value: str | None = None,
        line: int | None = None,
    ) -> None:
        if key is not None and value is None:
            value = self.mm.raw.values().get(key)
        if line is None and key is not None:
            line = self.mm.raw.line_of(key)
        self.sink.add(
            Problem.make("error" if severity == "error" else "warning", self.src, line, key, value, reason, allowed)
        )

    # -- the file as written -----------------------------------------------------------------------

    def check_file(self) -> None:
        mm = self.mm
        for p in mm.provider_problems:
            self.sink.add(
                Problem(  # value already masked by the resolver
                    "error", self.src, mm.raw.line_of(p.key), p.key, p.value, p.reason, p.allowed
                )
            )
        for old, new in mm.raw.duplicates():
            self.problem(
                "warning",
                old.key,
                f"is set again on line {new.line}; the last value wins",
                value=old.value,
                line=old.line,
            )
        if "clusters" not in mm.raw:
            self.problem(
                "error", None, "no 'clusters' key: MM2 needs the list of cluster aliases", "clusters = dc1, dc2, target"
            )
        for alias in mm.clusters:
            if re.search(r"\s", alias) or not alias:
                self.problem(
                    "error",
                    "clusters",
                    f"alias '{alias}' contains whitespace",
                    "aliases made of letters, digits, '.', '_' and '-'",
                )
        for key, value in mm.raw.values().items():
            self.check_value_text(key, value)
        orphans: dict[str, list[str]] = {}
        for key in mm.raw.values():
            self.check_key(key, orphans)
        for alias, keys in orphans.items():
            first = min(keys, key=lambda k: mm.raw.line_of(k) or 0)
            self.problem(
                "warning",
                first,
                f"'{alias}' has settings ({', '.join(sorted(keys)[:3])}{', …' if len(keys) > 3 else ''})"
                f" but is not in clusters = {', '.join(mm.clusters) or '(empty)'}, so they are ignored",
                f"add {alias} to clusters",
            )

    def check_value_text(self, key: str, value: str) -> None:
        if _INLINE_COMMENT.search(value):
            self.problem(
                "warning",
                key,
                "Java properties have no inline comments: the text after '#' is part of the value",
                "move the comment to its own line",
            )
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            self.problem(
                "warning",
                key,
                "the quotes are part of the value (properties values are not quoted)",
                "write the value without quotes",
            )
        if value != value.rstrip() and not _INLINE_COMMENT.search(value):
            self.problem("warning", key, "has trailing whitespace, which Java properties keep in the value")

    def check_key(self, key: str, orphans: dict[str, list[str]]) -> None:
        mm = self.mm
        self.check_acted_on(key)
        if "->" in key:
            self.check_flow_key(key)
            return
        alias = _alias_prefix(key, mm.clusters)
        if alias is not None:
            self.check_cluster_key(key, alias, key[len(alias) + 1 :])
            return
        if key in RENAMED_KEYS:
            self.problem(
                "warning", key, f"was removed in Kafka 4.0; mm2py reads it as {RENAMED_KEYS[key]}", RENAMED_KEYS[key]
            )
        elif key in MM2PY_RENAMED_KEYS:
            new = MM2PY_RENAMED_KEYS[key]
            self.problem("warning", key, f"is mm2py's earlier name for {new}, and is read as it", new)
            self.check_typed_value(key, new)
        elif key in NEVER_VALID_KEYS:
            self.problem(
                "warning", key, "is not an MM2 key, so MM2 ignores it", f"did you mean {NEVER_VALID_KEYS[key]}?"
            )
        elif key in FLOW_LEVEL_ONLY_KEYS:
            self.problem("warning", key, "is read only at flow level; MM2 drops it at the top level", f"A->B.{key}")
        elif key in CONNECTOR_KEYS:  # before the client prefixes: admin.timeout.ms, consumer.poll.timeout.ms
            self.check_typed_value(key, key)
        elif key.startswith(("ssl.", "sasl.")) and not _is_client_key(key):
            self.unknown(key, sorted(_SECURITY_NAMES))
        elif key.startswith(CLIENT_PREFIXES):
            kind = key.split(".", 1)[0]
            self.problem(
                "warning",
                key,
                f"MM2 ignores {kind}.* keys at the top level",
                f"<alias>.{key} for every flow of a cluster, or A->B.{key}"
                + (" / A->B.producer.override.* for replicated records" if kind == "producer" else ""),
            )
        elif is_known_top_level(key):
            self.check_typed_value(key, key)
        else:
            head, _, rest = key.partition(".")
            if rest and _is_cluster_level_name(rest):
                orphans.setdefault(head, []).append(key)
            else:
                self.unknown(key, all_top_level_names())

    def check_acted_on(self, key: str) -> None:
        """A warning for an MM2 key mm2py accepts but ignores, saying what mm2py does instead."""
        name = key
        if "->" in key:
            name = key.split("->", 1)[1].partition(".")[2]
        else:
            alias = _alias_prefix(key, self.mm.clusters)
            if alias is not None:
                name = key[len(alias) + 1 :]
        instead = not_acted_on(name)
        if instead is not None:
            self.problem("warning", key, "is accepted but has no effect in mm2py", instead)
        elif name in CONNECT_WORKER_KEYS and "->" not in key:
            self.problem(
                "warning",
                key,
                "is a Kafka Connect worker setting MM2 gives its herders; mm2py runs no "
                "Connect worker, so it has no effect here",
            )

    def check_cluster_key(self, key: str, alias: str, rest: str) -> None:
        if rest.startswith(("ssl.", "sasl.")) and not _is_client_key(rest):
            # A misspelt security key would silently leave a keystore without its password.
            self.unknown(key, [f"{alias}.{n}" for n in sorted(_SECURITY_NAMES)])
            return
        if rest in CONNECTION_KEYS or rest.startswith(CLIENT_PREFIXES) or rest.startswith(("ssl.", "sasl.")):
            if rest == "security.protocol" and self.mm.raw.values()[key].strip().upper() not in SECURITY_PROTOCOLS:
                self.problem("error", key, "is not a security protocol", ", ".join(SECURITY_PROTOCOLS))
            return
        if rest in WORKER_KEYS:
            self.check_typed_value(key, rest)
            return
        if rest in CONNECTOR_KEYS or rest in MM2PY_KEYS:
            self.problem(
                "warning",
                key,
                "MM2 ignores cluster-level behaviour keys",
                f"top-level {rest} (all flows) or {alias}->B.{rest} (one flow)",
            )
            return
        self.unknown(key, [f"{alias}.{n}" for n in (*CONNECTION_KEYS, *WORKER_KEYS)])

    def check_flow_key(self, key: str) -> None:
        flow_text, _, rest = key.partition(".")
        while "->" not in flow_text or flow_text.endswith("->"):  # aliases may contain dots
            head, _, rest = rest.partition(".")
            if not head:
                break
            flow_text = f"{flow_text}.{head}"
        try:
            flow = Flow.parse(flow_text)
        except ValueError as exc:
            self.problem("error", key, str(exc))
            return
        for alias in (flow.source, flow.target):
            if alias not in self.mm.clusters:
                close = difflib.get_close_matches(alias, self.mm.clusters, n=1)
                self.problem(
                    "error",
                    key,
                    f"flow {flow} names '{alias}', which is not in clusters",
                    f"did you mean {close[0]}?" if close else ", ".join(self.mm.clusters) or None,
                )
                return
        if rest in CONNECTOR_KEYS or rest in CONNECTION_KEYS or rest in FLOW_MM2PY_KEYS:
            self.check_typed_value(key, rest)
        elif rest.startswith(_FLOW_CLIENT_PREFIXES) or rest.startswith(("ssl.", "sasl.")):
            return
        elif rest in RENAMED_KEYS:
            self.problem("warning", key, f"was removed in Kafka 4.0; mm2py reads it as {flow}.{RENAMED_KEYS[rest]}")
        elif rest in MM2PY_KEYS:
            self.problem(
                "warning",
                key,
                f"{rest} applies to the whole run, so mm2py reads it at the top level only",
                f"top-level {rest} (per flow: {', '.join(sorted(FLOW_MM2PY_KEYS))})",
            )
        else:
            self.unknown(key, [f"{flow}.{n}" for n in CONNECTOR_KEYS])

    def check_typed_value(self, key: str, name: str) -> None:
        definition = CONNECTOR_KEYS.get(name) or WORKER_KEYS.get(name) or MM2PY_KEYS.get(name)
        value = self.mm.raw.values()[key]
        if name == "security.protocol" and value.strip().upper() not in SECURITY_PROTOCOLS:
            self.problem("error", key, "is not a security protocol", ", ".join(SECURITY_PROTOCOLS))
        if definition is None:
            return
        resolved = self.mm.get(key) or ""
        try:
            parse_value(definition, resolved)
        except ValueProblem as exc:
            self.problem("error", key, exc.reason, exc.allowed)
            return
        if name in _REGEX_KEYS:
            # MM2 joins the list with "|" before compiling, so the whole value is one pattern.
            try:
                compile_pattern_list(parse_list(resolved))
            except PatternError as exc:
                self.problem(
                    "error",
                    key,
                    f"is not a valid regular expression: {exc}",
                    "Java regular expressions, comma-separated",
                )
        if name == "replication.policy.class":
            try:
                load_replication_policy(resolved.strip(), {"source.cluster.alias": "x"})
            except PluginError as exc:
                self.problem("error", key, str(exc))

    def unknown(self, key: str, candidates: list[str]) -> None:
        alias = _alias_prefix(key, self.mm.clusters)
        name = key[len(alias) + 1 :] if alias else key
        if name in CONNECT_WORKER_KEYS or not_acted_on(name) is not None:
            return  # check_acted_on said what it is
        if alias is None and key in WORKER_KEYS:
            self.problem(
                "warning",
                key,
                "is a worker key MM2 reads from the target cluster's settings; at the top level it has no effect",
                f"<target alias>.{key}",
            )
            return
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.8)
        # A misspelt secret key is not recognised as secret by its name: judge it by what it resembles.
        secretish = (bool(close) and is_secret_key(close[0])) or any(
            w in key.lower() for w in ("pass", "secret", "jaas", "token", "credential", "auth")
        )
        self.problem(
            "warning",
            key,
            "is not an MM2 key, so it has no effect",
            f"did you mean {close[0]}?" if close else None,
            value=MASK if secretish else None,
        )

    # -- flows --------------------------------------------------------------------------------------

    def check_flows(self) -> None:
        mm = self.mm
        enabled = mm.enabled_flows()
        if not enabled and mm.clusters:
            example = f"{mm.clusters[0]}->{mm.clusters[-1]}" if len(mm.clusters) > 1 else "A->B"
            self.problem(
                "warning",
                None,
                "no flow is enabled, so nothing will be replicated",
                f"enable one with {example}.enabled = true",
            )
        used = {alias for f in enabled for alias in (f.source, f.target)}
        for alias in sorted(used):
            if not (mm.get(f"{alias}.bootstrap.servers") or mm.get("bootstrap.servers")):
                flow = next(f for f in enabled if alias in (f.source, f.target))
                self.problem(
                    "error",
                    f"{alias}.bootstrap.servers",
                    f"is missing; flow {flow} uses {alias}",
                    "host:port[,host:port...]",
                    value="",
                    line=mm.raw.line_of(f"{flow}.enabled"),
                )
        # Clients of every herder MM2 would run: a cluster's security settings are checked even when only
        # heartbeats would use it.
        for flow in mm.cluster_pairs():
            build_flow_config(mm, flow, self.sink)


_SECURITY_NAMES = frozenset(k for k in (*CONNECTION_KEYS, *RDKAFKA_PROPERTIES) if k.startswith(("ssl.", "sasl.")))


def _is_client_key(name: str) -> bool:
    """A Java client key MM2 passes to clients, or a librdkafka property given directly."""
    return name in CONNECTION_KEYS or name in RDKAFKA_PROPERTIES or name in RENAMES


def _alias_prefix(key: str, clusters: tuple[str, ...]) -> str | None:
    matches = [a for a in clusters if key.startswith(a + ".")]
    return max(matches, key=len) if matches else None


def _is_cluster_level_name(rest: str) -> bool:
    return (
        rest in CONNECTION_KEYS
        or rest in WORKER_KEYS
        or rest.startswith(CLIENT_PREFIXES)
        or rest.startswith(("ssl.", "sasl.", "topic.creation."))
    )

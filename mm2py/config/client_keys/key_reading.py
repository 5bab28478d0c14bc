"""One client's keys being read: MM2's Java keys in, what they set and the issues about them out.

Why keyed by librdkafka's property names: a ``.properties`` file may set a client's TLS material or login either
with Java's keys (``ssl.truststore.location``, ``sasl.jaas.config``) or with librdkafka's (``ssl.ca.location``,
``sasl.username``), as MM2 users moving from a librdkafka client do. Reading a Java key as the librdkafka property
it sets puts both spellings on one footing, so a conflict between them is found (librdkafka's spelling wins, as
the more specific, with a warning) before the typed :class:`~mm2py.client_settings.ClientSettings` is made from
what was set. The names never leave this package as settings: each client stack adapts the typed object.
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.client_settings import ClientKind, KeyIssue, SettingProblem
from mm2py.librdkafka.key_tables import SASL_PROTOCOLS, TLS_PROTOCOLS
from mm2py.secrets import MASK, is_secret_key, mask_value


class KeyReading:
    """The Java keys of one client (trimmed as Java trims them), what they set so far, and the issues found."""

    def __init__(self, java: Mapping[str, str], kind: ClientKind) -> None:
        self.java = {key: value if is_secret_key(key) else value.strip() for key, value in java.items()}
        self.kind = kind
        self.values: dict[str, str] = {}
        self.issues: list[KeyIssue] = []
        self.problems: list[SettingProblem] = []
        self._sources: dict[str, str] = {}
        self.protocol = self.java.get("security.protocol", "PLAINTEXT").upper()
        self.tls = self.protocol in TLS_PROTOCOLS
        self.sasl = self.protocol in SASL_PROTOCOLS

    def error(self, key: str, reason: str, allowed: str | None = None) -> None:
        self.issues.append(KeyIssue(key, mask_value(key, self.java.get(key, "")), "error", reason, allowed))

    def warn(self, key: str, reason: str, *, hide: bool = False) -> None:
        value = MASK if hide else mask_value(key, self.java.get(key, ""))
        self.issues.append(KeyIssue(key, value, "warning", reason))

    def problem(self, name: str, reason: str, allowed: str | None = None) -> None:
        """A value that was set but cannot be used to connect: each client stack decides whether it can go on."""
        self.problems.append(SettingProblem(name, mask_value(name, self.values.get(name, "")), reason, allowed))

    def put(self, target: str, value: str, source: str) -> None:
        """Record that key ``source`` sets ``target`` to ``value``; a key spelt ``target`` itself wins."""
        previous = self._sources.get(target)
        if previous is not None and previous != source and self.values[target] != value:
            winner, loser = (source, previous) if source == target else (previous, source)
            self.warn(loser, f"sets librdkafka {target} to another value than {winner} does; {winner} wins")
            if winner != source:
                return
        self.values[target] = value
        self._sources[target] = source

    def get(self, name: str, default: str | None = None) -> str | None:
        """What was set for ``name`` (a librdkafka property name), or ``default``."""
        return self.values.get(name, default)

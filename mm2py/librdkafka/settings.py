"""The one place that turns the Java client settings MM2 users write into librdkafka settings.

Every consumer, producer and admin client mm2py creates — on the driver or inside a Spark task — is configured
from :func:`translate_client_config`, so a ``.properties`` file that works for MirrorMaker 2 means the same
thing here, and what cannot be carried over is reported once, as a :class:`KeyIssue`, instead of
failing later inside librdkafka or, worse, being silently ignored.

The key tables it applies are in :mod:`mm2py.librdkafka.key_tables`. How a client reaches and logs in to its
cluster (protocol, login, TLS material) is not read here: :mod:`mm2py.config.client_keys` reads those keys once into
:class:`~mm2py.client_settings.ClientSettings`, and :mod:`mm2py.librdkafka.security_keys` renders them.

Rules worth knowing:

* A key that only producers (or consumers) understand is dropped with a warning for the other kinds; admin
  clients take only properties common to all clients.
* librdkafka's own property names are accepted too (``fetch.queue.backoff.ms``), and win over a translated Java
  key that sets the same property.
* Custom Java classes that take part in authentication (login or callback handlers, SSL engine factories) are
  errors, not warnings: dropping one would change how the client authenticates.
* Values: Java trims every non-password value; booleans become ``true``/``false``. Nothing is added that the
  caller did not supply: MM2's own defaults are the caller's business.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from mm2py.client_settings import ClientKind, ClientSettings, KeyIssue
from mm2py.librdkafka.key_tables import (
    ASSIGNORS,
    BUILTIN_CLASSES,
    COMPRESSION_LEVELS,
    DROP_REASONS,
    JAVA_SCOPES,
    NO_EQUIVALENT,
    NO_EQUIVALENT_PREFIXES,
    RDKAFKA_BOOLEAN,
    RDKAFKA_PROPERTIES,
    RDKAFKA_SCOPES,
    RENAMES,
    SECURITY_KEYS,
    counts_under,
)
from mm2py.librdkafka.security_keys import security_properties
from mm2py.secrets import MASK, is_secret_key, mask_value


def translate_client_config(
    java: Mapping[str, str], kind: ClientKind, connection: ClientSettings
) -> tuple[dict[str, str], list[KeyIssue]]:
    """librdkafka settings for a ``kind`` client configured by the Java client settings ``java``, which reaches and
    logs in to its cluster as ``connection`` says (read from the same keys by :mod:`mm2py.config.client_keys`).

    Never raises for a user problem: every problem becomes an issue (``error``: the client would not work or
    would work differently than under MM2; ``warning``: a key was dropped). No issue text contains a secret.
    """
    translation = _Translation(java, kind)
    translation.run(connection)
    return translation.out, translation.issues


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``settings`` with secret values masked, for log lines."""
    return {key: mask_value(key, value) for key, value in settings.items()}


class _Translation:
    """One translation: the Java settings in, the librdkafka settings and the issues out."""

    def __init__(self, java: Mapping[str, str], kind: ClientKind) -> None:
        self.java = {key: value if is_secret_key(key) else value.strip() for key, value in java.items()}
        self.kind = kind
        self.out: dict[str, str] = {}
        self.issues: list[KeyIssue] = []
        self._sources: dict[str, str] = {}
        self.protocol = self.java.get("security.protocol", "PLAINTEXT").upper()

    def error(self, key: str, reason: str, allowed: str | None = None) -> None:
        value = mask_value(key, self.java.get(key, ""))
        self.issues.append(KeyIssue(key, value, "error", reason, allowed))

    def warn(self, key: str, reason: str, *, hide: bool = False) -> None:
        value = MASK if hide else mask_value(key, self.java.get(key, ""))
        self.issues.append(KeyIssue(key, value, "warning", reason))

    def put(self, target: str, value: str, source: str) -> None:
        """Set ``target`` unless this kind of client has no use for it; an explicit librdkafka key wins."""
        scope = JAVA_SCOPES.get(source) or next((s for s, keys in RDKAFKA_SCOPES if target in keys), None)
        if scope is not None and scope != self.kind:
            client = "an admin client" if self.kind == "admin" else f"a {self.kind}"
            self.warn(source, f"a {scope}-only setting (librdkafka {target}), dropped for {client}")
            return
        previous = self._sources.get(target)
        if previous is not None and previous != source and self.out[target] != value:
            winner, loser = (source, previous) if source == target else (previous, source)
            self.warn(loser, f"sets librdkafka {target} to another value than {winner} does; {winner} wins")
            if winner != source:
                return
        self.out[target] = value
        self._sources[target] = source

    def run(self, connection: ClientSettings) -> None:
        for target, value in security_properties(connection).items():
            self.put(target, value, target)
        for key in sorted(self.java):
            if key not in SECURITY_KEYS and counts_under(key, self.protocol):
                self._plain_key(key, self.java[key])

    def _plain_key(self, key: str, value: str) -> None:
        if key in BUILTIN_CLASSES:
            if value and value not in BUILTIN_CLASSES[key]:
                self.error(
                    key,
                    "a custom Java class that takes part in authentication: librdkafka cannot run "
                    "it, and dropping it would change how the client authenticates",
                    "remove it and configure one of librdkafka's own mechanisms",
                )
        elif key in DROP_REASONS or key in NO_EQUIVALENT or key.startswith(NO_EQUIVALENT_PREFIXES):
            if value:  # an empty value is Java's "none": nothing is lost
                self.warn(
                    key,
                    DROP_REASONS.get(key, "a Java-only client setting librdkafka has no equivalent for, dropped"),
                )
        elif key in COMPRESSION_LEVELS:
            codec = COMPRESSION_LEVELS[key]
            if self.java.get("compression.type", "").lower() == codec:
                self.put("compression.level", value, key)
            else:
                self.warn(key, f"applies only with compression.type={codec}, dropped")
        else:
            target = RENAMES.get(key, key)
            if key == "request.timeout.ms" and self.kind != "producer":
                target = "socket.timeout.ms"  # librdkafka's request.timeout.ms is the producer's ack timeout
            if target not in RDKAFKA_PROPERTIES:
                self.warn(
                    key,
                    "neither a Java client setting librdkafka can take nor a librdkafka property, dropped (a typo?)",
                    hide=True,  # a misspelt secret key must not print its secret
                )
                return
            converted = self._convert(key, target, value)
            if converted is not None:
                self.put(target, converted, key)

    def _convert(self, key: str, target: str, value: str) -> str | None:
        if target in RDKAFKA_BOOLEAN and value.lower() in ("true", "false"):  # Java ignores their case
            return value.lower()
        if key in ("buffer.memory", "send.buffer.bytes", "receive.buffer.bytes"):
            if not value.lstrip("-").isdigit():
                self.error(key, "not a whole number of bytes")
                return None
            if key == "buffer.memory":  # bytes -> kilobytes, never less than asked for
                return str(max(1, math.ceil(int(value) / 1024)))
            return "0" if int(value) == -1 else value  # "OS default" is -1 in Java, 0 in librdkafka
        if key == "bootstrap.servers":
            return ",".join(part.strip() for part in value.split(",") if part.strip())
        if key == "auto.offset.reset" and value.lower() == "none":
            return "error"  # Java's "none" (fail when there is no committed offset) is librdkafka's "error"
        if key == "partition.assignment.strategy":
            return self._assignors(value)
        return value

    def _assignors(self, value: str) -> str | None:
        names = []
        for entry in (part.strip() for part in value.split(",") if part.strip()):
            name = ASSIGNORS.get(entry, entry)
            if name in ASSIGNORS.values():
                names.append(name)
            else:
                self.warn("partition.assignment.strategy", f"lists {entry}, which librdkafka lacks; left out")
        cooperative = [name == "cooperative-sticky" for name in names]
        if len(set(cooperative)) > 1:
            names = [name for name, coop in zip(names, cooperative, strict=True) if coop == cooperative[0]]
            self.warn(
                "partition.assignment.strategy",
                f"mixes eager and cooperative assignors, which librdkafka refuses; keeping {','.join(names)}",
            )
        return ",".join(names) or None

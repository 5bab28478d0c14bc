"""A client's keys read once, when the file is loaded, into the typed, library-neutral :class:`ClientSettings`.

Why here, in configuration: both client stacks connect from this one reading (librdkafka renders its properties
from it, :mod:`mm2py.librdkafka.security_keys`; the batch path's client adapts it, :mod:`mm2py.wire`), so the same
``.properties`` file reaches the same brokers with the same TLS trust, certificate, login and timeouts on either
path, and choosing a flow's copy path asks the same object.

Rules worth knowing:

* Security is read the way the Java client reads it: ``ssl.*`` keys only when ``security.protocol`` is ``SSL``
  or ``SASL_SSL``, ``sasl.*`` keys only for ``SASL_*``. Otherwise they are dropped without an issue — MM2's
  top-level ``ssl.*``/``sasl.*`` keys are defaults for every cluster, so a PLAINTEXT cluster often inherits a
  truststore it never opens, and must not fail on it.
* librdkafka's own spellings are accepted too (``ssl.ca.location``, ``sasl.username``) and win over a Java key that
  sets the same thing, with a warning.
* An error is an issue (the client would not work, or would work differently than under MM2); a value that is set
  but cannot be used to connect is also a :class:`SettingProblem` in the result, so a client that would need it
  refuses. Nothing here raises for a user's mistake, and no issue holds a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mm2py.client_settings import ClientKind, ClientSettings, KeyIssue, SettingProblem
from mm2py.config.client_keys.key_reading import KeyReading
from mm2py.config.client_keys.login import read_sasl, typed_login
from mm2py.config.client_keys.tls import read_keystore, read_tls_details, read_truststore, typed_tls
from mm2py.librdkafka.key_tables import (
    BUILTIN_CLASSES,
    DROP_REASONS,
    JAVA_SCOPES,
    NATIVE_SECURITY_KEYS,
    NO_EQUIVALENT,
    NO_EQUIVALENT_PREFIXES,
    PROTOCOLS,
    RDKAFKA_BOOLEAN,
    RDKAFKA_PROPERTIES,
    SECURITY_KEYS,
    counts_under,
)
from mm2py.librdkafka.settings import translate_client_config
from mm2py.secrets import mask_value

_SECURITY_PREFIXES = ("ssl.", "sasl.", "enable.ssl.", "enable.sasl.", "ssl_")
# Connection keys, strictly whole milliseconds (else a problem): field -> key (the same in both spellings).
_MILLISECONDS = {
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "socket_connection_setup_timeout_ms": "socket.connection.setup.timeout.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
}
# Tuning only: the first key set to a whole number wins (librdkafka's spelling first), else None; a field of one
# kind of client is read for that kind only.
_TUNING: dict[str, tuple[tuple[str, ...], ClientKind | None]] = {
    "retry_backoff_ms": (("retry.backoff.ms",), None),
    "retry_backoff_max_ms": (("retry.backoff.max.ms",), None),
    "ack_timeout_ms": (("request.timeout.ms",), "producer"),
    "delivery_timeout_ms": (("message.timeout.ms", "delivery.timeout.ms"), "producer"),
    "linger_ms": (("queue.buffering.max.ms", "linger.ms"), "producer"),
    "batch_size": (("batch.size",), "producer"),
    "message_max_bytes": (("message.max.bytes", "max.request.size"), None),
    "fetch_min_bytes": (("fetch.min.bytes",), "consumer"),
    "fetch_max_wait_ms": (("fetch.wait.max.ms", "fetch.max.wait.ms"), "consumer"),
    "fetch_max_bytes": (("fetch.max.bytes",), "consumer"),
    "max_partition_fetch_bytes": (("fetch.message.max.bytes", "max.partition.fetch.bytes"), "consumer"),
}


@dataclass(frozen=True)
class ClientKeys:
    """A client's keys as both client stacks take them: the typed settings and librdkafka's properties, with every
    issue found in either reading."""

    connection: ClientSettings = field(repr=False)
    librdkafka: dict[str, str] = field(repr=False)
    issues: list[KeyIssue]


def read_client_keys(java: Mapping[str, str], kind: ClientKind) -> ClientKeys:
    """The keys ``java`` of a ``kind`` client read once, and rendered as librdkafka properties from that reading."""
    connection, issues = read_client_settings(java, kind)
    librdkafka, more = translate_client_config(java, kind, connection)
    return ClientKeys(connection, librdkafka, [*issues, *more])


def read_client_settings(java: Mapping[str, str], kind: ClientKind) -> tuple[ClientSettings, list[KeyIssue]]:
    """The :class:`ClientSettings` of a ``kind`` client configured by the keys ``java``, and the issues found."""
    reading = KeyReading(java, kind)
    if "security.protocol" in reading.java and reading.protocol not in PROTOCOLS:
        reading.error("security.protocol", "not a security protocol", ", ".join(PROTOCOLS))
    if reading.sasl:
        read_sasl(reading)
    if reading.tls:
        read_keystore(reading)
        read_truststore(reading)
        read_tls_details(reading)
    for key in sorted(NATIVE_SECURITY_KEYS & reading.java.keys()):
        if counts_under(key, reading.protocol):
            value = reading.java[key]
            reading.put(key, value.lower() if key in RDKAFKA_BOOLEAN else value, key)
    return _typed(reading, java), reading.issues


def _typed(reading: KeyReading, java: Mapping[str, str]) -> ClientSettings:
    """The typed settings: what the security keys set (``reading``) and the caller's other keys (``java``), each
    value trimmed as Java trims it."""
    servers = tuple(s.strip() for s in java.get("bootstrap.servers", "").split(",") if s.strip())
    if not servers:
        reading.problems.append(_problem(java, "bootstrap.servers", "no bootstrap servers"))
    # librdkafka's socket.timeout.ms is what the Java consumer and admin call request.timeout.ms.
    timeout_key = "socket.timeout.ms" if "socket.timeout.ms" in java else "request.timeout.ms"
    mechanism = (reading.get("sasl.mechanism") or "GSSAPI") if reading.sasl else None  # GSSAPI: Java's default
    return ClientSettings(
        bootstrap_servers=servers,
        security_protocol=reading.protocol,
        client_id=_trimmed(java, "client.id"),
        request_timeout_ms=_milliseconds(reading, java, timeout_key),
        **{name: _milliseconds(reading, java, key) for name, key in _MILLISECONDS.items()},
        client_dns_lookup=_trimmed(java, "client.dns.lookup"),
        **{name: _tuning(java, reading.kind, keys, kind) for name, (keys, kind) in _TUNING.items()},
        isolation_level=_trimmed(java, "isolation.level") if reading.kind == "consumer" else None,
        sasl_mechanism=mechanism,
        login=typed_login(reading, mechanism) if mechanism else None,
        tls=typed_tls(reading) if reading.tls else None,
        other_security_keys=tuple(
            (key, mask_value(key, value))
            for key, value in sorted(reading.java.items())
            if _other_security_key(reading, key)
        ),
        problems=tuple(reading.problems),
    )


def _trimmed(java: Mapping[str, str], key: str) -> str | None:
    value = java.get(key)
    return None if value is None else value.strip()


def _milliseconds(reading: KeyReading, java: Mapping[str, str], key: str) -> int | None:
    value = java.get(key)
    if value is None:
        return None
    if not value.strip().isdigit():
        reading.problems.append(_problem(java, key, "not a whole number of milliseconds"))
        return None
    return int(value)


def _tuning(java: Mapping[str, str], own: ClientKind, keys: tuple[str, ...], kind: ClientKind | None) -> int | None:
    if kind is not None and kind != own:
        return None
    keys = tuple(k for k in keys if JAVA_SCOPES.get(k, own) == own)  # max.request.size: producers' only
    return next((int(v) for v in (java.get(k, "").strip() for k in keys) if v.isdigit()), None)


def _other_security_key(reading: KeyReading, key: str) -> bool:
    """A security key that none of ClientSettings' fields carries but librdkafka is given as written: a client
    that cannot honour it must refuse (its name and masked value travel in ``other_security_keys``)."""
    return (
        key.startswith(_SECURITY_PREFIXES)
        and key not in SECURITY_KEYS
        and counts_under(key, reading.protocol)
        and key in RDKAFKA_PROPERTIES
        and key not in BUILTIN_CLASSES
        and key not in DROP_REASONS
        and key not in NO_EQUIVALENT
        and not key.startswith(NO_EQUIVALENT_PREFIXES)
    )


def _problem(java: Mapping[str, str], key: str, reason: str) -> SettingProblem:
    return SettingProblem(key, mask_value(key, java.get(key, "")), reason)

"""The one place that turns the Java client settings MM2 users write into librdkafka settings.

Every consumer, producer and admin client mm2py creates — on the driver or inside a Spark task — is configured
from :func:`translate_client_config`, so a ``.properties`` file that works for MirrorMaker 2 means the same
thing here, and what cannot be carried over is reported once, as a :class:`TranslationIssue`, instead of
failing later inside librdkafka or, worse, being silently ignored.

The key tables it applies are in :mod:`mm2py.librdkafka.key_tables`; reading ``sasl.jaas.config`` and carrying
each login module's options over is in :mod:`mm2py.librdkafka.jaas`.

Rules worth knowing:

* Security is read the way the Java client reads it: ``ssl.*`` keys only when ``security.protocol`` is ``SSL``
  or ``SASL_SSL``, ``sasl.*`` keys only for ``SASL_*``. Otherwise they are dropped without an issue — MM2's
  top-level ``ssl.*``/``sasl.*`` keys are defaults for every cluster, so a PLAINTEXT cluster often inherits a
  truststore it never opens, and must not fail on it.
* librdkafka's own property names are accepted too (``ssl.ca.location``, ``fetch.queue.backoff.ms``), and win
  over a translated Java key that sets the same property.
* A key that only producers (or consumers) understand is dropped with a warning for the other kinds; admin
  clients take only properties common to all clients.
* Custom Java classes that take part in authentication (login or callback handlers, SSL engine factories) are
  errors, not warnings: dropping one would change how the client authenticates.
* Java key and trust stores (JKS, JCEKS, PKCS12) are read here, with their passwords, and reach the
  clients as PEM text in librdkafka's in-memory settings (``ssl.ca.pem``, ``ssl.certificate.pem``,
  ``ssl.key.pem``): OpenSSL cannot read JKS, and no converted copy of a private key is left on disk. A store
  that is missing or that its password does not open is an error naming the key to fix.
* Values: Java trims every non-password value; booleans become ``true``/``false``; ``security.protocol`` is
  upper-cased. Nothing is added that the caller did not supply: MM2's own defaults are the caller's business.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mm2py.librdkafka.jaas import (
    JAAS_FORMAT,
    MODULE_MECHANISMS,
    NO_GSSAPI_INSTEAD,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    JaasSyntaxError,
    no_gssapi_reason,
    parse_jaas,
    translate_login_module,
)
from mm2py.librdkafka.jaas import gssapi_available as _gssapi_available  # one name, so tests can replace it
from mm2py.librdkafka.key_tables import (
    ASSIGNORS,
    BUILTIN_CLASSES,
    COMPRESSION_LEVELS,
    DROP_REASONS,
    JAVA_SCOPES,
    MECHANISMS,
    NO_EQUIVALENT,
    NO_EQUIVALENT_PREFIXES,
    PROTOCOLS,
    RDKAFKA_BOOLEAN,
    RDKAFKA_PROPERTIES,
    RDKAFKA_SCOPES,
    RENAMES,
)
from mm2py.librdkafka.keystores import STORE_TYPES, KeyStoreError, read_keystore, read_truststore
from mm2py.librdkafka.tls_details import TLS_DETAIL_KEYS, translate_tls_details
from mm2py.secrets import MASK, is_secret_key, mask_value

ClientKind = Literal["consumer", "producer", "admin"]


@dataclass(frozen=True)
class TranslationIssue:
    """Something a user should know about one Java key. ``value`` is already masked when the key is secret."""

    key: str
    value: str
    severity: Literal["error", "warning"]
    reason: str
    allowed: str | None = None


_NATIVE_CREDENTIALS = ("sasl.username", "sasl.oauthbearer.method", "sasl.oauthbearer.config")
# Keys read together by the security steps rather than one by one.
_SECURITY_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        OIDC_CLIENT_ID,
        OIDC_CLIENT_SECRET,
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        *TLS_DETAIL_KEYS,
    }
)


def translate_client_config(java: Mapping[str, str], kind: ClientKind) -> tuple[dict[str, str], list[TranslationIssue]]:
    """librdkafka settings for a ``kind`` client configured by the Java client settings ``java``.

    Never raises for a user problem: every problem becomes an issue (``error``: the client would not work or
    would work differently than under MM2; ``warning``: a key was dropped). No issue text contains a secret.
    """
    translation = _Translation(java, kind)
    translation.run()
    return translation.out, translation.issues


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``settings`` with secret values masked, for log lines."""
    return {key: mask_value(key, value) for key, value in settings.items()}


def _store_type(declared: str, location: str) -> str:
    if declared:
        return declared.upper()
    # Java's default store type is JKS; since Java 9 that type also opens PKCS12 files, hence the extension.
    return "PKCS12" if location.lower().endswith((".p12", ".pfx")) else "JKS"


class _Translation:
    """One translation: the Java settings in, the librdkafka settings and the issues out."""

    def __init__(self, java: Mapping[str, str], kind: ClientKind) -> None:
        self.java = {key: value if is_secret_key(key) else value.strip() for key, value in java.items()}
        self.kind = kind
        self.out: dict[str, str] = {}
        self.issues: list[TranslationIssue] = []
        self._sources: dict[str, str] = {}
        protocol = self.java.get("security.protocol", "PLAINTEXT").upper()
        self.tls = protocol in ("SSL", "SASL_SSL")
        self.sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def error(self, key: str, reason: str, allowed: str | None = None) -> None:
        value = mask_value(key, self.java.get(key, ""))
        self.issues.append(TranslationIssue(key, value, "error", reason, allowed))

    def warn(self, key: str, reason: str, *, hide: bool = False) -> None:
        value = MASK if hide else mask_value(key, self.java.get(key, ""))
        self.issues.append(TranslationIssue(key, value, "warning", reason))

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

    def run(self) -> None:
        if "security.protocol" in self.java:
            protocol = self.java["security.protocol"].upper()
            if protocol in PROTOCOLS:
                self.put("security.protocol", protocol, "security.protocol")
            else:
                self.error("security.protocol", "not a security protocol", ", ".join(PROTOCOLS))
        if self.sasl:
            self._sasl()
        if self.tls:
            self._keystore()
            self._truststore()
            translate_tls_details(self)
        for key in sorted(self.java):
            skipped = (key.startswith("ssl.") and not self.tls) or (key.startswith("sasl.") and not self.sasl)
            if key not in _SECURITY_KEYS and not skipped:
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

    # --- SASL ---------------------------------------------------------------------------------------------
    def _sasl(self) -> None:
        """Check ``sasl.mechanism`` against the JAAS login module, then translate the module's options."""
        mechanism_key = "sasl.mechanisms" if "sasl.mechanisms" in self.java else "sasl.mechanism"
        mechanism = self.java.get(mechanism_key, "")
        if mechanism and mechanism not in MECHANISMS:
            reason = "not a SASL mechanism librdkafka supports (names are case-sensitive)"
            self.error(mechanism_key, reason, ", ".join(MECHANISMS))
            return
        if mechanism:
            self.put("sasl.mechanism", mechanism, mechanism_key)
        mechanism = mechanism or "GSSAPI"  # Java's default, and librdkafka's
        jaas = self.java.get("sasl.jaas.config", "")
        try:
            module, options = parse_jaas(jaas) if jaas else ("", {})
        except JaasSyntaxError as error:
            self.error("sasl.jaas.config", f"cannot be parsed: {error}", JAAS_FORMAT)
            return
        if module and module not in MODULE_MECHANISMS:
            reason = f"uses login module {module}, which librdkafka cannot emulate"
            self.error("sasl.jaas.config", reason, ", ".join(MODULE_MECHANISMS))
        elif module and mechanism not in MODULE_MECHANISMS[module]:
            reason = (
                f"{mechanism} (Java's default when unset is GSSAPI) does not match the login module "
                f"{module.rsplit('.', 1)[-1]} in sasl.jaas.config"
            )
            self.error(mechanism_key, reason, " or ".join(f"sasl.mechanism={m}" for m in MODULE_MECHANISMS[module]))
        elif not module and mechanism != "GSSAPI" and not any(key in self.java for key in _NATIVE_CREDENTIALS):
            self.error("sasl.jaas.config", f"not set, so a {mechanism} client has no credentials", JAAS_FORMAT)
        else:
            if mechanism == "GSSAPI" and not _gssapi_available():
                self.error(mechanism_key, no_gssapi_reason(), NO_GSSAPI_INSTEAD)
            if module:
                translate_login_module(self, module, options)

    # --- TLS ----------------------------------------------------------------------------------------------
    def _keystore(self) -> None:
        java = self.java
        location, declared = java.get("ssl.keystore.location", ""), java.get("ssl.keystore.type", "")
        key_password, password = java.get("ssl.key.password", ""), java.get("ssl.keystore.password", "")
        if java.get("ssl.keystore.key") or java.get("ssl.keystore.certificate.chain"):
            if declared.upper() not in ("", "PEM") or location:
                self.error(
                    "ssl.keystore.key",
                    "an inline PEM key, which needs ssl.keystore.type=PEM and no ssl.keystore.location",
                )
            elif not (java.get("ssl.keystore.key") and java.get("ssl.keystore.certificate.chain")):
                self.error("ssl.keystore.key", "needs ssl.keystore.certificate.chain, and the other way round")
            else:
                self.put("ssl.key.pem", java["ssl.keystore.key"], "ssl.keystore.key")
                self.put(
                    "ssl.certificate.pem",
                    java["ssl.keystore.certificate.chain"],
                    "ssl.keystore.certificate.chain",
                )
                if key_password:
                    self.put("ssl.key.password", key_password, "ssl.key.password")
            return
        store_type = _store_type(declared, location)
        if not location:
            if key_password and ("ssl.key.location" in java or "ssl.key.pem" in java):
                self.put("ssl.key.password", key_password, "ssl.key.password")  # librdkafka's own key names
        elif store_type == "PEM":  # one file with the private key and the certificate chain
            self.put("ssl.key.location", location, "ssl.keystore.location")
            self.put("ssl.certificate.location", location, "ssl.keystore.location")
            if key_password:
                self.put("ssl.key.password", key_password, "ssl.key.password")
        elif store_type not in STORE_TYPES:
            self.error(
                "ssl.keystore.type",
                f"a {store_type} keystore, which mm2py cannot read",
                ", ".join((*STORE_TYPES, "PEM")),
            )
        else:
            try:
                certificate = read_keystore(location, store_type, password, key_password or None)
            except KeyStoreError as problem:
                self.error(problem.key, f"{problem.reason} ({_role_of(store_type, declared, 'keystore')})")
                return
            # In memory: the key reaches librdkafka (and the batch path) without a file or a password.
            self.put("ssl.key.pem", certificate.key_pem, "ssl.keystore.location")
            self.put("ssl.certificate.pem", certificate.chain_pem, "ssl.keystore.location")

    def _truststore(self) -> None:
        java = self.java
        location, declared = java.get("ssl.truststore.location", ""), java.get("ssl.truststore.type", "")
        certificates = java.get("ssl.truststore.certificates", "")
        store_type = "PEM" if certificates and not declared else _store_type(declared, location)
        if store_type == "PEM" and java.get("ssl.truststore.password"):
            self.warn("ssl.truststore.password", "not used by a PEM truststore, dropped")
        if certificates:
            if store_type != "PEM" or location:
                self.error(
                    "ssl.truststore.certificates",
                    "inline PEM certificates, which need ssl.truststore.type=PEM and no ssl.truststore.location",
                )
            else:
                self.put("ssl.ca.pem", certificates, "ssl.truststore.certificates")
        elif not location:
            return
        elif store_type == "PEM":
            self.put("ssl.ca.location", location, "ssl.truststore.location")
        elif store_type not in STORE_TYPES:
            self.error(
                "ssl.truststore.type",
                f"a {store_type} truststore, which mm2py cannot read",
                ", ".join((*STORE_TYPES, "PEM")),
            )
        else:
            try:
                bundle = read_truststore(location, store_type, java.get("ssl.truststore.password") or None)
            except KeyStoreError as problem:
                self.error(problem.key, f"{problem.reason} ({_role_of(store_type, declared, 'truststore')})")
                return
            self.put("ssl.ca.pem", bundle, "ssl.truststore.location")


def _role_of(store_type: str, declared: str, role: str) -> str:
    origin = "" if declared else (", by its file name" if store_type == "PKCS12" else ", Java's default type")
    return f"a {store_type} {role}{origin}"

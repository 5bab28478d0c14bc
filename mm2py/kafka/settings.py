"""The one place that turns the Java client settings MM2 users write into librdkafka settings.

Every consumer, producer and admin client mm2py creates — on the driver or inside a Spark task — is configured
from :func:`translate_client_config`, so a ``.properties`` file that works for MirrorMaker 2 means the same
thing here, and what cannot be carried over is reported once, as a :class:`TranslationIssue`, instead of
failing later inside librdkafka or, worse, being silently ignored.

The tables are facts, not guesses: librdkafka's side comes from the property list of the installed librdkafka
(2.16, ``rd_kafka_conf_properties_show``) and from constructing real clients with every emitted key; Java's
side from Kafka's ``ProducerConfig``, ``ConsumerConfig``, ``AdminClientConfig``, ``SslConfigs``,
``SaslConfigs`` and ``JaasConfig``.

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
* Values: Java trims every non-password value; booleans become ``true``/``false``; ``security.protocol`` is
  upper-cased. Nothing is added that the caller did not supply: MM2's own defaults are the caller's business.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from mm2py.secrets import is_secret_key, mask_value

ClientKind = Literal["consumer", "producer", "admin"]


@dataclass(frozen=True)
class TranslationIssue:
    """Something a user should know about one Java key. ``value`` is already masked when the key is secret."""

    key: str
    value: str
    severity: Literal["error", "warning"]
    reason: str
    allowed: str | None = None


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# librdkafka 2.16 properties by scope, without the ones only settable through the C API (callbacks, pointers).
_RDKAFKA_CONSUMER = _names("""
    auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs consume.callback.max.messages
    coordinator.query.interval.ms enable.auto.commit enable.auto.offset.store enable.partition.eof
    fetch.error.backoff.ms fetch.max.bytes fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms
    fetch.wait.max.ms group.id group.instance.id group.protocol group.protocol.type group.remote.assignor
    heartbeat.interval.ms isolation.level max.partition.fetch.bytes max.poll.interval.ms max.poll.records
    offset.store.method offset.store.path offset.store.sync.interval.ms partition.assignment.strategy
    queued.max.messages.kbytes queued.min.messages session.timeout.ms share.acknowledgement.mode""")
_RDKAFKA_PRODUCER = _names("""
    acks batch.num.messages batch.size compression.codec compression.level compression.type
    delivery.report.only.error delivery.timeout.ms enable.gapless.guarantee enable.idempotence linger.ms
    message.send.max.retries message.timeout.ms partitioner produce.offset.report
    queue.buffering.backpressure.threshold queue.buffering.max.kbytes queue.buffering.max.messages
    queue.buffering.max.ms queuing.strategy request.required.acks request.timeout.ms retries
    sticky.partitioning.linger.ms transaction.timeout.ms transactional.id""")
_RDKAFKA_GLOBAL = _names("""
    allow.auto.create.topics api.version.fallback.ms api.version.request api.version.request.timeout.ms
    bootstrap.servers broker.address.family broker.address.ttl broker.version.fallback builtin.features
    client.dns.lookup client.id client.rack connections.max.idle.ms debug enable.metrics.push
    enable.random.seed enable.sasl.oauthbearer.unsecure.jwt enable.ssl.certificate.verification
    enabled_events https.ca.location https.ca.pem internal.termination.signal log.connection.close
    log.queue log.thread.name log_level max.in.flight max.in.flight.requests.per.connection
    message.copy.max.bytes message.max.bytes metadata.broker.list metadata.max.age.ms
    metadata.recovery.rebootstrap.trigger.ms metadata.recovery.strategy plugin.library.paths
    receive.message.max.bytes reconnect.backoff.jitter.ms reconnect.backoff.max.ms reconnect.backoff.ms
    retry.backoff.max.ms retry.backoff.ms sasl.kerberos.keytab sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.kerberos.principal sasl.kerberos.service.name
    sasl.mechanism sasl.mechanisms sasl.oauthbearer.assertion.algorithm
    sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
    sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.jwt.template.file
    sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.private.key.pem sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
    sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
    sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type sasl.oauthbearer.method
    sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
    sasl.password sasl.username security.protocol socket.blocking.max.ms
    socket.connection.setup.timeout.ms socket.keepalive.enable socket.max.fails socket.nagle.disable
    socket.receive.buffer.bytes socket.send.buffer.bytes socket.timeout.ms ssl.ca.certificate.stores
    ssl.ca.location ssl.ca.pem ssl.certificate.location ssl.certificate.pem ssl.cipher.suites
    ssl.crl.location ssl.curves.list ssl.endpoint.identification.algorithm ssl.engine.id
    ssl.engine.location ssl.key.location ssl.key.password ssl.key.pem ssl.keystore.location
    ssl.keystore.password ssl.providers ssl.sigalgs.list statistics.interval.ms topic.blacklist
    topic.metadata.propagation.max.ms topic.metadata.refresh.fast.cnt
    topic.metadata.refresh.fast.interval.ms topic.metadata.refresh.interval.ms
    topic.metadata.refresh.sparse""")
_RDKAFKA = _RDKAFKA_CONSUMER | _RDKAFKA_PRODUCER | _RDKAFKA_GLOBAL


# Java keys whose librdkafka property has another name. (Java's metadata.max.age.ms is the forced-refresh
# period, which is librdkafka's topic.metadata.refresh.interval.ms — same meaning, same 300000 default;
# librdkafka's metadata.max.age.ms is a cache lifetime.)
_RENAMES = {
    "max.request.size": "message.max.bytes",
    "buffer.memory": "queue.buffering.max.kbytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "metadata.max.age.ms": "topic.metadata.refresh.interval.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
_NO_EQUIVALENT = _names("""
    key.serializer value.serializer key.deserializer value.deserializer interceptor.classes
    partitioner.class partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
    partitioner.ignore.keys metric.reporters max.block.ms metadata.max.idle.ms default.api.timeout.ms
    exclude.internal.topics socket.connection.setup.timeout.max.ms security.providers
    bootstrap.controllers ssl.provider ssl.keymanager.algorithm ssl.trustmanager.algorithm
    ssl.secure.random.implementation sasl.kerberos.ticket.renew.window.factor
    sasl.kerberos.ticket.renew.jitter sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
    sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.login.connect.timeout.ms
    sasl.login.read.timeout.ms sasl.login.retry.backoff.ms sasl.login.retry.backoff.max.ms
    sasl.oauthbearer.scope.claim.name sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer sasl.oauthbearer.header.urlencode""")
_NO_EQUIVALENT_PREFIXES = ("metrics.", "key.converter", "value.converter", "header.converter")
_DROP_REASONS = {
    "ssl.protocol": "dropped: librdkafka lets OpenSSL negotiate the TLS version with the broker",
    "ssl.enabled.protocols": "dropped: librdkafka lets OpenSSL negotiate the TLS version with the broker",
    "max.poll.records": "dropped: librdkafka's consumer has no per-poll record limit (its "
    "max.poll.records is for share consumers only)",
    "sasl.kerberos.kinit.cmd": "dropped: in Java it is the path of kinit, in librdkafka a whole command "
    "line; librdkafka's default command runs kinit with sasl.kerberos.keytab",
}
_BUILTIN_CLASSES = {
    "sasl.login.callback.handler.class": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler",
    ),
    "sasl.client.callback.handler.class": (
        "org.apache.kafka.common.security.authenticator.SaslClientCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerSaslClientCallbackHandler",
    ),
    "sasl.login.class": (
        "org.apache.kafka.common.security.authenticator.DefaultLogin",
        "org.apache.kafka.common.security.kerberos.KerberosLogin",
        "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerRefreshingLogin",
    ),
    "ssl.engine.factory.class": ("org.apache.kafka.common.security.ssl.DefaultSslEngineFactory",),
}
_ASSIGNORS = {  # Java assignor class -> librdkafka name; StickyAssignor (eager sticky) has none
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
_COMPRESSION_LEVELS = {
    "compression.gzip.level": "gzip",
    "compression.lz4.level": "lz4",
    "compression.zstd.level": "zstd",
}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_KRB5_MODULES = (
    "com.sun.security.auth.module.Krb5LoginModule",
    "com.ibm.security.auth.module.Krb5LoginModule",
)
_MODULE_MECHANISMS = {
    _PLAIN_MODULE: ("PLAIN",),
    _SCRAM_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    _OAUTH_MODULE: ("OAUTHBEARER",),
    **dict.fromkeys(_KRB5_MODULES, ("GSSAPI",)),
}
_JAAS_FORMAT = '<LoginModule class> required key="value" key2="value2";'
_UNSECURED = "unsecuredLogin"
_UNSECURED_MAPPED = tuple(f"{_UNSECURED}{o}" for o in ("StringClaim_sub", "ListClaim_scope", "LifetimeSeconds"))
_NATIVE_CREDENTIALS = ("sasl.username", "sasl.oauthbearer.method", "sasl.oauthbearer.config")
# Keys read together by the security steps rather than one by one.
_SECURITY_KEYS = _names("""
    security.protocol sasl.mechanism sasl.mechanisms sasl.jaas.config ssl.keystore.type
    ssl.keystore.location ssl.keystore.password ssl.key.password ssl.keystore.key
    ssl.keystore.certificate.chain ssl.truststore.type ssl.truststore.location ssl.truststore.password
    ssl.truststore.certificates ssl.endpoint.identification.algorithm ssl.cipher.suites""")


def translate_client_config(
    java: Mapping[str, str], kind: ClientKind
) -> tuple[dict[str, str], list[TranslationIssue]]:
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


@functools.cache
def _gssapi_available() -> bool:
    """Whether the installed librdkafka was built with Kerberos (the PyPI wheels are not)."""
    try:
        import confluent_kafka

        confluent_kafka.Producer({"builtin.features": "sasl_gssapi", "log_level": 0})
    except ImportError:  # cannot tell; the client itself will say so
        return True
    except Exception:
        return False
    return True


def _store_type(declared: str, location: str) -> str:
    if declared:
        return declared.upper()
    # Java's default store type is JKS; since Java 9 that type also opens PKCS12 files, hence the extension.
    return "PKCS12" if location.lower().endswith((".p12", ".pfx")) else "JKS"


class _Translation:
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

    def warn(self, key: str, reason: str) -> None:
        value = mask_value(key, self.java.get(key, ""))
        self.issues.append(TranslationIssue(key, value, "warning", reason))

    def put(self, target: str, value: str, source: str) -> None:
        """Set ``target`` unless this kind of client has no use for it; an explicit librdkafka key wins."""
        for only, scope in ((_RDKAFKA_CONSUMER, "consumer"), (_RDKAFKA_PRODUCER, "producer")):
            if target in only and self.kind != scope:
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
            if protocol in _PROTOCOLS:
                self.put("security.protocol", protocol, "security.protocol")
            else:
                self.error("security.protocol", "not a security protocol", ", ".join(_PROTOCOLS))
        if self.sasl:
            self._sasl()
        if self.tls:
            self._keystore()
            self._truststore()
            self._tls_details()
        for key in sorted(self.java):
            skipped = (key.startswith("ssl.") and not self.tls) or (key.startswith("sasl.") and not self.sasl)
            if key not in _SECURITY_KEYS and not skipped:
                self._plain_key(key, self.java[key])

    def _plain_key(self, key: str, value: str) -> None:
        if key in _BUILTIN_CLASSES:
            if value and value not in _BUILTIN_CLASSES[key]:
                self.error(
                    key,
                    "a custom Java class that takes part in authentication: librdkafka cannot run "
                    "it, and dropping it would change how the client authenticates",
                    "remove it and configure one of librdkafka's own mechanisms",
                )
        elif key in _DROP_REASONS or key in _NO_EQUIVALENT or key.startswith(_NO_EQUIVALENT_PREFIXES):
            if value:  # an empty value is Java's "none": nothing is lost
                self.warn(
                    key,
                    _DROP_REASONS.get(
                        key, "a Java-only client setting librdkafka has no equivalent for, dropped"
                    ),
                )
        elif key in _COMPRESSION_LEVELS:
            codec = _COMPRESSION_LEVELS[key]
            if self.java.get("compression.type", "").lower() == codec:
                self.put("compression.level", value, key)
            else:
                self.warn(key, f"applies only with compression.type={codec}, dropped")
        else:
            target = _RENAMES.get(key, key)
            if key == "request.timeout.ms" and self.kind != "producer":
                target = "socket.timeout.ms"  # librdkafka's request.timeout.ms is the producer's ack timeout
            elif key == "max.request.size" and self.kind != "producer":
                target = "request.required.acks"  # a producer-only key in Java; reported as such by put()
            if target not in _RDKAFKA:
                self.warn(
                    key,
                    "neither a Java client setting librdkafka can take nor a librdkafka property, "
                    "dropped (a typo?)",
                )
                return
            converted = self._convert(key, target, value)
            if converted is not None:
                self.put(target, converted, key)

    def _convert(self, key: str, target: str, value: str) -> str | None:
        if value.lower() in ("true", "false"):  # Java reads booleans case-insensitively, librdkafka may not
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
            name = _ASSIGNORS.get(entry, entry)
            if name in _ASSIGNORS.values():
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
        mechanism_key = "sasl.mechanisms" if "sasl.mechanisms" in self.java else "sasl.mechanism"
        mechanism = self.java.get(mechanism_key, "")
        if mechanism and mechanism not in _MECHANISMS:
            self.error(
                mechanism_key,
                "not a SASL mechanism librdkafka supports (names are case-sensitive)",
                ", ".join(_MECHANISMS),
            )
            return
        if mechanism:
            self.put("sasl.mechanism", mechanism, mechanism_key)
        mechanism = mechanism or "GSSAPI"  # Java's default, and librdkafka's
        jaas = self.java.get("sasl.jaas.config", "")
        module, options = "", dict[str, str]()
        if jaas:
            try:
                module, options = _parse_jaas(jaas)
            except _JaasSyntaxError as error:
                self.error("sasl.jaas.config", f"cannot be parsed: {error}", _JAAS_FORMAT)
                return
            if module not in _MODULE_MECHANISMS:
                self.error(
                    "sasl.jaas.config",
                    f"uses login module {module}, which librdkafka cannot emulate",
                    ", ".join(_MODULE_MECHANISMS),
                )
                return
            if mechanism not in _MODULE_MECHANISMS[module]:
                self.error(
                    mechanism_key,
                    f"{mechanism} (Java's default when unset is GSSAPI) does not match "
                    f"the login module {module.rsplit('.', 1)[-1]} in sasl.jaas.config",
                    " or ".join(f"sasl.mechanism={m}" for m in _MODULE_MECHANISMS[module]),
                )
                return
        elif mechanism != "GSSAPI" and not any(key in self.java for key in _NATIVE_CREDENTIALS):
            self.error(
                "sasl.jaas.config", f"not set, so a {mechanism} client has no credentials", _JAAS_FORMAT
            )
            return
        if mechanism == "GSSAPI" and not _gssapi_available():
            self.error(
                mechanism_key,
                "GSSAPI (Kerberos; Java's default when unset), which this librdkafka build does not support",
                ", ".join(_MECHANISMS[1:]),
            )
        if module == _OAUTH_MODULE:
            self._oauthbearer(options)
        elif module in _KRB5_MODULES:
            self._kerberos(options)
        elif module and options.get("tokenauth", "").lower() == "true":
            self.error(
                "sasl.jaas.config",
                "asks for delegation-token login (tokenauth=true), which librdkafka does not support",
            )
        elif module and "username" in options and "password" in options:
            self.put("sasl.username", options["username"], "sasl.jaas.config")
            self.put("sasl.password", options["password"], "sasl.jaas.config")
        elif module:
            self.error("sasl.jaas.config", "needs both a username and a password option", _JAAS_FORMAT)

    def _kerberos(self, options: dict[str, str]) -> None:
        for option, target in (
            ("keyTab", "sasl.kerberos.keytab"),
            ("principal", "sasl.kerberos.principal"),
            ("serviceName", "sasl.kerberos.service.name"),
        ):
            if option in options:
                self.put(target, options[option], "sasl.jaas.config")
        if "keyTab" not in options:
            self.warn(
                "sasl.jaas.config",
                "has no keyTab option, but librdkafka gets Kerberos tickets by running "
                "kinit with sasl.kerberos.keytab; set sasl.kerberos.kinit.cmd to fit your setup",
            )

    def _oauthbearer(self, options: dict[str, str]) -> None:
        url_key = "sasl.oauthbearer.token.endpoint.url"
        url = self.java.get(url_key, "")
        if not url:
            self._unsecured_jwt(options)
        elif url.lower().startswith("file:"):
            self.error(url_key, "a token file, but librdkafka only fetches tokens over HTTP(S)")
        elif not (options.get("clientId") and options.get("clientSecret")):
            self.error(
                "sasl.jaas.config", "needs clientId and clientSecret options for the OIDC login at " + url_key
            )
        else:
            self.put("sasl.oauthbearer.method", "oidc", "sasl.jaas.config")
            self.put("sasl.oauthbearer.client.id", options["clientId"], "sasl.jaas.config")
            self.put("sasl.oauthbearer.client.secret", options["clientSecret"], "sasl.jaas.config")
            if options.get("scope"):
                self.put("sasl.oauthbearer.scope", options["scope"], "sasl.jaas.config")
            extensions = [f"{k[10:]}={v}" for k, v in options.items() if k.startswith("extension_")]
            if extensions:
                self.put("sasl.oauthbearer.extensions", ",".join(extensions), "sasl.jaas.config")

    def _unsecured_jwt(self, options: dict[str, str]) -> None:
        """Java's unsecured-token options (development only) as librdkafka's ``sasl.oauthbearer.config``.

        librdkafka's unsecured tokens carry a principal, a scope and a lifetime; the rarely used Java options
        for other claims or claim names are dropped with a warning.
        """
        principal = options.get(f"{_UNSECURED}StringClaim_sub", "")
        if not principal:
            self.error(
                "sasl.jaas.config",
                f"has neither {_UNSECURED}StringClaim_sub (for an unsecured token) nor "
                "sasl.oauthbearer.token.endpoint.url (for OIDC)",
            )
            return
        scope = options.get(f"{_UNSECURED}ListClaim_scope", "")  # its first character is the delimiter
        parts = [f"principal={principal}"]
        parts += [f"scope={','.join(item for item in scope[1:].split(scope[0]) if item)}"] if scope else []
        parts += [f"lifeSeconds={options[o]}" for o in options if o == f"{_UNSECURED}LifetimeSeconds"]
        for option, value in options.items():
            if option.startswith(f"{_UNSECURED}Extension_"):
                parts.append(f"extension_{option.split('_', 1)[1]}={value}")
            elif option.startswith(_UNSECURED) and option not in _UNSECURED_MAPPED:
                self.warn(
                    "sasl.jaas.config", f"sets {option}, which librdkafka's unsecured tokens lack; dropped"
                )
        if any(char.isspace() for part in parts for char in part):
            self.error(
                "sasl.jaas.config",
                "has an unsecured-token value with whitespace, which librdkafka's space-separated "
                "sasl.oauthbearer.config cannot carry",
            )
            return
        self.put("enable.sasl.oauthbearer.unsecure.jwt", "true", "sasl.jaas.config")
        self.put("sasl.oauthbearer.config", " ".join(parts), "sasl.jaas.config")

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
                self.error(
                    "ssl.keystore.key", "needs ssl.keystore.certificate.chain, and the other way round"
                )
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
        elif store_type == "PKCS12":
            self.put("ssl.keystore.location", location, "ssl.keystore.location")
            if password:
                self.put("ssl.keystore.password", password, "ssl.keystore.password")
            if key_password and key_password != password:
                self.warn(
                    "ssl.key.password",
                    "differs from ssl.keystore.password, but librdkafka opens a PKCS12 "
                    "keystore with ssl.keystore.password only",
                )
        elif store_type == "PEM":  # one file with the private key and the certificate chain
            self.put("ssl.key.location", location, "ssl.keystore.location")
            self.put("ssl.certificate.location", location, "ssl.keystore.location")
            if key_password:
                self.put("ssl.key.password", key_password, "ssl.key.password")
        else:
            stem = location[: -len(".jks")] if location.lower().endswith(".jks") else location
            self.error(
                "ssl.keystore.location",
                f"a {store_type} keystore ({_type_origin(declared)}), but "
                "librdkafka (OpenSSL) reads only PKCS12 and PEM keystores",
                f"convert it with keytool -importkeystore -srckeystore {location} -destkeystore "
                f"{stem}.p12 -deststoretype PKCS12, then set ssl.keystore.type=PKCS12 and "
                f"ssl.keystore.location={stem}.p12 (or use ssl.keystore.type=PEM)",
            )

    def _truststore(self) -> None:
        java = self.java
        location, declared = java.get("ssl.truststore.location", ""), java.get("ssl.truststore.type", "")
        certificates = java.get("ssl.truststore.certificates", "")
        store_type = "PEM" if certificates and not declared else _store_type(declared, location)
        if store_type == "PEM" and java.get("ssl.truststore.password"):
            self.warn("ssl.truststore.password", "not used by a PEM truststore, dropped")
        use_pem = (
            "then set ssl.truststore.type=PEM and ssl.truststore.location=ca.pem (or ssl.ca.location=ca.pem)"
        )
        if certificates:
            if store_type != "PEM" or location:
                self.error(
                    "ssl.truststore.certificates",
                    "inline PEM certificates, which need "
                    "ssl.truststore.type=PEM and no ssl.truststore.location",
                )
            else:
                self.put("ssl.ca.pem", certificates, "ssl.truststore.certificates")
        elif not location:
            return
        elif store_type == "PEM":
            self.put("ssl.ca.location", location, "ssl.truststore.location")
        elif store_type == "PKCS12":
            self.error(
                "ssl.truststore.location",
                f"a PKCS12 truststore ({_type_origin(declared)}), but librdkafka's CA store must be PEM",
                f"extract the certificates with openssl pkcs12 -in {location} -nokeys -out ca.pem, {use_pem}",
            )
        else:
            self.error(
                "ssl.truststore.location",
                f"a {store_type} truststore ({_type_origin(declared)}), which "
                "librdkafka (OpenSSL) cannot read",
                f"export the CA certificates as PEM with keytool -exportcert -rfc -keystore {location} "
                f"-alias ALIAS -file ca.pem (keytool -list -rfc -keystore {location} prints them all), "
                + use_pem,
            )

    def _tls_details(self) -> None:
        key = "ssl.endpoint.identification.algorithm"
        if key in self.java:
            algorithm = self.java[key].lower()
            if algorithm in ("", "https"):
                self.put(key, algorithm or "none", key)
            else:
                self.error(key, "not an algorithm librdkafka knows", '"" (none) or https')
        if self.java.get("ssl.cipher.suites"):
            # OpenSSL takes Java's IANA names, but TLS 1.3 suites cannot be restricted through this list.
            suites = [suite.strip() for suite in self.java["ssl.cipher.suites"].split(",") if suite.strip()]
            kept = [suite for suite in suites if not (suite.startswith("TLS_") and "_WITH_" not in suite)]
            if len(kept) < len(suites):
                self.warn(
                    "ssl.cipher.suites",
                    "lists TLS 1.3 suites, which librdkafka cannot restrict: "
                    "OpenSSL's TLS 1.3 defaults apply",
                )
            if kept:
                self.put("ssl.cipher.suites", ":".join(kept), "ssl.cipher.suites")


def _type_origin(declared: str) -> str:
    return f"type {declared.upper()}" if declared else "no type is set, and Java's default type is JKS"


# --- JAAS -------------------------------------------------------------------------------------------------
class _JaasSyntaxError(ValueError):
    """Why a JAAS string does not parse; never quotes the string, which holds secrets."""


_JAAS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in "._-$" or ord(char) >= 0xA0


def _jaas_tokens(text: str) -> Iterator[tuple[str, str]]:
    """Tokens as Java's ``StreamTokenizer`` makes them in ``JaasConfig``: strings, ``=`` and ``;``.

    ``//`` and ``/* */`` comments are skipped. One leniency: an unquoted value may start with a digit (Java
    would read a number there and reject it).
    """
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
        elif text.startswith("//", position):
            position = text.find("\n", position) % (len(text) + 1)
        elif text.startswith("/*", position):
            if (end := text.find("*/", position + 2)) < 0:
                raise _JaasSyntaxError("a /* comment is not closed")
            position = end + 2
        elif char in "\"'":
            value, position = _jaas_quoted(text, position)
            yield "string", value
        elif char in "=;":
            yield char, char
            position += 1
        elif _is_word_char(char):
            start = position
            while position < len(text) and _is_word_char(text[position]):
                position += 1
            yield "string", text[start:position]
        else:
            raise _JaasSyntaxError(
                f"unexpected character at offset {position}; quote the value that holds it"
            )


def _jaas_quoted(text: str, start: int) -> tuple[str, int]:
    """The unescaped quoted string at ``start`` (escapes as in Java: ``\\n``, octal, ``\\x`` -> ``x``)."""
    quote, chars, position = text[start], [], start + 1
    while position < len(text) and text[position] not in (quote, "\n", "\r"):
        char = text[position]
        if char == "\\" and position + 1 < len(text):
            position += 1
            char = text[position]
            if char in "01234567":
                end = position + 1
                while (
                    end < len(text)
                    and end - position < (3 if char in "0123" else 2)
                    and text[end] in "01234567"
                ):
                    end += 1
                char, position = chr(int(text[position:end], 8)), end - 1
            else:
                char = _JAAS_ESCAPES.get(char, char)
        chars.append(char)
        position += 1
    if position >= len(text) or text[position] != quote:
        raise _JaasSyntaxError(f"the quoted value opened at offset {start} is not closed on its line")
    return "".join(chars), position + 1


def _parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a client JAAS string, which must hold exactly one entry."""
    tokens = list(_jaas_tokens(text))
    entries: list[tuple[str, dict[str, str]]] = []
    position = 0
    while position < len(tokens):
        if [kind for kind, _ in tokens[position : position + 2]] != ["string", "string"]:
            raise _JaasSyntaxError("an entry must start with a login module class and a control flag")
        module, flag = tokens[position][1], tokens[position + 1][1]
        if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
            raise _JaasSyntaxError(
                f"the control flag after {module} must be required, requisite, sufficient or optional"
            )
        position += 2
        options: dict[str, str] = {}
        while position < len(tokens) and tokens[position][0] != ";":
            if [kind for kind, _ in tokens[position : position + 3]] != ["string", "=", "string"]:
                name = tokens[position][1] if tokens[position][0] == "string" else tokens[position][0]
                raise _JaasSyntaxError(f"expected name=value at {name}")
            options[tokens[position][1]] = tokens[position + 2][1]
            position += 3
        if position >= len(tokens):
            raise _JaasSyntaxError("the entry is not terminated by ';'")
        entries.append((module, options))
        position += 1
    if len(entries) != 1:
        raise _JaasSyntaxError(f"it has {len(entries)} login modules; a client takes exactly one")
    return entries[0]

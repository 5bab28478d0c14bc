"""What the Java clients and librdkafka call their settings, and how one maps onto the other.

These tables are facts, not guesses: librdkafka's side comes from the property list of the installed
librdkafka (2.16, ``rd_kafka_conf_properties_show``) and from constructing real clients with every emitted
key; Java's side from Kafka's ``ProducerConfig``, ``ConsumerConfig``, ``AdminClientConfig``, ``SslConfigs``
and ``SaslConfigs``. They live apart from :mod:`mm2py.librdkafka.settings`, which applies them, so that updating
them for a new librdkafka or Kafka release is a data change that leaves the translation rules alone.
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# librdkafka 2.16 properties by scope, without the ones only settable through the C API (callbacks, pointers).
RDKAFKA_CONSUMER = _names("""
    auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs consume.callback.max.messages
    coordinator.query.interval.ms enable.auto.commit enable.auto.offset.store enable.partition.eof
    fetch.error.backoff.ms fetch.max.bytes fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms
    fetch.wait.max.ms group.id group.instance.id group.protocol group.protocol.type group.remote.assignor
    heartbeat.interval.ms isolation.level max.partition.fetch.bytes max.poll.interval.ms max.poll.records
    offset.store.method offset.store.path offset.store.sync.interval.ms partition.assignment.strategy
    queued.max.messages.kbytes queued.min.messages session.timeout.ms share.acknowledgement.mode""")
RDKAFKA_PRODUCER = _names("""
    acks batch.num.messages batch.size compression.codec compression.level compression.type
    delivery.report.only.error delivery.timeout.ms enable.gapless.guarantee enable.idempotence linger.ms
    message.send.max.retries message.timeout.ms partitioner produce.offset.report
    queue.buffering.backpressure.threshold queue.buffering.max.kbytes queue.buffering.max.messages
    queue.buffering.max.ms queuing.strategy request.required.acks request.timeout.ms retries
    sticky.partitioning.linger.ms transaction.timeout.ms transactional.id""")
RDKAFKA_GLOBAL = _names("""
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
RDKAFKA_PROPERTIES = RDKAFKA_CONSUMER | RDKAFKA_PRODUCER | RDKAFKA_GLOBAL
RDKAFKA_BOOLEAN = _names("""
    allow.auto.create.topics api.version.request auto.commit.enable check.crcs delivery.report.only.error
    enable.auto.commit enable.auto.offset.store enable.gapless.guarantee enable.idempotence
    enable.metrics.push enable.partition.eof enable.random.seed enable.sasl.oauthbearer.unsecure.jwt
    enable.ssl.certificate.verification log.connection.close log.queue log.thread.name
    produce.offset.report sasl.oauthbearer.assertion.claim.jti.include socket.keepalive.enable
    socket.nagle.disable topic.metadata.refresh.sparse""")
RDKAFKA_SCOPES = (("consumer", RDKAFKA_CONSUMER), ("producer", RDKAFKA_PRODUCER))
# Java keys for one kind of client whose librdkafka property is common to all (message.max.bytes would change
# how much a consumer fetches).
JAVA_SCOPES = {"max.request.size": "producer"}


# Java keys whose librdkafka property has another name. (Java's metadata.max.age.ms is the forced-refresh
# period, which is librdkafka's topic.metadata.refresh.interval.ms — same meaning, same 300000 default;
# librdkafka's metadata.max.age.ms is a cache lifetime.)
RENAMES = {
    "max.request.size": "message.max.bytes",
    "buffer.memory": "queue.buffering.max.kbytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "metadata.max.age.ms": "topic.metadata.refresh.interval.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
NO_EQUIVALENT = _names("""
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
NO_EQUIVALENT_PREFIXES = ("metrics.", "key.converter", "value.converter", "header.converter")
DROP_REASONS = {
    "max.poll.records": "dropped: librdkafka's consumer has no per-poll record limit (its "
    "max.poll.records is for share consumers only)",
    "sasl.kerberos.kinit.cmd": "dropped: in Java it is the path of kinit, in librdkafka a whole command "
    "line; librdkafka's default command runs kinit with sasl.kerberos.keytab",
}
BUILTIN_CLASSES = {
    "sasl.login.callback.handler.class": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler",
    ),
    "sasl.client.callback.handler.class": (
        "org.apache.kafka.common.security.authenticator.SaslClientCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerSaslClientCallbackHandler",
        "software.amazon.msk.auth.iam.IAMClientCallbackHandler",  # AWS_MSK_IAM: the batch path signs itself
    ),
    "sasl.login.class": (
        "org.apache.kafka.common.security.authenticator.DefaultLogin",
        "org.apache.kafka.common.security.kerberos.KerberosLogin",
        "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerRefreshingLogin",
    ),
    "ssl.engine.factory.class": ("org.apache.kafka.common.security.ssl.DefaultSslEngineFactory",),
    # Kafka 4.1: how a client gets its token; librdkafka's OIDC method is the client-credentials grant.
    "sasl.oauthbearer.jwt.retriever.class": (
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
        "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
    ),
}
ASSIGNORS = {  # Java assignor class -> librdkafka name; StickyAssignor (eager sticky) has none
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
COMPRESSION_LEVELS = {
    "compression.gzip.level": "gzip",
    "compression.lz4.level": "lz4",
    "compression.zstd.level": "zstd",
}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")  # the protocols that connect over TLS
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")  # the protocols that log in
# AWS_MSK_IAM is not librdkafka's: only the batch path's wire client logs in with it (mm2py.wire.msk_iam).
MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")
# The keys a client's ClientSettings is read from (mm2py.config.client_keys): how it reaches and logs in to its
# cluster, in Java's spelling and in librdkafka's. A translation renders these properties from the typed object and
# passes none of these keys on as written.
JAVA_SECURITY_KEYS = _names("""
    security.protocol sasl.mechanism sasl.mechanisms sasl.jaas.config
    sasl.oauthbearer.client.credentials.client.id sasl.oauthbearer.client.credentials.client.secret
    ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password ssl.keystore.key
    ssl.keystore.certificate.chain ssl.truststore.type ssl.truststore.location ssl.truststore.password
    ssl.truststore.certificates ssl.endpoint.identification.algorithm ssl.cipher.suites ssl.enabled.protocols
    ssl.protocol""")
NATIVE_SECURITY_KEYS = _names("""
    sasl.username sasl.password sasl.oauthbearer.method sasl.oauthbearer.client.id sasl.oauthbearer.client.secret
    sasl.oauthbearer.token.endpoint.url sasl.oauthbearer.scope sasl.oauthbearer.extensions sasl.oauthbearer.config
    enable.sasl.oauthbearer.unsecure.jwt sasl.kerberos.principal sasl.kerberos.keytab sasl.kerberos.service.name
    ssl.ca.location ssl.ca.pem ssl.certificate.location ssl.key.location ssl.certificate.pem ssl.key.pem
    ssl.crl.location enable.ssl.certificate.verification""")
SECURITY_KEYS = JAVA_SECURITY_KEYS | NATIVE_SECURITY_KEYS


def counts_under(key: str, protocol: str) -> bool:
    """Whether ``key`` counts under ``security.protocol = protocol``: TLS keys only with SSL or SASL_SSL, login keys
    only with SASL_PLAINTEXT or SASL_SSL, as the Java clients read them (a PLAINTEXT client ignores its ssl.* keys)."""
    if key.startswith(("ssl.", "enable.ssl.")):
        return protocol in TLS_PROTOCOLS
    if key.startswith(("sasl.", "enable.sasl.")):
        return protocol in SASL_PROTOCOLS
    return True

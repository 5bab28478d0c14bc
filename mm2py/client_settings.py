"""How a client reaches and logs in to its cluster, and the timeouts and sizes it works with: typed, and
independent of any client library.

Why: a flow's clients are built by two stacks, librdkafka (the driver, the record path) and the batch path's own
protocol client (:mod:`mm2py.wire`). Both must connect the same way: the same brokers, the same TLS trust and
client certificate, the same SASL login, the same timeouts. So what a cluster's client keys say about connecting is
read once, when the configuration is loaded (:mod:`mm2py.config.client_keys`, from MM2's Java keys), into a
:class:`ClientSettings`; each stack adapts that object to its library in one place
(:mod:`mm2py.librdkafka.security_keys`, :mod:`mm2py.wire.connection_settings`), and choosing a flow's copy path
asks the same object.

Everything here is plain, frozen and picklable: a copy task receives it with its spec. Secrets never show in a
``repr``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mm2py.backoff import RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, ExponentialBackoff

ClientKind = Literal["consumer", "producer", "admin"]


@dataclass(frozen=True)
class KeyIssue:
    """Something a user should know about one client key, found when the file is read: ``error``, the client would
    not work or would work differently than under MM2; ``warning``, the key was dropped. ``value`` is already masked
    when the key is secret."""

    key: str
    value: str
    severity: Literal["error", "warning"]
    reason: str
    allowed: str | None = None


@dataclass(frozen=True)
class SettingProblem:
    """A client key whose value cannot be used to connect; ``value`` is already masked when it is secret."""

    key: str
    value: str
    reason: str
    allowed: str | None = None


@dataclass(frozen=True)
class PasswordLogin:
    """SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with a username and password."""

    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class OidcLogin:
    """OAUTHBEARER with tokens from an OIDC provider, client-credentials grant (KIP-768)."""

    token_endpoint_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""
    extensions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class UnsecuredTokenLogin:
    """OAUTHBEARER with unsigned development tokens (Kafka's ``unsecuredLogin*`` options)."""

    principal: str
    scope: tuple[str, ...] = ()
    life_seconds: int = 3600
    extensions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AwsMskIamLogin:
    """Whose AWS credentials sign an AWS_MSK_IAM login: botocore's default chain, or one ``profile`` of it."""

    profile: str | None = None


@dataclass(frozen=True)
class KerberosLogin:
    """GSSAPI: tickets for ``principal`` from ``keytab`` (or the ticket cache), for brokers of ``service_name``."""

    principal: str | None = None
    keytab: str | None = None
    service_name: str = "kafka"


Login = PasswordLogin | OidcLogin | UnsecuredTokenLogin | AwsMskIamLogin | KerberosLogin


# mm2py's copy producers' linger.ms and batch.size on both paths when the user sets neither (the Java producer's
# are 5 ms and 16 KB): a copy has whole batches to send, and waits a little longer to send fewer, larger ones.
COPY_LINGER_MS = 10
COPY_BATCH_SIZE = 1_000_000
# How long a copy range's Fetch waits on both paths when the user sets no fetch.max.wait.ms (Java's is 500 ms): a
# range stops at its end, and the wait there is the range's own time.
COPY_FETCH_WAIT_MS = 100

# The lowest TLS version a client offers, by the name Java's ssl.enabled.protocols gives it.
MINIMUM_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class TlsSettings:
    """Whom a client trusts, who it is, and how strictly it checks: TLS material as PEM text or file paths.

    ``ca_location``: a file or directory of CA certificates, ``probe`` (or neither location nor PEM) for the
    system's. ``minimum_version``: ``TLSv1.2`` (Java's default, 1.2 and 1.3) or ``TLSv1.3`` when pinned.
    """

    ca_location: str | None = None
    ca_pem: str | None = field(default=None, repr=False)
    certificate_location: str | None = None
    key_location: str | None = None
    certificate_pem: str | None = field(default=None, repr=False)
    key_pem: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    endpoint_identification: str = "https"
    verify_certificates: bool = True
    cipher_suites: str | None = None
    crl_location: str | None = None
    minimum_version: str = "TLSv1.2"

    def load_trust_anchors(self, context: ssl.SSLContext) -> None:
        """The CA certificates ``ca_location`` (a file or a directory; ``probe``: the system's) and ``ca_pem`` name,
        into ``context``, as librdkafka loads them; the system's own when neither names any. Every client that
        checks a broker's certificate in Python loads them here, so all of them trust the same certificates."""
        location = self.ca_location or ""
        if location and location != "probe":
            if Path(location).is_dir():
                context.load_verify_locations(capath=location)
            else:
                context.load_verify_locations(cafile=location)
        if self.ca_pem:
            context.load_verify_locations(cadata=self.ca_pem)
        if (not location and not self.ca_pem) or location == "probe":
            context.load_default_certs()


@dataclass(frozen=True)
class ClientSettings:
    """One client's way to a cluster, and how it works there. Number fields are None where the user set nothing,
    and the client's default applies; the timeouts, sizes and backoffs a client only tunes with are None too when
    they are not whole numbers. ``sasl_mechanism`` is None without SASL; ``login`` is None when the mechanism's
    credentials are missing or unusable (``problems`` says why). ``other_security_keys`` holds the security
    settings (key, masked value) that none of these fields carries: a client that cannot honour them must refuse
    rather than ignore them.
    """

    bootstrap_servers: tuple[str, ...]
    security_protocol: str = "PLAINTEXT"
    client_id: str | None = None
    request_timeout_ms: int | None = None
    retry_backoff_ms: int | None = None
    retry_backoff_max_ms: int | None = None
    reconnect_backoff_ms: int | None = None
    reconnect_backoff_max_ms: int | None = None
    socket_connection_setup_timeout_ms: int | None = None
    connections_max_idle_ms: int | None = None
    client_dns_lookup: str | None = None
    # A producer's: how long a Produce request waits for its answer (the Java producer's request.timeout.ms,
    # librdkafka's producer request.timeout.ms), how long a record may take to be delivered, how long a partition's
    # batch lingers and how large it grows, and the largest batch it sends (message.max.bytes).
    ack_timeout_ms: int | None = None
    delivery_timeout_ms: int | None = None
    linger_ms: int | None = None
    batch_size: int | None = None
    message_max_bytes: int | None = None
    isolation_level: str | None = None  # a consumer's: read_committed or read_uncommitted
    # A consumer's Fetch: the bytes a broker waits for (fetch.min.bytes) and how long at most (fetch.max.wait.ms),
    # the bytes of one answer (fetch.max.bytes) and of one partition in it (max.partition.fetch.bytes).
    fetch_min_bytes: int | None = None
    fetch_max_wait_ms: int | None = None
    fetch_max_bytes: int | None = None
    max_partition_fetch_bytes: int | None = None
    sasl_mechanism: str | None = None
    login: Login | None = None
    tls: TlsSettings | None = None
    other_security_keys: tuple[tuple[str, str], ...] = ()
    problems: tuple[SettingProblem, ...] = ()

    def backoff(self) -> ExponentialBackoff:
        """The client's ``retry.backoff.ms`` and ``retry.backoff.max.ms``, each at Kafka's default when unset."""
        return ExponentialBackoff(
            RETRY_BACKOFF_S if self.retry_backoff_ms is None else self.retry_backoff_ms / 1000,
            RETRY_BACKOFF_MAX_S if self.retry_backoff_max_ms is None else self.retry_backoff_max_ms / 1000,
        )

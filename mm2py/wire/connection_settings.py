"""The librdkafka settings mm2py derives for a cluster, as connection settings for the batch path's wire client.

Why: every client mm2py creates is configured by :mod:`mm2py.librdkafka.settings` (librdkafka keys). The batch
copy path speaks the Kafka protocol through another library (:mod:`mm2py.wire.connection`), and must connect
exactly as the confluent-kafka clients of the same flow would — same brokers, same TLS trust, same SASL
login — or refuse, naming the key, rather than connect differently. So this module maps that one dict and
raises :class:`~mm2py.errors.ConfigError` for every security setting it cannot honour. Settings that only
shape a librdkafka consumer's or producer's behaviour (``group.id``, ``linger.ms``, ``fetch.wait.max.ms``,
``acks``, ...) have no meaning here: the batch copier decides those itself, so they are ignored.

The result is plain data (names the wire library takes), plus an ``ssl.SSLContext`` built here so that
CA directories, inline CA PEM, inline client certificates and keys (what mm2py makes of Java key stores),
cipher lists, CRLs and ``ssl.endpoint.identification.algorithm`` mean what
they mean to librdkafka. OAUTHBEARER tokens come from a :class:`TokenSource` (OIDC client credentials, or
the unsecured development tokens librdkafka can make; :mod:`mm2py.wire.oauth_tokens`); AWS_MSK_IAM is signed
by the library's own mechanism with botocore's credentials (:mod:`mm2py.wire.msk_iam`); the SASL exchange
itself is the library's.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mm2py.errors import ConfigError
from mm2py.librdkafka.tls_diagnosis import load_trust_anchors
from mm2py.librdkafka.tls_versions import MINIMUM, PIN_KEY
from mm2py.secrets import mask_value
from mm2py.wire.oauth_tokens import OidcTokenSource, TokenSource, UnsecuredTokenSource

# IAMLoginModule's awsProfileName, under the name mm2py.librdkafka.jaas.AWS_PROFILE_SETTING gives it (this
# package does not import the librdkafka one).
AWS_PROFILE_SETTING = "sasl.aws.msk.iam.profile"
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")
# Security keys this module reads; any other ssl./sasl. key is refused (it would change how we connect).
_HANDLED = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
        AWS_PROFILE_SETTING,
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.cipher.suites",
        "ssl.crl.location",
        "enable.ssl.certificate.verification",
        "request.timeout.ms",
        "socket.timeout.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "client.dns.lookup",
    }
)
_SECURITY_PREFIXES = ("ssl.", "sasl.", "enable.ssl.", "enable.sasl.", "ssl_")
_NUMBERS = {
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
}


@dataclass(frozen=True)
class AwsMskIamLogin:
    """Whose AWS credentials sign an AWS_MSK_IAM login: botocore's default chain, or one ``profile`` of it."""

    profile: str | None = None


def wire_config(alias: str, settings: Mapping[str, str], source: str | None = None) -> dict[str, Any]:
    """Connection settings (the wire library's names) for a cluster configured by librdkafka ``settings``.

    Raises ConfigError naming the key for anything that would make this client connect differently from
    mm2py's librdkafka clients of the same cluster. ``source`` names the file in such errors.
    """

    def refuse(key: str, reason: str, allowed: str | None = None) -> ConfigError:
        return ConfigError(
            f"{alias}: {reason}",
            source=source,
            key=key,
            value=mask_value(key, str(settings.get(key, ""))),
            allowed=allowed,
        )

    for key in settings:
        if key.startswith(_SECURITY_PREFIXES) and key not in _HANDLED:
            raise refuse(
                key,
                "the batch copy path cannot honour this security setting",
                "use the record copy path for this cluster",
            )
    servers = [s.strip() for s in str(settings.get("bootstrap.servers", "")).split(",") if s.strip()]
    if not servers:
        raise refuse("bootstrap.servers", "no bootstrap servers")
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise refuse("security.protocol", "not a security protocol", ", ".join(_PROTOCOLS))
    config: dict[str, Any] = {
        "bootstrap_servers": servers,
        "security_protocol": protocol,
        "client_id": str(settings.get("client.id", "mm2py-batch")),
    }
    timeout = settings.get("socket.timeout.ms") or settings.get("request.timeout.ms")
    if timeout is not None:
        config["request_timeout_ms"] = _number(
            refuse, "socket.timeout.ms" if "socket.timeout.ms" in settings else "request.timeout.ms", str(timeout)
        )
    for key, name in _NUMBERS.items():
        if key in settings:
            config[name] = _number(refuse, key, str(settings[key]))
    if "client.dns.lookup" in settings:
        config["client_dns_lookup"] = str(settings["client.dns.lookup"])
    if protocol.startswith("SASL_"):
        config.update(_sasl(settings, refuse))
    if protocol.endswith("SSL"):
        config["ssl_context"] = _ssl_context(settings, refuse)
        config["ssl_check_hostname"] = config["ssl_context"].check_hostname
    return config


def _number(refuse: Any, key: str, value: str) -> int:
    if not value.strip().isdigit():
        raise refuse(key, "not a whole number of milliseconds")
    return int(value)


def _sasl(settings: Mapping[str, str], refuse: Any) -> dict[str, Any]:
    key = "sasl.mechanisms" if "sasl.mechanisms" in settings else "sasl.mechanism"
    mechanism = str(settings.get(key, "GSSAPI"))
    if mechanism not in _MECHANISMS:
        raise refuse(
            key,
            f"SASL mechanism {mechanism} is not supported by the batch copy path "
            "(for GSSAPI, mm2py does not hand a Kerberos login to its client)",
            ", ".join(_MECHANISMS),
        )
    if mechanism == "AWS_MSK_IAM":
        return _aws_msk_iam(settings, refuse)
    if mechanism != "OAUTHBEARER":
        if "sasl.username" not in settings or "sasl.password" not in settings:
            raise refuse("sasl.username", f"{mechanism} needs sasl.username and sasl.password")
        return {
            "sasl_mechanism": mechanism,
            "sasl_plain_username": str(settings["sasl.username"]),
            "sasl_plain_password": str(settings["sasl.password"]),
        }
    extensions = dict(
        item.split("=", 1) for item in str(settings.get("sasl.oauthbearer.extensions", "")).split(",") if "=" in item
    )
    source: TokenSource
    if str(settings.get("sasl.oauthbearer.method", "default")).lower() == "oidc":
        missing = [
            k
            for k in (
                "sasl.oauthbearer.token.endpoint.url",
                "sasl.oauthbearer.client.id",
                "sasl.oauthbearer.client.secret",
            )
            if not settings.get(k)
        ]
        if missing:
            raise refuse(missing[0], "OIDC login needs a token endpoint, client id and client secret")
        source = OidcTokenSource(
            str(settings["sasl.oauthbearer.token.endpoint.url"]),
            str(settings["sasl.oauthbearer.client.id"]),
            str(settings["sasl.oauthbearer.client.secret"]),
            str(settings.get("sasl.oauthbearer.scope", "")),
            extensions,
        )
    elif str(settings.get("enable.sasl.oauthbearer.unsecure.jwt", "false")).lower() == "true":
        source = _unsecured(str(settings.get("sasl.oauthbearer.config", "")), refuse)
    else:
        raise refuse(
            "sasl.oauthbearer.method",
            "OAUTHBEARER needs sasl.oauthbearer.method=oidc or enable.sasl.oauthbearer.unsecure.jwt=true",
        )
    return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_source": source}


def _aws_msk_iam(settings: Mapping[str, str], refuse: Any) -> dict[str, Any]:
    if str(settings.get("security.protocol", "")).upper() != "SASL_SSL":
        raise refuse("security.protocol", "AWS_MSK_IAM logs in over TLS only", "SASL_SSL")
    if importlib.util.find_spec("botocore") is None:
        raise refuse(
            "sasl.mechanism", "AWS_MSK_IAM signs with botocore, which is not installed", "pip install mm2py[aws]"
        )
    profile = str(settings.get(AWS_PROFILE_SETTING) or "") or None
    return {"sasl_mechanism": "AWS_MSK_IAM", "sasl_aws_msk_iam_login": AwsMskIamLogin(profile)}


def _unsecured(config: str, refuse: Any) -> UnsecuredTokenSource:
    options = dict(item.split("=", 1) for item in config.split() if "=" in item)
    if not options.get("principal"):
        raise refuse("sasl.oauthbearer.config", "an unsecured token needs principal=NAME")
    life = options.get("lifeSeconds", "3600")
    if not life.isdigit():
        raise refuse("sasl.oauthbearer.config", "lifeSeconds is not a whole number")
    extra = {k[len("extension_") :]: v for k, v in options.items() if k.startswith("extension_")}
    scope = [s for s in options.get("scope", "").split(",") if s]
    return UnsecuredTokenSource(options["principal"], scope, int(life), extra)


def _ssl_context(settings: Mapping[str, str], refuse: Any) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM[str(settings.get(PIN_KEY) or "TLSv1.2")]  # Java's default: 1.2 and 1.3
    algorithm = str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower()
    if algorithm not in ("https", "none"):
        raise refuse("ssl.endpoint.identification.algorithm", "not an algorithm librdkafka knows", "https, none")
    verify = str(settings.get("enable.ssl.certificate.verification", "true")).lower() != "false"
    context.check_hostname = verify and algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    try:
        load_trust_anchors(context, settings)
    except (OSError, ssl.SSLError) as exc:
        raise refuse("ssl.ca.location", f"the CA certificates cannot be read: {exc}") from None
    if settings.get("ssl.certificate.pem") or settings.get("ssl.key.pem"):
        if not (settings.get("ssl.certificate.pem") and settings.get("ssl.key.pem")):
            raise refuse("ssl.key.pem", "an inline client key needs ssl.certificate.pem too, and the other way round")
        try:
            _load_inline_cert_chain(
                context,
                str(settings["ssl.certificate.pem"]),
                str(settings["ssl.key.pem"]),
                str(settings.get("ssl.key.password") or "") or None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise refuse("ssl.key.pem", f"the client certificate or key cannot be used: {type(exc).__name__}") from None
    elif settings.get("ssl.certificate.location"):
        try:
            context.load_cert_chain(
                str(settings["ssl.certificate.location"]),
                str(settings.get("ssl.key.location") or "") or None,
                str(settings.get("ssl.key.password") or "") or None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise refuse(
                "ssl.certificate.location", f"the client certificate or key cannot be read: {type(exc).__name__}"
            ) from None
    elif settings.get("ssl.key.location"):
        raise refuse("ssl.key.location", "a client key needs ssl.certificate.location too")
    if settings.get("ssl.crl.location"):
        try:
            context.load_verify_locations(cafile=str(settings["ssl.crl.location"]))
        except (OSError, ssl.SSLError) as exc:
            raise refuse("ssl.crl.location", f"the CRL cannot be read: {exc}") from None
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if settings.get("ssl.cipher.suites"):
        try:
            context.set_ciphers(str(settings["ssl.cipher.suites"]))
        except ssl.SSLError:
            raise refuse("ssl.cipher.suites", "OpenSSL knows none of these cipher suites") from None
    return context


def _load_inline_cert_chain(context: ssl.SSLContext, chain_pem: str, key_pem: str, password: str | None) -> None:
    """Load PEM text into ``context``; Python's ssl module reads client certificates only from files.

    On Linux the file is an anonymous in-memory one (memfd), so the key never touches a disk. Elsewhere it is
    a 0600 temporary file holding the key re-encrypted under a one-off password, removed right after loading.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("mm2py-client-certificate", os.MFD_CLOEXEC)
        try:
            os.write(fd, (chain_pem + "\n" + key_pem).encode())
            context.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
        finally:
            os.close(fd)
        return
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        load_pem_private_key,
    )

    one_off = secrets.token_bytes(32)
    key = load_pem_private_key(key_pem.encode(), password.encode() if password else None)
    sealed = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_off))
    fd, path = tempfile.mkstemp(prefix="mm2py-", suffix=".pem")  # mode 0600
    try:
        os.write(fd, chain_pem.encode() + b"\n" + sealed)
        os.close(fd)
        context.load_cert_chain(path, password=one_off)
    finally:
        os.unlink(path)

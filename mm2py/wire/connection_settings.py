"""A cluster's :class:`~mm2py.client_settings.ClientSettings` as the batch path's wire client takes them.

Why: the batch copy path speaks the Kafka protocol through another library (:mod:`mm2py.wire.connection`) than the
driver and the record path (librdkafka), and must connect exactly as they do — same brokers, same TLS trust, same
SASL login — or refuse, naming the key, rather than connect differently. Both read one typed object, built when the
configuration is loaded; this module is the one place that adapts it to the wire library, and raises
:class:`~mm2py.errors.ConfigError` for everything it cannot honour. Choosing a flow's copy path asks the same
question (:func:`refusal`).

The result is plain data (names the wire library takes), plus an ``ssl.SSLContext`` built here so that CA
directories, inline CA PEM, inline client certificates and keys (what mm2py makes of Java key stores), cipher
lists, CRLs and the hostname check mean what they mean to librdkafka. OAUTHBEARER tokens come from a
:class:`TokenSource` (OIDC client credentials, or unsecured development tokens; :mod:`mm2py.wire.oauth_tokens`);
AWS_MSK_IAM is signed by the library's own mechanism with botocore's credentials (:mod:`mm2py.wire.msk_iam`); the
SASL exchange itself is the library's.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import ssl
import tempfile
from typing import Any

from mm2py.client_settings import (
    MINIMUM_VERSIONS,
    AwsMskIamLogin,
    ClientSettings,
    KerberosLogin,
    OidcLogin,
    PasswordLogin,
    TlsSettings,
    UnsecuredTokenLogin,
)
from mm2py.errors import ConfigError
from mm2py.wire.oauth_tokens import OidcTokenSource, TokenSource, UnsecuredTokenSource

_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MILLISECONDS = (
    "request_timeout_ms",
    "reconnect_backoff_ms",
    "reconnect_backoff_max_ms",
    "socket_connection_setup_timeout_ms",
    "connections_max_idle_ms",
)


def refusal(alias: str, settings: ClientSettings, source: str | None = None) -> ConfigError | None:
    """Why the wire client cannot connect to ``alias`` as ``settings`` ask (TLS material that cannot be read
    included), or None."""
    try:
        wire_config(alias, settings, source)
    except ConfigError as exc:
        return exc
    return None


def wire_config(alias: str, settings: ClientSettings, source: str | None = None) -> dict[str, Any]:
    """Connection settings (the wire library's names) for ``alias``; raises ConfigError naming the key for anything
    that would make this client connect differently from mm2py's librdkafka clients of the same cluster (``source``
    names the file in such errors)."""
    _check(alias, settings, source)
    config: dict[str, Any] = {
        "bootstrap_servers": list(settings.bootstrap_servers),
        "security_protocol": settings.security_protocol,
        "client_id": settings.client_id or "mm2py-batch",
    }
    for name in _MILLISECONDS:
        value = getattr(settings, name)
        if value is not None:
            config[name] = value
    if settings.client_dns_lookup is not None:
        config["client_dns_lookup"] = settings.client_dns_lookup
    if settings.sasl_mechanism is not None:
        config["sasl_mechanism"] = settings.sasl_mechanism
        config.update(_login(settings))
    if settings.tls is not None:
        config["ssl_context"] = _ssl_context(alias, settings.tls, source)
        config["ssl_check_hostname"] = config["ssl_context"].check_hostname
    return config


def _refuse(alias: str, key: str, value: str, reason: str, allowed: str | None, source: str | None) -> ConfigError:
    return ConfigError(f"{alias}: {reason}", source=source, key=key, value=value, allowed=allowed)


def _check(alias: str, settings: ClientSettings, source: str | None) -> None:
    if settings.other_security_keys:
        key, value = settings.other_security_keys[0]
        raise _refuse(
            alias,
            key,
            value,
            "the batch copy path cannot honour this security setting",
            "use the record copy path for this cluster",
            source,
        )
    if settings.problems:
        problem = settings.problems[0]
        raise _refuse(alias, problem.key, problem.value, problem.reason, problem.allowed, source)
    if settings.security_protocol not in _PROTOCOLS:
        raise _refuse(
            alias,
            "security.protocol",
            settings.security_protocol,
            "not a security protocol",
            ", ".join(_PROTOCOLS),
            source,
        )
    mechanism = settings.sasl_mechanism
    if mechanism is not None and (mechanism not in _MECHANISMS or isinstance(settings.login, KerberosLogin)):
        raise _refuse(
            alias,
            "sasl.mechanism",
            mechanism,
            f"SASL mechanism {mechanism} is not supported by the batch copy path "
            "(for GSSAPI, mm2py does not hand a Kerberos login to its client)",
            ", ".join(_MECHANISMS),
            source,
        )
    if isinstance(settings.login, AwsMskIamLogin):
        if settings.security_protocol != "SASL_SSL":
            raise _refuse(
                alias,
                "security.protocol",
                settings.security_protocol,
                "AWS_MSK_IAM logs in over TLS only",
                "SASL_SSL",
                source,
            )
        if importlib.util.find_spec("botocore") is None:
            raise _refuse(
                alias,
                "sasl.mechanism",
                mechanism or "",
                "AWS_MSK_IAM signs with botocore, which is not installed",
                "pip install mm2py[aws]",
                source,
            )


def _login(settings: ClientSettings) -> dict[str, Any]:
    login = settings.login
    if isinstance(login, PasswordLogin):
        return {"sasl_plain_username": login.username, "sasl_plain_password": login.password}
    if isinstance(login, AwsMskIamLogin):
        return {"sasl_aws_msk_iam_login": login}
    token_source: TokenSource
    if isinstance(login, OidcLogin):
        token_source = OidcTokenSource(
            login.token_endpoint_url, login.client_id, login.client_secret, login.scope, dict(login.extensions)
        )
    elif isinstance(login, UnsecuredTokenLogin):
        token_source = UnsecuredTokenSource(
            login.principal, list(login.scope), login.life_seconds, dict(login.extensions)
        )
    else:  # _check refused every other login
        raise AssertionError(f"no wire login for {type(login).__name__}")
    return {"sasl_oauth_token_source": token_source}


def _ssl_context(alias: str, tls: TlsSettings, source: str | None) -> ssl.SSLContext:
    def refuse(key: str, reason: str, value: str | None = None) -> ConfigError:
        return _refuse(alias, key, value or "", reason, None, source)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM_VERSIONS[tls.minimum_version]  # Java's default: 1.2 and 1.3
    context.check_hostname = tls.verify_certificates and tls.endpoint_identification == "https"
    context.verify_mode = ssl.CERT_REQUIRED if tls.verify_certificates else ssl.CERT_NONE
    try:
        tls.load_trust_anchors(context)
    except (OSError, ssl.SSLError) as exc:
        raise refuse("ssl.ca.location", f"the CA certificates cannot be read: {exc}", tls.ca_location) from None
    if tls.certificate_pem and tls.key_pem:
        try:
            _load_inline_cert_chain(context, tls.certificate_pem, tls.key_pem, tls.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise refuse("ssl.key.pem", f"the client certificate or key cannot be used: {type(exc).__name__}") from None
    elif tls.certificate_location:
        try:
            context.load_cert_chain(tls.certificate_location, tls.key_location, tls.key_password)
        except (OSError, ssl.SSLError) as exc:
            reason = f"the client certificate or key cannot be read: {type(exc).__name__}"
            raise refuse("ssl.certificate.location", reason, tls.certificate_location) from None
    if tls.crl_location:
        try:
            context.load_verify_locations(cafile=tls.crl_location)
        except (OSError, ssl.SSLError) as exc:
            raise refuse("ssl.crl.location", f"the CRL cannot be read: {exc}", tls.crl_location) from None
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if tls.cipher_suites:
        try:
            context.set_ciphers(tls.cipher_suites)
        except ssl.SSLError:
            raise refuse("ssl.cipher.suites", "OpenSSL knows none of these cipher suites", tls.cipher_suites) from None
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

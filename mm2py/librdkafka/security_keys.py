"""How a client reaches and logs in to its cluster, as librdkafka properties: the typed settings rendered.

Why from the typed object and not from the Java keys: the keys are read once, when the file is loaded
(:mod:`mm2py.config.client_keys`), and the batch path's client connects from the same object, so both stacks trust
the same certificates and log in the same way.
"""

from __future__ import annotations

from mm2py.client_settings import (
    ClientSettings,
    KerberosLogin,
    Login,
    OidcLogin,
    PasswordLogin,
    TlsSettings,
    UnsecuredTokenLogin,
)
from mm2py.librdkafka.key_tables import PROTOCOLS
from mm2py.librdkafka.tls_versions import PIN_KEY

_DEFAULT_TOKEN_LIFE_S = 3600  # librdkafka's unsecured tokens, as Java's


def security_properties(settings: ClientSettings) -> dict[str, str]:
    """The librdkafka properties of ``settings``' protocol, login and TLS material."""
    out: dict[str, str] = {}
    protocol = settings.security_protocol
    if protocol != "PLAINTEXT" and protocol in PROTOCOLS:  # librdkafka's default
        out["security.protocol"] = protocol
    if settings.sasl_mechanism is not None:
        out["sasl.mechanism"] = settings.sasl_mechanism
        if settings.login is not None:
            out.update(_login(settings.login))
    if settings.tls is not None:
        out.update(_tls(settings.tls))
    return out


def _login(login: Login) -> dict[str, str]:
    if isinstance(login, PasswordLogin):
        return {"sasl.username": login.username, "sasl.password": login.password}
    if isinstance(login, OidcLogin):
        out = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": login.token_endpoint_url,
            "sasl.oauthbearer.client.id": login.client_id,
            "sasl.oauthbearer.client.secret": login.client_secret,
        }
        if login.scope:
            out["sasl.oauthbearer.scope"] = login.scope
        if login.extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in login.extensions)
        return out
    if isinstance(login, UnsecuredTokenLogin):
        parts = [f"principal={login.principal}"]
        parts += [f"scope={','.join(login.scope)}"] if login.scope else []
        parts += [f"lifeSeconds={login.life_seconds}"] if login.life_seconds != _DEFAULT_TOKEN_LIFE_S else []
        parts += [f"extension_{k}={v}" for k, v in login.extensions]
        return {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": " ".join(parts)}
    if isinstance(login, KerberosLogin):
        out = {}
        if login.principal is not None:
            out["sasl.kerberos.principal"] = login.principal
        if login.keytab is not None:
            out["sasl.kerberos.keytab"] = login.keytab
        out["sasl.kerberos.service.name"] = login.service_name
        return out
    return {}  # AWS_MSK_IAM: librdkafka has no such login (the driver refuses such a cluster)


def _tls(tls: TlsSettings) -> dict[str, str]:
    values = {
        "ssl.ca.location": tls.ca_location,
        "ssl.ca.pem": tls.ca_pem,
        "ssl.certificate.location": tls.certificate_location,
        "ssl.key.location": tls.key_location,
        "ssl.certificate.pem": tls.certificate_pem,
        "ssl.key.pem": tls.key_pem,
        "ssl.key.password": tls.key_password,
        "ssl.cipher.suites": tls.cipher_suites,
        "ssl.crl.location": tls.crl_location,
    }
    out = {key: value for key, value in values.items() if value is not None}
    if tls.endpoint_identification != "https":  # librdkafka's default since 2.0, as Java's
        out["ssl.endpoint.identification.algorithm"] = tls.endpoint_identification
    if not tls.verify_certificates:
        out["enable.ssl.certificate.verification"] = "false"
    if tls.minimum_version != "TLSv1.2":
        out[PIN_KEY] = tls.minimum_version
    return out

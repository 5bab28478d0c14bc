"""A SASL client's login: ``sasl.mechanism`` checked against the JAAS login module, the module's options read
into what they set, and the typed :data:`~mm2py.client_settings.Login` made from that.

Why one module for all mechanisms: which options a module takes, which keys may stand in for them (Kafka 4.1's
OIDC client keys, librdkafka's ``sasl.username``) and which combinations cannot log in are one set of rules; the
batch path's client and librdkafka both log in with the typed login read here.
"""

from __future__ import annotations

from mm2py.client_settings import (
    AwsMskIamLogin,
    KerberosLogin,
    Login,
    OidcLogin,
    PasswordLogin,
    UnsecuredTokenLogin,
)
from mm2py.config.client_keys.jaas import (
    IAM_MODULE,
    JAAS_FORMAT,
    KRB5_MODULES,
    MODULE_MECHANISMS,
    OAUTH_MODULE,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    JaasSyntaxError,
    parse_jaas,
)
from mm2py.config.client_keys.key_reading import KeyReading
from mm2py.librdkafka.gssapi import NO_GSSAPI_INSTEAD, gssapi_available, no_gssapi_reason
from mm2py.librdkafka.key_tables import MECHANISMS

# Where IAMLoginModule's awsProfileName is kept while reading: the batch path's login reads it, librdkafka has none.
AWS_PROFILE_SETTING = "sasl.aws.msk.iam.profile"
_UNSECURED = "unsecuredLogin"
_UNSECURED_MAPPED = tuple(f"{_UNSECURED}{o}" for o in ("StringClaim_sub", "ListClaim_scope", "LifetimeSeconds"))
_NATIVE_CREDENTIALS = ("sasl.username", "sasl.oauthbearer.method", "sasl.oauthbearer.config")
_OIDC_KEYS = ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret")


def read_sasl(reading: KeyReading) -> None:
    """Check ``sasl.mechanism`` against the JAAS login module, then read the module's options."""
    java = reading.java
    mechanism_key = "sasl.mechanisms" if "sasl.mechanisms" in java else "sasl.mechanism"
    mechanism = java.get(mechanism_key, "")
    if mechanism and mechanism not in MECHANISMS:
        reason = "not a SASL mechanism librdkafka supports (names are case-sensitive)"
        reading.error(mechanism_key, reason, ", ".join(MECHANISMS))
        return
    if mechanism:
        reading.put("sasl.mechanism", mechanism, mechanism_key)
    mechanism = mechanism or "GSSAPI"  # Java's default, and librdkafka's
    jaas = java.get("sasl.jaas.config", "")
    try:
        module, options = parse_jaas(jaas) if jaas else ("", {})
    except JaasSyntaxError as error:
        reading.error("sasl.jaas.config", f"cannot be parsed: {error}", JAAS_FORMAT)
        return
    if module and module not in MODULE_MECHANISMS:
        reason = f"uses login module {module}, which librdkafka cannot emulate"
        reading.error("sasl.jaas.config", reason, ", ".join(MODULE_MECHANISMS))
    elif module and mechanism not in MODULE_MECHANISMS[module]:
        reason = (
            f"{mechanism} (Java's default when unset is GSSAPI) does not match the login module "
            f"{module.rsplit('.', 1)[-1]} in sasl.jaas.config"
        )
        reading.error(mechanism_key, reason, " or ".join(f"sasl.mechanism={m}" for m in MODULE_MECHANISMS[module]))
    elif not module and mechanism != "GSSAPI" and not any(key in java for key in _NATIVE_CREDENTIALS):
        reading.error("sasl.jaas.config", f"not set, so a {mechanism} client has no credentials", JAAS_FORMAT)
    else:
        if mechanism == "GSSAPI" and not gssapi_available():
            reading.error(mechanism_key, no_gssapi_reason(), NO_GSSAPI_INSTEAD)
        if module:
            read_login_module(reading, module, options)


def read_login_module(reading: KeyReading, module: str, options: dict[str, str]) -> None:
    """Read what the options of login ``module`` set, or report why they cannot carry over."""
    if module == OAUTH_MODULE:
        _oauthbearer(reading, options)
    elif module in KRB5_MODULES:
        _kerberos(reading, options)
    elif module == IAM_MODULE:
        _aws_msk_iam(reading, options)
    elif options.get("tokenauth", "").lower() == "true":
        reason = "asks for delegation-token login (tokenauth=true), which librdkafka does not support"
        reading.error("sasl.jaas.config", reason)
    elif "username" in options and "password" in options:
        reading.put("sasl.username", options["username"], "sasl.jaas.config")
        reading.put("sasl.password", options["password"], "sasl.jaas.config")
    else:
        reading.error("sasl.jaas.config", "needs both a username and a password option", JAAS_FORMAT)


def _aws_msk_iam(reading: KeyReading, options: dict[str, str]) -> None:
    """aws-msk-iam-auth's options as what kafka-python's AWS_MSK_IAM login can take: at most a profile name.

    That login signs with what botocore's default credential chain finds (environment, shared files, container
    or instance role); a profile picks an entry of the shared files. It cannot assume a role itself, but
    botocore assumes the role of a profile that names one, so a role ARN is refused with that way out.
    """
    if options.get("awsRoleArn"):
        reading.error(
            "sasl.jaas.config",
            "sets awsRoleArn, but the batch path's AWS_MSK_IAM login (kafka-python) cannot assume a role",
            "awsProfileName naming an AWS profile with role_arn and source_profile (botocore assumes that role)",
        )
        return
    if options.get("awsProfileName"):
        reading.put(AWS_PROFILE_SETTING, options["awsProfileName"], "sasl.jaas.config")
    for option in sorted(set(options) - {"awsProfileName"}):
        reading.warn("sasl.jaas.config", f"sets {option}, which kafka-python's AWS_MSK_IAM login lacks; dropped")


def _kerberos(reading: KeyReading, options: dict[str, str]) -> None:
    for option, target in (
        ("keyTab", "sasl.kerberos.keytab"),
        ("principal", "sasl.kerberos.principal"),
        ("serviceName", "sasl.kerberos.service.name"),
    ):
        if option in options:
            reading.put(target, options[option], "sasl.jaas.config")
    if "keyTab" not in options:
        reading.warn(
            "sasl.jaas.config",
            "has no keyTab option, but librdkafka gets Kerberos tickets by running "
            "kinit with sasl.kerberos.keytab; set sasl.kerberos.kinit.cmd to fit your setup",
        )


def _oauthbearer(reading: KeyReading, options: dict[str, str]) -> None:
    url_key = "sasl.oauthbearer.token.endpoint.url"
    url = reading.java.get(url_key, "")
    if not url:
        _unsecured_jwt(reading, options)
    elif url.lower().startswith("file:"):
        reading.error(url_key, "a token file, but librdkafka only fetches tokens over HTTP(S)")
    else:
        # Kafka 4.1 (KIP-1139) moved the client credentials out of the JAAS options into client keys.
        client_id = options.get("clientId") or reading.java.get(OIDC_CLIENT_ID, "")
        client_secret = options.get("clientSecret") or reading.java.get(OIDC_CLIENT_SECRET, "")
        if not (client_id and client_secret):
            reading.error(
                "sasl.jaas.config",
                f"needs clientId and clientSecret options (or {OIDC_CLIENT_ID} and {OIDC_CLIENT_SECRET}) for the "
                f"OIDC login at {url_key}",
            )
            return
        reading.put("sasl.oauthbearer.method", "oidc", "sasl.jaas.config")
        reading.put("sasl.oauthbearer.client.id", client_id, "sasl.jaas.config")
        reading.put("sasl.oauthbearer.client.secret", client_secret, "sasl.jaas.config")
        if options.get("scope"):
            reading.put("sasl.oauthbearer.scope", options["scope"], "sasl.jaas.config")
        extensions = [f"{k[10:]}={v}" for k, v in options.items() if k.startswith("extension_")]
        if extensions:
            reading.put("sasl.oauthbearer.extensions", ",".join(extensions), "sasl.jaas.config")


def _unsecured_jwt(reading: KeyReading, options: dict[str, str]) -> None:
    """Java's unsecured-token options (development only) as librdkafka's ``sasl.oauthbearer.config``.

    librdkafka's unsecured tokens carry a principal, a scope and a lifetime; the rarely used Java options
    for other claims or claim names are dropped with a warning.
    """
    principal = options.get(f"{_UNSECURED}StringClaim_sub", "")
    if not principal:
        reading.error(
            "sasl.jaas.config",
            f"has neither {_UNSECURED}StringClaim_sub (for an unsecured token) nor "
            "sasl.oauthbearer.token.endpoint.url (for OIDC)",
        )
        return
    scope = options.get(f"{_UNSECURED}ListClaim_scope", "")  # its first character is the delimiter
    parts = [f"principal={principal}"]
    parts += [f"scope={','.join(item for item in scope[1:].split(scope[0]) if item)}"] if scope else []
    lifetime = options.get(f"{_UNSECURED}LifetimeSeconds", "")
    parts += [f"lifeSeconds={lifetime}"] if lifetime else []
    for option, value in options.items():
        if option.startswith(f"{_UNSECURED}Extension_"):
            parts.append(f"extension_{option.split('_', 1)[1]}={value}")
        elif option.startswith(_UNSECURED) and option not in _UNSECURED_MAPPED:
            reading.warn("sasl.jaas.config", f"sets {option}, which librdkafka's unsecured tokens lack; dropped")
    if any(char.isspace() for part in parts for char in part):
        reading.error(
            "sasl.jaas.config",
            "has an unsecured-token value with whitespace, which librdkafka's space-separated "
            "sasl.oauthbearer.config cannot carry",
        )
        return
    reading.put("enable.sasl.oauthbearer.unsecure.jwt", "true", "sasl.jaas.config")
    reading.put("sasl.oauthbearer.config", " ".join(parts), "sasl.jaas.config")


def typed_login(reading: KeyReading, mechanism: str) -> Login | None:
    """The login that what was read makes for ``mechanism``; None, with a problem, when it cannot log in."""
    get = reading.get
    if mechanism == "GSSAPI":
        return KerberosLogin(
            get("sasl.kerberos.principal"), get("sasl.kerberos.keytab"), get("sasl.kerberos.service.name") or "kafka"
        )
    if mechanism == "AWS_MSK_IAM":
        return AwsMskIamLogin(get(AWS_PROFILE_SETTING) or None)
    if mechanism != "OAUTHBEARER":
        username, password = get("sasl.username"), get("sasl.password")
        if username is None or password is None:
            reading.problem("sasl.username", f"{mechanism} needs sasl.username and sasl.password")
            return None
        return PasswordLogin(mechanism, username, password)
    extensions = tuple(
        (name, value)
        for name, sep, value in (item.partition("=") for item in (get("sasl.oauthbearer.extensions") or "").split(","))
        if sep
    )
    if (get("sasl.oauthbearer.method") or "default").lower() == "oidc":
        url, client_id, secret = (get(key) for key in _OIDC_KEYS)
        if not (url and client_id and secret):
            missing = next(key for key in _OIDC_KEYS if not get(key))
            reading.problem(missing, "OIDC login needs a token endpoint, client id and client secret")
            return None
        return OidcLogin(url, client_id, secret, get("sasl.oauthbearer.scope") or "", extensions)
    if (get("enable.sasl.oauthbearer.unsecure.jwt") or "false").lower() == "true":
        return _unsecured_login(reading)
    reading.problem(
        "sasl.oauthbearer.method",
        "OAUTHBEARER needs sasl.oauthbearer.method=oidc or enable.sasl.oauthbearer.unsecure.jwt=true",
    )
    return None


def _unsecured_login(reading: KeyReading) -> UnsecuredTokenLogin | None:
    config = reading.get("sasl.oauthbearer.config") or ""
    options = dict(item.split("=", 1) for item in config.split() if "=" in item)
    if not options.get("principal"):
        reading.problem("sasl.oauthbearer.config", "an unsecured token needs principal=NAME")
        return None
    life = options.get("lifeSeconds", "3600")
    if not life.isdigit():
        reading.problem("sasl.oauthbearer.config", "lifeSeconds is not a whole number")
        return None
    extensions = tuple((k[len("extension_") :], v) for k, v in options.items() if k.startswith("extension_"))
    scope = tuple(s for s in options.get("scope", "").split(",") if s)
    return UnsecuredTokenLogin(options["principal"], scope, int(life), extensions)

"""Kafka's ``sasl.jaas.config``: read the way Java's ``JaasConfig`` reads it, and carried over to librdkafka.

librdkafka has no JAAS: what a login module's options mean (a username and password, a keytab, an OIDC client)
must become librdkafka properties. :func:`parse_jaas` is strict where Java is strict (one entry, a control
flag, ``name=value`` options, ``;`` at the end), so a string MM2 rejects is rejected here too, and its errors
never quote the string: it holds passwords. :func:`translate_login_module` then writes the options into the
settings translation of :mod:`mm2py.librdkafka.settings` (seen here only as a :class:`SettingsSink`), so its rules
for conflicting keys and client kinds apply to them as to every other key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Protocol

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"  # aws-msk-iam-auth, for AWS_MSK_IAM
# mm2py's own setting for IAMLoginModule's awsProfileName: read by the batch path, never given to librdkafka.
AWS_PROFILE_SETTING = "sasl.aws.msk.iam.profile"
OIDC_CLIENT_ID = "sasl.oauthbearer.client.credentials.client.id"
OIDC_CLIENT_SECRET = "sasl.oauthbearer.client.credentials.client.secret"
KRB5_MODULES = (
    "com.sun.security.auth.module.Krb5LoginModule",
    "com.ibm.security.auth.module.Krb5LoginModule",
)
MODULE_MECHANISMS = {
    PLAIN_MODULE: ("PLAIN",),
    SCRAM_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    OAUTH_MODULE: ("OAUTHBEARER",),
    IAM_MODULE: ("AWS_MSK_IAM",),
    **dict.fromkeys(KRB5_MODULES, ("GSSAPI",)),
}
JAAS_FORMAT = '<LoginModule class> required key="value" key2="value2";'
_UNSECURED = "unsecuredLogin"
_UNSECURED_MAPPED = tuple(f"{_UNSECURED}{o}" for o in ("StringClaim_sub", "ListClaim_scope", "LifetimeSeconds"))


class JaasSyntaxError(ValueError):
    """Why a JAAS string does not parse; never quotes the string, which holds secrets."""


# Java's StreamTokenizer as JaasConfig sets it up: whitespace and // or /* */ comments between tokens, quoted
# strings that end at their line, "=" and ";", and words of letters, digits and . - _ $ (or any char >= 0xA0).
_JAAS_TOKEN = re.compile(
    r"""(?P<skip>\s+|//[^\n]*|/\*.*?\*/)
    |(?P<quoted>"(?:\\.|[^"\\\r\n])*"|'(?:\\.|[^'\\\r\n])*')
    |(?P<op>[=;])
    |(?P<word>[\w.$\-\u00a0-\U0010ffff]+)""",
    re.DOTALL | re.VERBOSE,
)
_JAAS_ESCAPE = re.compile(r"\\([0-3][0-7]{0,2}|[4-7][0-7]?|.)", re.DOTALL)  # octal as Java reads it
_JAAS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _jaas_unescape(match: re.Match[str]) -> str:
    escaped = match[1]
    return chr(int(escaped, 8)) if escaped[0] in "01234567" else _JAAS_ESCAPES.get(escaped, escaped)


def _jaas_tokens(text: str) -> Iterator[tuple[str, str]]:
    """``("string", text)``, ``("=", "=")`` and ``(";", ";")`` tokens of a JAAS string, quotes removed.

    One leniency: an unquoted value may start with a digit (Java would read a number there and reject it).
    """
    position = 0
    while position < len(text):
        match = _JAAS_TOKEN.match(text, position)
        if match is None:
            what = "a quote or comment not closed" if text[position] in "\"'/" else "an unexpected character"
            raise JaasSyntaxError(f"{what} at offset {position} (quote values with other characters)")
        position = match.end()
        if match["quoted"]:
            yield "string", _JAAS_ESCAPE.sub(_jaas_unescape, match["quoted"][1:-1])
        elif match["word"]:
            yield "string", match["word"]
        elif match["op"]:
            yield match["op"], match["op"]


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a client JAAS string, which must hold exactly one entry."""
    tokens = list(_jaas_tokens(text))
    entries: list[tuple[str, dict[str, str]]] = []
    position = 0
    while position < len(tokens):
        if [kind for kind, _ in tokens[position : position + 2]] != ["string", "string"]:
            raise JaasSyntaxError("an entry must start with a login module class and a control flag")
        module, flag = tokens[position][1], tokens[position + 1][1]
        if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
            raise JaasSyntaxError(
                f"the control flag after {module} must be required, requisite, sufficient or optional"
            )
        position += 2
        options: dict[str, str] = {}
        while position < len(tokens) and tokens[position][0] != ";":
            if [kind for kind, _ in tokens[position : position + 3]] != ["string", "=", "string"]:
                # Never quote the token itself: after a broken option it may be part of a password.
                after = f" after option {list(options)[-1]!r}" if options else " as the first option"
                raise JaasSyntaxError(f"expected name=value{after} (quote values that contain spaces)")
            options[tokens[position][1]] = tokens[position + 2][1]
            position += 3
        if position >= len(tokens):
            raise JaasSyntaxError("the entry is not terminated by ';'")
        entries.append((module, options))
        position += 1
    if len(entries) != 1:
        raise JaasSyntaxError(f"it has {len(entries)} login modules; a client takes exactly one")
    return entries[0]


class SettingsSink(Protocol):
    """Where :func:`translate_login_module` puts librdkafka settings and reports issues: a translation."""

    @property
    def java(self) -> Mapping[str, str]:
        """The Java client settings being translated."""

    def put(self, target: str, value: str, source: str) -> None: ...

    def error(self, key: str, reason: str, allowed: str | None = None) -> None: ...

    def warn(self, key: str, reason: str, *, hide: bool = False) -> None: ...


def translate_login_module(sink: SettingsSink, module: str, options: dict[str, str]) -> None:
    """Put what the options of login ``module`` mean into ``sink``, or report why they cannot carry over."""
    if module == OAUTH_MODULE:
        _oauthbearer(sink, options)
    elif module in KRB5_MODULES:
        _kerberos(sink, options)
    elif module == IAM_MODULE:
        _aws_msk_iam(sink, options)
    elif options.get("tokenauth", "").lower() == "true":
        reason = "asks for delegation-token login (tokenauth=true), which librdkafka does not support"
        sink.error("sasl.jaas.config", reason)
    elif "username" in options and "password" in options:
        sink.put("sasl.username", options["username"], "sasl.jaas.config")
        sink.put("sasl.password", options["password"], "sasl.jaas.config")
    else:
        sink.error("sasl.jaas.config", "needs both a username and a password option", JAAS_FORMAT)


def _aws_msk_iam(sink: SettingsSink, options: dict[str, str]) -> None:
    """aws-msk-iam-auth's options as what kafka-python's AWS_MSK_IAM login can take: at most a profile name.

    That login signs with what botocore's default credential chain finds (environment, shared files, container
    or instance role); a profile picks an entry of the shared files. It cannot assume a role itself, but
    botocore assumes the role of a profile that names one, so a role ARN is refused with that way out.
    """
    if options.get("awsRoleArn"):
        sink.error(
            "sasl.jaas.config",
            "sets awsRoleArn, but the batch path's AWS_MSK_IAM login (kafka-python) cannot assume a role",
            "awsProfileName naming an AWS profile with role_arn and source_profile (botocore assumes that role)",
        )
        return
    if options.get("awsProfileName"):
        sink.put(AWS_PROFILE_SETTING, options["awsProfileName"], "sasl.jaas.config")
    for option in sorted(set(options) - {"awsProfileName"}):
        sink.warn("sasl.jaas.config", f"sets {option}, which kafka-python's AWS_MSK_IAM login lacks; dropped")


def _kerberos(sink: SettingsSink, options: dict[str, str]) -> None:
    for option, target in (
        ("keyTab", "sasl.kerberos.keytab"),
        ("principal", "sasl.kerberos.principal"),
        ("serviceName", "sasl.kerberos.service.name"),
    ):
        if option in options:
            sink.put(target, options[option], "sasl.jaas.config")
    if "keyTab" not in options:
        sink.warn(
            "sasl.jaas.config",
            "has no keyTab option, but librdkafka gets Kerberos tickets by running "
            "kinit with sasl.kerberos.keytab; set sasl.kerberos.kinit.cmd to fit your setup",
        )


@functools.cache
def gssapi_available() -> bool:
    """Whether the installed librdkafka was built with Kerberos (the PyPI wheels are not)."""
    try:
        import confluent_kafka

        confluent_kafka.Producer({"builtin.features": "sasl_gssapi", "log_level": 0})
    except ImportError:  # cannot tell; the client itself will say so
        return True
    except Exception:
        return False
    return True


NO_GSSAPI_INSTEAD = (
    "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, or confluent-kafka built on a librdkafka with GSSAPI"
)


def no_gssapi_reason() -> str:
    """Why a Kerberos login cannot go ahead here: one reason for both copy paths, since both need librdkafka.

    The PyPI wheels of confluent-kafka bundle a librdkafka built without cyrus-sasl, so it has no GSSAPI, and the
    driver makes every admin call (topics, offsets, groups) with it whichever path copies the records.
    """
    try:
        import confluent_kafka

        build = f"librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        build = "the installed librdkafka"
    return (
        f"GSSAPI (Kerberos; Java's default when unset), but {build} was built without it (no cyrus-sasl), "
        "and mm2py's admin calls use librdkafka on either copy path"
    )


def _oauthbearer(sink: SettingsSink, options: dict[str, str]) -> None:
    url_key = "sasl.oauthbearer.token.endpoint.url"
    url = sink.java.get(url_key, "")
    if not url:
        _unsecured_jwt(sink, options)
    elif url.lower().startswith("file:"):
        sink.error(url_key, "a token file, but librdkafka only fetches tokens over HTTP(S)")
    else:
        # Kafka 4.1 (KIP-1139) moved the client credentials out of the JAAS options into client keys.
        client_id = options.get("clientId") or sink.java.get(OIDC_CLIENT_ID, "")
        client_secret = options.get("clientSecret") or sink.java.get(OIDC_CLIENT_SECRET, "")
        if not (client_id and client_secret):
            sink.error(
                "sasl.jaas.config",
                f"needs clientId and clientSecret options (or {OIDC_CLIENT_ID} and {OIDC_CLIENT_SECRET}) for the "
                f"OIDC login at {url_key}",
            )
            return
        sink.put("sasl.oauthbearer.method", "oidc", "sasl.jaas.config")
        sink.put("sasl.oauthbearer.client.id", client_id, "sasl.jaas.config")
        sink.put("sasl.oauthbearer.client.secret", client_secret, "sasl.jaas.config")
        if options.get("scope"):
            sink.put("sasl.oauthbearer.scope", options["scope"], "sasl.jaas.config")
        extensions = [f"{k[10:]}={v}" for k, v in options.items() if k.startswith("extension_")]
        if extensions:
            sink.put("sasl.oauthbearer.extensions", ",".join(extensions), "sasl.jaas.config")


def _unsecured_jwt(sink: SettingsSink, options: dict[str, str]) -> None:
    """Java's unsecured-token options (development only) as librdkafka's ``sasl.oauthbearer.config``.

    librdkafka's unsecured tokens carry a principal, a scope and a lifetime; the rarely used Java options
    for other claims or claim names are dropped with a warning.
    """
    principal = options.get(f"{_UNSECURED}StringClaim_sub", "")
    if not principal:
        sink.error(
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
            sink.warn("sasl.jaas.config", f"sets {option}, which librdkafka's unsecured tokens lack; dropped")
    if any(char.isspace() for part in parts for char in part):
        sink.error(
            "sasl.jaas.config",
            "has an unsecured-token value with whitespace, which librdkafka's space-separated "
            "sasl.oauthbearer.config cannot carry",
        )
        return
    sink.put("enable.sasl.oauthbearer.unsecure.jwt", "true", "sasl.jaas.config")
    sink.put("sasl.oauthbearer.config", " ".join(parts), "sasl.jaas.config")

"""Kafka's ``sasl.jaas.config``, read the way Java's ``JaasConfig`` reads it.

:func:`parse_jaas` is strict where Java is strict (one entry, a control flag, ``name=value`` options, ``;`` at the
end), so a string MM2 rejects is rejected here too, and its errors never quote the string: it holds passwords. What
each login module's options mean is :mod:`mm2py.config.client_keys.login`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"  # aws-msk-iam-auth, for AWS_MSK_IAM
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

"""Secret masking for everything mm2py prints: config log lines, issues, exceptions, Spark task failures.

Two complementary tools, because neither alone is enough:

* **by key** (:func:`is_secret_key`, :func:`mask_value`) — used where we print a ``key = value`` we know
  about; the value is replaced by :data:`MASK`, the string Kafka itself prints for ``PASSWORD``-type configs.
* **by value** (:class:`Redactor`) — used on free text we did not write (a librdkafka error, a Java-style
  exception, a Spark traceback). It removes the secret *values* it was told about, and also masks fragments
  that look like secrets even when nobody told it (``password="..."`` in JAAS, ``sasl.password=...``).

This module must stay importable without Kafka or Spark: executors and the CLI's error boundary both use it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

MASK = "[hidden]"

# A key is split into lower-case words on ".", "_", "-", ">", whitespace and camelCase humps, so
# "A->B.sasl.jaas.config", "ssl_key" and the JAAS option "clientSecret" are all judged by the same rule.
_WORD_SPLIT = re.compile(r"[._\->\s]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_LAST_WORDS = frozenset({"password", "passwd", "pwd", "pass", "secret", "passphrase", "apikey"})
_SECRET_LAST_PAIRS = frozenset(
    {
        ("jaas", "config"),  # sasl.jaas.config: holds usernames, passwords, client secrets
        ("user", "info"),  # basic.auth.user.info (schema registry) is "user:password"
        ("keystore", "key"),  # ssl.keystore.key: an inline PEM private key
        ("private", "key"),
        ("ssl", "key"),  # librdkafka's ssl_key
        ("api", "key"),
        ("secret", "key"),
        ("access", "key"),
        ("oauthbearer", "config"),  # librdkafka sasl.oauthbearer.config may carry extensions with credentials
        ("certificate", "chain"),  # Kafka types ssl.keystore.certificate.chain as PASSWORD; we follow it
        ("truststore", "certificates"),  # likewise ssl.truststore.certificates
    }
)
_MIN_SECRET_LENGTH = 4


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(key.strip()) if w]


def is_secret_key(key: str) -> bool:
    """True when the value of ``key`` must never be printed, whatever prefix the key carries.

    The rule looks only at the *end* of the key, so ``dc1.producer.ssl.key.password`` and
    ``A->B.sasl.jaas.config`` are judged like ``ssl.key.password`` and ``sasl.jaas.config``. A key is secret
    when its last word is a password-like word (``password``, ``passwd``, ``pwd``, ``pass``, ``secret``,
    ``passphrase``, ``apikey``), or ends in ``token``/``tokens`` (``access.token``, ``bearerToken``; but not
    ``token.endpoint.url`` or the SCRAM option ``tokenauth``), or is ``pem`` (inline PEM material:
    ``ssl.key.pem``, and the certificates Kafka itself types as ``PASSWORD``), or when its last two words
    are one of a short list (``jaas.config``, ``user.info``, ``keystore.key``, ``private.key``, ``ssl_key``,
    ``api.key``, ``secret.key``, ``access.key``, ``oauthbearer.config``, ``certificate.chain``,
    ``truststore.certificates``).

    It errs on the generous side: masking a harmless value costs a little readability, printing a password
    costs a credential rotation.
    """
    words = _words(key)
    if not words:
        return False
    last = words[-1]
    if last in _SECRET_LAST_WORDS or last == "pem" or last.endswith(("token", "tokens")):
        return True
    return len(words) >= 2 and (words[-2], last) in _SECRET_LAST_PAIRS


def mask_value(key: str, value: str) -> str:
    """``value`` as it may be printed next to ``key``: :data:`MASK` for secret keys, unchanged otherwise."""
    return MASK if is_secret_key(key) else value


# ``key = value`` fragments inside free text. The key may be quoted (dict reprs, JSON) and the value may be
# double- or single-quoted with backslash escapes (JAAS strings); an unquoted value ends at whitespace or
# punctuation that commonly follows it in log lines. A value that is already the mask is left alone. Whether
# a match is an assignment at all is decided by :func:`_assigns`.
_QUOTED = r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\''
_INLINE_ASSIGNMENT = re.compile(
    r"(?P<kq>[\"']?)(?P<key>[A-Za-z_$][\w$.\->]*)(?P=kq)(?P<sep>\s*(?P<op>[=:])\s*)"
    rf"(?!{re.escape(MASK)})(?P<value>{_QUOTED}|[^\s;,'\"}}\])]+)"
)
# A whole ``key = value`` properties line: there the value runs to the end of the line, spaces included.
_PROPERTIES_LINE = re.compile(
    r"^(?P<head>[ \t]*(?P<key>[A-Za-z_$][\w$.\->]*)[ \t]*(?P<op>[=:])[ \t]*)(?P<value>.+?)[ \t]*$",
    re.MULTILINE,
)
_URL_CREDENTIALS = re.compile(r"(?P<head>\b[a-zA-Z][\w+.-]*://[^/\s:@]+:)(?P<value>[^/\s@]+)(?=@)")
# JAAS options (``username="alice"``) for :meth:`Redactor.from_properties`.
_JAAS_OPTION = re.compile(rf"(?P<key>[A-Za-z_$][\w$.-]*)\s*=\s*(?P<value>{_QUOTED}|[^\s;\"']+)")
_JAAS_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return _JAAS_ESCAPE.sub(r"\1", value[1:-1])
    return value


def _assigns(key: str, op: str, quoted: bool = False) -> bool:
    """Whether ``key`` followed by ``op`` (``=`` or ``:``) in free text assigns a secret value.

    ``=`` is always an assignment, so any secret key before it counts (``sasl.password=x``, ``PASSWORD=x``,
    JAAS ``password="x"``). ``:`` is also punctuation in prose (``unexpected token: '}'``, ``as PEM: keytool
    ...``), so before ``:`` a secret key counts only when it is quoted (``"password": "x"`` in dict reprs and
    JSON), has the shape of a config key (several words: ``ssl.key.pem: ...``, ``sasl_password: x``,
    ``clientSecret: x``), or is a lowercase password-like word (``password: x``, ``secret: x``). A bare
    word that is also everyday prose — ``token``, ``PEM``, a capitalised ``Password`` — is not a key before
    ``:``.
    """
    if not is_secret_key(key):
        return False
    return op == "=" or quoted or len(_words(key)) > 1 or key in _SECRET_LAST_WORDS


def _mask_assignment(match: re.Match[str]) -> str:
    if not _assigns(match["key"], match["op"], quoted=bool(match["kq"])):
        return match[0]
    value = match["value"]
    masked = value[0] + MASK + value[0] if value[0] in "\"'" else MASK
    return match[0][: match.start("value") - match.start()] + masked


class Redactor:
    """Removes known secret values from any text, and masks secret-looking fragments it was not told about.

    Known values are found wherever they occur — even inside a longer word — and overlapping or adjacent
    occurrences of different secrets are merged into one :data:`MASK`, so no tail of one secret survives next
    to another. Then three patterns catch secrets nobody registered: ``<secret key>=value`` / ``<secret key>:
    value`` fragments (JAAS ``password="..."`` or ``clientSecret='...'``, ``sasl.password=...``, dict reprs),
    whole ``*.password = ...`` properties lines, and ``scheme://user:password@host`` URLs. Which keys count
    before a ``:`` is narrower than before ``=``, so prose such as ``as PEM: keytool`` stays readable; see
    :func:`_assigns`.
    """

    def __init__(self, secret_values: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        for value in secret_values:
            self.add(value)

    def add(self, value: str) -> None:
        """Remember ``value`` as a secret.

        Empty values and values shorter than 4 characters are ignored: masking ``"ab"`` or ``"1"`` everywhere
        would shred every log line (offsets, partition numbers, topic names) while hiding next to nothing —
        such a password is guessable anyway. The pattern masking still hides them when they appear as
        ``password=...``. A value with surrounding whitespace is remembered with and without it.
        """
        new = {c for c in (value, value.strip()) if len(c) >= _MIN_SECRET_LENGTH} - self._secrets
        if new:
            # A new set, not a change to the one a redact() in another thread may be iterating.
            self._secrets = self._secrets | new

    def redact(self, text: str) -> str:
        """``text`` with every known secret and every secret-looking fragment replaced by :data:`MASK`."""
        text = self._remove_known(text)
        text = _PROPERTIES_LINE.sub(
            lambda m: m["head"] + MASK if _assigns(m["key"], m["op"]) and m["value"] != MASK else m[0], text
        )
        text = _INLINE_ASSIGNMENT.sub(_mask_assignment, text)
        return _URL_CREDENTIALS.sub(lambda m: m["head"] + MASK, text)

    def _remove_known(self, text: str) -> str:
        spans: list[tuple[int, int]] = []
        # Longest first only matters for readability of this loop: spans of all secrets are merged below.
        for secret in sorted(self._secrets, key=len, reverse=True):
            start = text.find(secret)
            while start != -1:
                spans.append((start, start + len(secret)))
                start = text.find(secret, start + 1)
        if not spans:
            return text
        spans.sort()
        merged = [spans[0]]
        for start, end in spans[1:]:
            if start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        pieces: list[str] = []
        position = 0
        for start, end in merged:
            pieces += [text[position:start], MASK]
            position = end
        pieces.append(text[position:])
        return "".join(pieces)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Redactor:
        """A redactor for the values of every secret key in ``props``, plus the parts of JAAS values.

        For a ``sasl.jaas.config`` value the whole string is a secret, and so are its ``password`` option and
        any option with a secret-looking name (``clientSecret``): a library may echo one of those alone, unquoted,
        in an error message. Its ``username`` is not: it is the principal, which every refusal must name (as
        ``sasl.username``, librdkafka's own key, is not a secret either).
        """
        redactor = cls()
        redactor.add_properties(props)
        return redactor

    def add_properties(self, props: Mapping[str, str]) -> None:
        """Remember the secrets of ``props`` too (see :meth:`from_properties`): a Python worker that runs
        several flows' tasks masks every flow's secrets, not only the first one's."""
        for key, value in props.items():
            if not is_secret_key(key):
                continue
            self.add(value)
            if _words(key)[-2:] == ["jaas", "config"]:
                for option in _JAAS_OPTION.finditer(value):
                    if is_secret_key(option["key"]):
                        self.add(_unquote(option["value"]))
                        self.add(option["value"])


class RedactingFilter(logging.Filter):
    """Applies a :class:`Redactor` to every record, so no handler, formatter or log file ever sees a secret.

    The message is formatted first (``msg % args``) and then redacted, because a secret is often an argument;
    tracebacks and stack info are rendered and redacted too. Attach it to *handlers*: a filter on a logger
    does not see records propagated from its child loggers.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor if redactor is not None else Redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call must still be logged, and still without secrets
            message = f"{record.msg} {record.args!r}"
        record.msg = self.redactor.redact(message)
        record.args = None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = self.redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True

"""Where the batch path's OAUTHBEARER tokens come from: an OIDC token endpoint (the client-credentials grant, as
librdkafka's ``sasl.oauthbearer.method=oidc`` fetches them), or an unsecured development token.

Why its own module: the wire library asks its token provider for a token at every login and re-login; a token is
reused until 80 % of its lifetime (as librdkafka does), so a run that outlives a token fetches a new one, and
the broker's re-authentication (``connections.max.reauth.ms``) gets it. A token endpoint that refuses the client
credentials (an HTTP 4xx: a wrong client secret, an unknown client, a scope it will not grant) is a
:class:`TokenRefused`, which :mod:`mm2py.wire.login_failures` turns into a stop of the copy, as a refused
password is: waiting does not change that answer. Other failures (no answer, a 5xx) are left to the library's
reconnects. Executor side; nothing here opens a connection before the first login.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider  # type: ignore[import-untyped]

# How much of a refusal's body a message may quote: an OAuth error and its description, not a page of HTML.
_QUOTED_CHARS = 200


class TokenRefused(Exception):
    """The token endpoint refused the client credentials (HTTP 4xx); the message names the endpoint and its
    answer, never the secret."""


class TokenSource:
    """Where OAUTHBEARER tokens come from; ``token()`` returns a current one, ``extensions()`` SASL extensions."""

    def token(self) -> str:
        raise NotImplementedError

    def extensions(self) -> dict[str, str]:
        return {}


@dataclass
class OidcTokenSource(TokenSource):
    """OIDC client-credentials tokens (librdkafka's ``sasl.oauthbearer.method=oidc``), cached until near expiry."""

    url: str
    client_id: str = field(repr=False)
    client_secret: str = field(repr=False)
    scope: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    _cached: tuple[str, float] | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def token(self) -> str:
        with self._lock:
            if self._cached is not None and time.monotonic() < self._cached[1]:
                return self._cached[0]
            form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
            credentials = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
            request = urllib.request.Request(
                self.url,
                data=urllib.parse.urlencode(form).encode(),
                headers={"Authorization": f"Basic {credentials}", "Content-Type": "application/x-www-form-urlencoded"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    answer = json.load(response)
            except urllib.error.HTTPError as exc:
                if 400 <= exc.code < 500:
                    raise TokenRefused(self._refusal(exc)) from None
                raise
            token = str(answer["access_token"])
            lifetime = float(answer.get("expires_in", 300))
            self._cached = (token, time.monotonic() + lifetime * 0.8)  # refresh at 80 %, as librdkafka does
            return token

    def extensions(self) -> dict[str, str]:
        return dict(self.extra)

    def _refusal(self, exc: urllib.error.HTTPError) -> str:
        """``the token endpoint URL refused client id ID: HTTP 401 invalid_client (client authentication failed)``."""
        body = exc.read(4096).decode(errors="replace")
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if isinstance(document, dict) and "error" in document:
            said = str(document["error"])
            if document.get("error_description"):
                said += f" ({document['error_description']})"
        else:
            said = " ".join(body.split()) or str(exc.reason)
        said = said[:_QUOTED_CHARS].replace(self.client_secret, "***") if self.client_secret else said
        return f"the token endpoint {self.url} refused client id {self.client_id}: HTTP {exc.code} {said}"


@dataclass
class UnsecuredTokenSource(TokenSource):
    """An unsigned JWT (``alg: none``) for development brokers, as librdkafka's unsecure-jwt option makes."""

    principal: str
    scope: list[str] = field(default_factory=list)
    life_seconds: int = 3600
    extra: dict[str, str] = field(default_factory=dict)

    def token(self) -> str:
        def part(data: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()

        now = int(time.time())
        claims: dict[str, Any] = {"sub": self.principal, "iat": now, "exp": now + self.life_seconds}
        if self.scope:
            claims["scope"] = self.scope
        return f"{part({'alg': 'none'})}.{part(claims)}."

    def extensions(self) -> dict[str, str]:
        return dict(self.extra)


class LibraryTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """The wire library's OAUTHBEARER hook, fed by one of mm2py's token sources."""

    def __init__(self, source: TokenSource) -> None:
        super().__init__()
        self.source = source

    def token(self) -> str:
        return self.source.token()

    def extensions(self) -> dict[str, str]:
        return self.source.extensions()

"""A test-only OIDC provider: a token endpoint for the client-credentials grant and a JWKS endpoint, served by a
thread of the test process.

Why: Kafka's broker-side ``OAuthBearerValidatorCallbackHandler`` checks a token's RS256 signature against the keys
a JWKS URL serves, and its ``exp``, ``sub``, ``scope`` and (when configured) ``aud`` claims; the clients fetch their
tokens from a token endpoint with their client id and secret. Serving both here lets a real broker validate real
logins, and lets a test count the grants (how often a client came back for a token) and choose how long a token
lives (seconds, to make a run outlive its first token). The signature is ``cryptography``'s RSA PKCS#1 v1.5 over
SHA-256, which is what RS256 is; nothing here is used outside tests.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.harness.kafka_harness import HOST

AUDIENCE = "kafka-brokers"
SCOPE = "kafka"
_KEY_ID = "mm2py-test-key"
_BROKER_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_int(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass(frozen=True)
class Grant:
    """One answer of the token endpoint: when, to which client id, and whether a token was issued."""

    at: float
    client_id: str
    issued: bool


class OidcProvider:
    """``/token`` (client credentials in HTTP Basic or in the form) and ``/jwks``; a context manager.

    ``clients`` maps client id to secret. ``token_lifetime_s`` may be changed while it runs; tokens issued after
    that live that long. ``expired`` names client ids whose tokens are issued expired already (an issuer whose
    clock is behind, or a token replayed too late): ``exp`` an hour before ``iat``'s now, beyond any clock skew
    a broker allows. ``grants`` records every answer of the token endpoint, refusals included.
    """

    def __init__(
        self, clients: dict[str, str], token_lifetime_s: int = 300, expired: frozenset[str] = frozenset()
    ) -> None:
        self.clients = dict(clients)
        self.token_lifetime_s = token_lifetime_s
        self.expired = expired
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._grants: list[Grant] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((HOST, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)

    def __enter__(self) -> OidcProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    @property
    def grants(self) -> list[Grant]:
        with self._lock:
            return list(self._grants)

    def issued_since(self, moment: float) -> list[Grant]:
        """Tokens issued at or after ``moment`` (``time.time()`` seconds)."""
        return [grant for grant in self.grants if grant.issued and grant.at >= moment]

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": _KEY_ID}
        return {"keys": [{**key, "n": _b64url_int(numbers.n), "e": _b64url_int(numbers.e)}]}

    def issue(self, subject: str, scope: str) -> tuple[str, int]:
        """A signed RS256 JWT for ``subject`` and its lifetime in seconds."""
        lifetime = -3600 if subject in self.expired else self.token_lifetime_s
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": _KEY_ID}
        claims = {
            "iss": self.base_url,
            "sub": subject,
            "aud": AUDIENCE,
            "scope": scope,
            "iat": now,
            "exp": now + lifetime,
            "jti": secrets.token_hex(8),
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}", lifetime

    def _record(self, client_id: str, issued: bool) -> None:
        with self._lock:
            self._grants.append(Grant(time.time(), client_id, issued))

    def _credentials(self, authorization: str, form: dict[str, str]) -> tuple[str, str]:
        if authorization.startswith("Basic "):
            decoded = base64.b64decode(authorization.removeprefix("Basic ").strip()).decode()
            client_id, _, secret = decoded.partition(":")
            return urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
        return form.get("client_id", ""), form.get("client_secret", "")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output stays for its own figures

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(200, provider.jwks())

            def do_POST(self) -> None:
                if self.path != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form = {key: values[0] for key, values in urllib.parse.parse_qs(body).items()}
                if form.get("grant_type") != "client_credentials":
                    self._answer(400, {"error": "unsupported_grant_type"})
                    return
                client_id, secret = provider._credentials(self.headers.get("Authorization", ""), form)
                known = provider.clients.get(client_id)
                if known is None or not secrets.compare_digest(known.encode(), secret.encode()):
                    provider._record(client_id, issued=False)
                    self._answer(401, {"error": "invalid_client", "error_description": "client authentication failed"})
                    return
                token, lifetime = provider.issue(client_id, form.get("scope", SCOPE))
                provider._record(client_id, issued=True)
                self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime})

            def _answer(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def broker_settings(self, listener: str = "SASL_PLAINTEXT") -> dict[str, str]:
        """server.properties entries: ``listener`` takes OAUTHBEARER only, validated against this provider's JWKS.

        ``connections.max.reauth.ms`` makes the broker hold a connection's session to its token's expiry (without
        it an authenticated connection outlives its token), so a client must log in again with a new token.
        """
        prefix = f"listener.name.{listener.lower()}.oauthbearer"
        return {
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{prefix}.sasl.jaas.config": _BROKER_LOGIN,
            f"{prefix}.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            f"{prefix}.connections.max.reauth.ms": "600000",
            "sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.clock.skew.seconds": "1",
        }

    def jvm_options(self) -> list[str]:
        """Kafka 4.x fetches only from URLs this system property lists."""
        return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.token_url},{self.jwks_url}"]

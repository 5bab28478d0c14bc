"""The batch path's OIDC token source against a token endpoint served by the test (tests/harness/oidc_provider.py):
a token is reused until near its expiry and then fetched again, and a refusal of the client credentials is a
:class:`TokenRefused` that names the endpoint and its answer, never the secret."""

from __future__ import annotations

import json
import secrets
import time
from base64 import urlsafe_b64decode

import pytest

from mm2py.wire.oauth_tokens import OidcTokenSource, TokenRefused
from tests.harness.oidc_provider import OidcProvider
from tests.harness.polling import poll_until

SECRET = secrets.token_urlsafe(16)


def claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return dict(json.loads(urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_a_token_is_reused_until_near_its_expiry_and_then_fetched_again() -> None:
    with OidcProvider({"mirror": SECRET}, token_lifetime_s=2) as provider:
        source = OidcTokenSource(provider.token_url, "mirror", SECRET, scope="kafka")
        first = source.token()
        assert source.token() == first and len(provider.grants) == 1
        assert claims(first)["sub"] == "mirror" and claims(first)["scope"] == "kafka"

        poll_until(lambda: source.token() != first, 10, "a new token after 80 % of the first one's 2 s")
        assert [grant.issued for grant in provider.grants] == [True, True]


def test_a_refused_client_secret_names_the_endpoint_and_its_answer_without_the_secret() -> None:
    wrong = secrets.token_urlsafe(16)
    with OidcProvider({"mirror": SECRET}) as provider:
        source = OidcTokenSource(provider.token_url, "mirror", wrong)
        started = time.monotonic()
        with pytest.raises(TokenRefused) as refused:
            source.token()
    message = str(refused.value)
    assert message == (
        f"the token endpoint {provider.token_url} refused client id mirror: "
        "HTTP 401 invalid_client (client authentication failed)"
    )
    assert wrong not in message and SECRET not in message
    assert time.monotonic() - started < 5

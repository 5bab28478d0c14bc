"""librdkafka settings -> the batch path's wire client settings: same connection, or a clear refusal."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mm2py.errors import ConfigError
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.connection_settings import wire_config as adapt
from mm2py.wire.oauth_tokens import OidcTokenSource, UnsecuredTokenSource
from tests.harness.translation_helpers import client_keys, client_settings


def wire_config(alias: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """Translated librdkafka settings read into the typed object, then adapted: what the batch path connects with."""
    return adapt(alias, client_settings(settings))


def test_plaintext_maps_servers_client_id_and_timeouts() -> None:
    config = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:9092, b:9093",
            "client.id": "x",
            "socket.timeout.ms": "5000",
            "reconnect.backoff.ms": "10",
            "group.id": "ignored",
            "linger.ms": "5",
        },
    )
    assert config == {
        "bootstrap_servers": ["a:9092", "b:9093"],
        "security_protocol": "PLAINTEXT",
        "client_id": "x",
        "request_timeout_ms": 5000,
        "reconnect_backoff_ms": 10,
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_carry_username_and_password(mechanism: str) -> None:
    config = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "u",
            "sasl.password": "p",
        },
    )
    assert (config["sasl_mechanism"], config["sasl_plain_username"], config["sasl_plain_password"]) == (
        mechanism,
        "u",
        "p",
    )


def test_oauthbearer_oidc_and_unsecured_tokens() -> None:
    oidc = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "id",
            "sasl.oauthbearer.client.secret": "s3cret",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.oauthbearer.extensions": "logicalCluster=lc1",
        },
    )
    source = oidc["sasl_oauth_token_source"]
    assert isinstance(source, OidcTokenSource) and source.url == "https://idp/token"
    assert source.extensions() == {"logicalCluster": "lc1"} and "s3cret" not in repr(source)
    unsecured = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice scope=a,b lifeSeconds=60",
        },
    )
    token_source = unsecured["sasl_oauth_token_source"]
    assert isinstance(token_source, UnsecuredTokenSource)
    assert (token_source.principal, token_source.scope, token_source.life_seconds) == ("alice", ["a", "b"], 60)
    assert token_source.token().count(".") == 2


def test_secrets_never_appear_in_refusals() -> None:
    with pytest.raises(ConfigError) as caught:
        wire_config(
            "dc1",
            {
                "bootstrap.servers": "a:1",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "hunter2",
                "ssl.engine.id": "pkcs11",
            },
        )
    assert "ssl.engine.id" in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism"),  # librdkafka's default is GSSAPI
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"security.protocol": "SSL", "ssl.key.pem": "-----BEGIN"}, "ssl.key.pem"),
        ({"security.protocol": "SSL", "ssl.sigalgs.list": "RSA+SHA256"}, "ssl.sigalgs.list"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
            "ssl.endpoint.identification.algorithm",
        ),
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "sasl.oauthbearer.method"),
    ],
)
def test_settings_it_cannot_honour_are_refused_by_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        wire_config("dc1", {"bootstrap.servers": "a:1", **settings})
    assert caught.value.key == key and "dc1" in str(caught.value)


def test_tls_builds_a_verifying_context_from_the_ca_file(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )
    config = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SSL",
            "ssl.ca.location": str(cert),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        },
    )
    context = config["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname and config["ssl_check_hostname"]
    assert len(context.get_ca_certs()) == 1
    relaxed = wire_config(
        "dc1",
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SSL",
            "ssl.ca.location": str(cert),
            "ssl.endpoint.identification.algorithm": "",  # Java's "none"
        },
    )
    assert not relaxed["ssl_context"].check_hostname and relaxed["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_a_tls13_pin_and_java_cipher_names_reach_the_batch_paths_context() -> None:
    java = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SSL",
        "ssl.enabled.protocols": "TLSv1.3",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    }
    _, issues = client_keys(java, "consumer")
    assert issues == []
    context = wire_config("a", java)["ssl_context"]
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    unpinned = {**java, "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}
    assert wire_config("a", unpinned)["ssl_context"].minimum_version == ssl.TLSVersion.TLSv1_2


def test_the_wire_library_warns_only_of_event_loop_steps_that_block_for_seconds() -> None:
    """kafka-python's 0.1-s slow-step warning fired on a busy CI worker and reached a failed run's one error line."""
    connection = KafkaConnection("dc1", client_settings({"bootstrap.servers": "127.0.0.1:1"}))
    try:
        assert connection._client._net.config["slow_task_threshold_secs"] == 5.0
    finally:
        connection.close()

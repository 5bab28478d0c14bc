"""The batch path's wire client presents the same client certificate as librdkafka: Java keystores, in memory."""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mm2py.wire.connection_settings import wire_config as adapt
from tests.harness.keystore_files import Identity, identity, jks_keystore, jks_truststore
from tests.harness.translation_helpers import client_keys, client_settings


def wire_config(alias: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """Translated librdkafka settings read into the typed object, then adapted: what the batch path connects with."""
    return adapt(alias, client_settings(settings))


PASSWORD = "st0re-Pa55word"


def server_context(tmp_path: Path, server: Identity, trusted_client: Identity) -> ssl.SSLContext:
    """A TLS server that demands a client certificate signed by (here: equal to) ``trusted_client``."""
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    cert.write_text(server.cert_pem)
    key.write_bytes(server.key.private_bytes(*_pem_pkcs8()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=trusted_client.cert_pem)
    return context


def _pem_pkcs8() -> tuple[object, object, object]:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()


def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> str:
    """Run one TLS handshake over a socket pair; returns the client certificate's subject the server saw."""
    left, right = socket.socketpair()
    seen: list[str] = []
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server.wrap_socket(right, server_side=True) as tls:
                peer = tls.getpeercert()
                seen.append(dict(item[0] for item in peer["subject"])["commonName"])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(left, server_hostname=None):
            pass
    finally:
        thread.join(10)
    if errors:
        raise errors[0]
    return seen[0]


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "sealed-temp-file"])
def test_a_jks_keystore_reaches_the_wire_client_as_the_same_client_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memfd: bool
) -> None:
    server, client = identity("broker"), identity("mirror-maker")
    java = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.location": str(jks_truststore(tmp_path / "trust.jks", PASSWORD, server)),
        "ssl.truststore.password": PASSWORD,
        "ssl.keystore.location": str(jks_keystore(tmp_path / "client.jks", PASSWORD, PASSWORD, client)),
        "ssl.keystore.password": PASSWORD,
    }
    settings, issues = client_keys(java, "consumer")
    assert issues == []
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
    before = set(Path(tempfile.gettempdir()).glob("mm2py-*.pem"))

    context = wire_config("dc1", settings)["ssl_context"]

    assert handshake(context, server_context(tmp_path, server, client)) == "mirror-maker"
    assert set(Path(tempfile.gettempdir()).glob("mm2py-*.pem")) == before  # nothing left behind


def test_an_inline_key_without_its_certificate_is_refused() -> None:
    from mm2py.errors import ConfigError

    with pytest.raises(ConfigError, match=r"ssl\.certificate\.pem too"):
        wire_config("dc1", {"bootstrap.servers": "b:1", "security.protocol": "SSL", "ssl.key.pem": "-----BEGIN"})

"""TLS version pins in librdkafka, which has no setting for them.

What each client can do with a pin (read by :mod:`mm2py.config.client_keys.tls_versions`):

- the batch path (Python's ``ssl``) pins exactly: ``SSLContext.minimum_version``/``maximum_version``;
- librdkafka (the driver's admin clients, the record path) has no such setting; its OpenSSL negotiates the
  highest version both sides offer, and TLS 1.3's downgrade protection (RFC 8446, 4.1.3) stops an attacker from
  lowering it. So a TLS 1.3 pin holds for librdkafka exactly when the broker offers TLS 1.3, which the driver's
  admin client checks with a pinned handshake to every bootstrap server before it connects
  (:func:`check_brokers_offer`). A record-path flow cannot be checked that way in every task, so the record
  path refuses a pin (``mm2py.control.copy_path``).

The pin travels inside a client's librdkafka settings under ``PIN_KEY``, an mm2py key that every place creating a
librdkafka client removes (:func:`without_pin`).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping

from mm2py.client_settings import MINIMUM_VERSIONS

PIN_KEY = "mm2py.ssl.versions"


def without_pin(settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` for librdkafka, which refuses keys it does not know."""
    return {key: value for key, value in settings.items() if key != PIN_KEY}


class VersionRefused(Exception):
    """A bootstrap server does not offer the pinned TLS version (the message names it)."""


def check_brokers_offer(settings: Mapping[str, object], timeout_s: float = 10.0) -> None:
    """Raise VersionRefused unless every bootstrap server completes a handshake at the pinned version.

    The handshake only tests the version: no certificate is checked and nothing is sent after it, so no
    credential leaves this process; the client that connects afterwards verifies the broker as configured.
    """
    pinned = settings.get(PIN_KEY)
    if not pinned:
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = MINIMUM_VERSIONS[str(pinned)]
    for server in str(settings.get("bootstrap.servers", "")).split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            continue  # librdkafka reports a malformed address itself
        host = host.strip("[]")
        try:
            with (
                socket.create_connection((host, int(port)), timeout=timeout_s) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                pass
        except ssl.SSLError as exc:
            raise VersionRefused(
                f"the broker at {host}:{port} does not offer {pinned}, which {PIN_SOURCE} pins ({exc.reason or exc})"
            ) from None
        except OSError:
            continue  # unreachable: librdkafka's own connection attempt says so, with its retries


PIN_SOURCE = "ssl.enabled.protocols/ssl.protocol"

"""TLS version pins (Java's ``ssl.enabled.protocols`` and ``ssl.protocol``), which librdkafka has no setting for.

Why a module: MM2 users pin TLS 1.3 to meet a security rule, and a pin that is silently dropped lets a client
talk TLS 1.2 to a broker that still offers it. What each client can do:

- the batch path (Python's ``ssl``) pins exactly: ``SSLContext.minimum_version``/``maximum_version``;
- librdkafka (the driver's admin clients, the record path) has no such setting; its OpenSSL negotiates the
  highest version both sides offer, and TLS 1.3's downgrade protection (RFC 8446, 4.1.3) stops an attacker from
  lowering it. So a TLS 1.3 pin holds for librdkafka exactly when the broker offers TLS 1.3, which the driver's
  admin client checks with a pinned handshake to every bootstrap server before it connects
  (:func:`check_brokers_offer`). A record-path flow cannot be checked that way in every task, so the record
  path refuses a pin (``mm2py.control.copy_path``);
- a pin that keeps TLS 1.3 *out* (TLSv1.2 only) cannot be honoured by librdkafka at all, and is refused.

The pin travels inside the librdkafka settings under ``PIN_KEY``, an mm2py key that every place creating a
librdkafka client removes (:func:`without_pin`); the batch path reads it as ``TlsSettings.minimum_version``
(:mod:`mm2py.librdkafka.typed_settings`).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.client_settings import MINIMUM_VERSIONS

PIN_KEY = "mm2py.ssl.versions"
SUPPORTED = ("TLSv1.2", "TLSv1.3")
_TOO_OLD = ("TLSv1", "TLSv1.1")
_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class VersionPin:
    """What ``ssl.enabled.protocols``/``ssl.protocol`` ask for: the pinned version (None: no pin), or a problem."""

    pinned: str | None = None
    error: tuple[str, str, str] | None = None  # key, reason, allowed
    dropped: tuple[str, ...] = ()  # versions listed that no mm2py client offers


def read_version_pin(java: Mapping[str, str]) -> VersionPin:
    """The pin that Java's two keys make together (Java: ``ssl.protocol=TLSv1.2`` keeps TLS 1.3 out)."""
    enabled = [v.strip() for v in java.get("ssl.enabled.protocols", ",".join(SUPPORTED)).split(",") if v.strip()]
    protocol = java.get("ssl.protocol", "TLSv1.3").strip()
    unknown = [v for v in enabled if v not in (*SUPPORTED, *_TOO_OLD)]
    if unknown:
        return VersionPin(
            error=("ssl.enabled.protocols", f"{', '.join(unknown)}: not a TLS version", "TLSv1.2, TLSv1.3")
        )
    if protocol not in _PROTOCOLS:
        return VersionPin(error=("ssl.protocol", "not a TLS protocol mm2py's clients offer", ", ".join(_PROTOCOLS)))
    versions = [v for v in SUPPORTED if v in enabled and not (protocol == "TLSv1.2" and v == "TLSv1.3")]
    dropped = tuple(v for v in enabled if v in _TOO_OLD)
    if not versions:
        key = "ssl.protocol" if protocol == "TLSv1.2" and "TLSv1.3" in enabled else "ssl.enabled.protocols"
        return VersionPin(
            error=(key, "leaves no TLS version mm2py's clients offer", "TLSv1.2, TLSv1.3"), dropped=dropped
        )
    if versions == ["TLSv1.2"]:
        reason = (
            "keeps TLS 1.3 out, which librdkafka (mm2py's admin clients and record path) has no setting for, "
            "so the pin cannot be honoured"
        )
        key = "ssl.protocol" if protocol == "TLSv1.2" else "ssl.enabled.protocols"
        return VersionPin(error=(key, reason, "TLSv1.3, or TLSv1.2,TLSv1.3 (no pin)"), dropped=dropped)
    return VersionPin(pinned="TLSv1.3" if versions == ["TLSv1.3"] else None, dropped=dropped)


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

"""Why librdkafka could not verify a broker's certificate: Python's ``ssl`` names the cause, librdkafka does not.

Why: librdkafka reports every failed certificate check as "certificate verify failed: broker certificate could
not be verified, verify that ssl.ca.location is correctly configured", also when the certificate is trusted but
issued for another host, the case a user most needs told apart (the bootstrap address, not the CA, is wrong).
One handshake with the same trust anchors and hostname check, from Python, gets OpenSSL's own reason
("Hostname mismatch, certificate is not valid for 'kafka-1'"). No credential is sent: the handshake stops at the
server's certificate. Runs where the failure happened (driver or executor), after it happened, never before.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping

from mm2py.client_settings import TlsSettings


def load_trust_anchors(context: ssl.SSLContext, settings: Mapping[str, object]) -> None:
    """The CA certificates librdkafka's ``ssl.ca.location`` and ``ssl.ca.pem`` name, into ``context``, loaded as
    the batch path's client loads them (:meth:`TlsSettings.load_trust_anchors`)."""
    location, pem = settings.get("ssl.ca.location"), settings.get("ssl.ca.pem")
    trust = TlsSettings(ca_location=str(location) if location else None, ca_pem=str(pem) if pem else None)
    trust.load_trust_anchors(context)


def certificate_problem(settings: Mapping[str, object], timeout_s: float = 5.0) -> str | None:
    """OpenSSL's reason why the first bootstrap server's certificate fails verification, or None."""
    server = str(settings.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        return None
    host = host.strip("[]")
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = str(settings.get("ssl.endpoint.identification.algorithm", "https")) == "https"
        load_trust_anchors(context, settings)
        with (
            socket.create_connection((host, int(port)), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        return str(exc.verify_message or exc.reason)
    except (OSError, ValueError, ssl.SSLError):
        return None  # another problem, or none this time: librdkafka's own reason stands alone

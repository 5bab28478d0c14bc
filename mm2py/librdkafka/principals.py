"""Who a client is to the brokers' authorizer, named from its settings: a refusal line names that principal, so
the ACL to add is plain. Apart from the clients (no confluent-kafka import): the driver names the principals of a
flow's copy tasks, whose batch-path executors load no librdkafka."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def principal_of(settings: Mapping[str, Any]) -> str:
    """Who a client with these librdkafka settings is to the brokers' authorizer, as Kafka's default principal
    builder names it (DefaultKafkaPrincipalBuilder): a refusal line names it, so the ACL to add is plain.

    SASL/PLAIN and SCRAM: ``User:<username>``; GSSAPI: the Kerberos principal before the brokers'
    ``sasl.kerberos.principal.to.local.rules``; OAUTHBEARER: the token's subject; mTLS: the certificate's
    distinguished name (after ``ssl.principal.mapping.rules``); no login at all: ``User:ANONYMOUS``.
    """
    protocol = str(settings.get("security.protocol", "plaintext")).lower()
    mechanism = str(settings.get("sasl.mechanisms", settings.get("sasl.mechanism", "GSSAPI"))).upper()
    if protocol.startswith("sasl"):
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and settings.get("sasl.username"):
            return f"User:{settings['sasl.username']}"
        if mechanism == "GSSAPI":
            return f"the Kerberos principal {settings.get('sasl.kerberos.principal', 'kafkaclient')}"
        return f"the {mechanism} login's principal"
    if protocol == "ssl" and any(k in settings for k in ("ssl.certificate.location", "ssl.certificate.pem")):
        return "the TLS client certificate's principal"
    return "User:ANONYMOUS"

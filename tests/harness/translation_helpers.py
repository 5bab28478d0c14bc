"""Shared helpers of the client-settings translation tests (test_settings, test_jaas, ...)."""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.client_settings import ClientKind, ClientSettings, KeyIssue
from mm2py.config.client_keys.client_settings_reader import read_client_keys, read_client_settings

PASSWORD = "S3cr3t-Pa55word"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def client_keys(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[KeyIssue]]:
    """A client's keys as the configuration reads them: librdkafka's properties and every issue found."""
    keys = read_client_keys(java, kind)
    return keys.librdkafka, keys.issues


def translate(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[KeyIssue]]:
    return client_keys({"bootstrap.servers": "b1:9092", **java}, kind)


def client_settings(keys: Mapping[str, object], kind: ClientKind = "consumer") -> ClientSettings:
    """The typed settings a client with these keys (Java's or librdkafka's spelling) connects with."""
    return read_client_settings({key: str(value) for key, value in keys.items()}, kind)[0]


def sasl(mechanism: str, jaas: str, **extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas, **extra}


def only_issue(issues: list[KeyIssue]) -> KeyIssue:
    assert len(issues) == 1, issues
    return issues[0]

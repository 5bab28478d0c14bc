"""Shared helpers of the client-settings translation tests (test_settings, test_jaas, ...)."""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.librdkafka.settings import ClientKind, TranslationIssue, translate_client_config

PASSWORD = "S3cr3t-Pa55word"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def translate(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[TranslationIssue]]:
    return translate_client_config({"bootstrap.servers": "b1:9092", **java}, kind)


def sasl(mechanism: str, jaas: str, **extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas, **extra}


def only_issue(issues: list[TranslationIssue]) -> TranslationIssue:
    assert len(issues) == 1, issues
    return issues[0]

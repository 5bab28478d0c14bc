"""Java TLS stores -> librdkafka: which keystore and truststore types carry over, and how to convert the rest."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mm2py.kafka.settings import ClientKind, TranslationIssue, translate_client_config

PASSWORD = "S3cr3t-Pa55word"


def translate(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[TranslationIssue]]:
    return translate_client_config({"bootstrap.servers": "b1:9092", **java}, kind)


def only_issue(issues: list[TranslationIssue]) -> TranslationIssue:
    assert len(issues) == 1, issues
    return issues[0]


def test_pkcs12_keystore_and_pem_truststore_pass_through() -> None:
    out, issues = translate(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "pkcs12",
            "ssl.keystore.location": "/etc/kafka/client.p12",
            "ssl.keystore.password": PASSWORD,
            "ssl.key.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.endpoint.identification.algorithm": "HTTPS",
        }
    )
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092",
        "security.protocol": "SSL",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": PASSWORD,
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_a_p12_keystore_without_type_is_read_as_pkcs12_like_java_does() -> None:
    out, issues = translate({"security.protocol": "SSL", "ssl.keystore.location": "/k/client.P12"})
    assert (out["ssl.keystore.location"], issues) == ("/k/client.P12", [])


def test_inline_pem_keystore_and_truststore_become_librdkafka_pems() -> None:
    out, issues = translate(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAA\n-----END ENCRYPTED PRIVATE KEY-----",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----",
            "ssl.key.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\nCCC\n-----END CERTIFICATE-----",
        }
    )
    assert issues == []
    assert out["ssl.key.pem"].startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAA")
    assert out["ssl.certificate.pem"].endswith("BBB\n-----END CERTIFICATE-----")
    assert out["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----\nCCC")
    assert out["ssl.key.password"] == PASSWORD


def test_pem_keystore_file_is_both_key_and_certificate_location() -> None:
    out, issues = translate(
        {"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k/client.pem"}
    )
    assert (out["ssl.key.location"], out["ssl.certificate.location"], issues) == ("/k/client.pem", "/k/client.pem", [])


@pytest.mark.parametrize("declared", [{"ssl.keystore.type": "JKS"}, {}])
def test_jks_keystore_is_an_error_with_a_keytool_conversion_hint(declared: dict[str, str]) -> None:
    java = {"security.protocol": "SSL", "ssl.keystore.location": "/etc/kafka/client.jks", **declared}
    out, issues = translate({**java, "ssl.keystore.password": PASSWORD})
    issue = only_issue(issues)
    assert (issue.key, issue.severity, issue.value) == ("ssl.keystore.location", "error", "/etc/kafka/client.jks")
    assert "JKS" in issue.reason
    assert issue.allowed is not None
    assert (
        "keytool -importkeystore -srckeystore /etc/kafka/client.jks -destkeystore /etc/kafka/client.p12"
        in issue.allowed
    )
    assert "-deststoretype PKCS12" in issue.allowed and "ssl.keystore.type=PKCS12" in issue.allowed
    assert "ssl.keystore.location" not in out


@pytest.mark.parametrize("declared", [{"ssl.truststore.type": "jks"}, {}])
def test_jks_truststore_is_an_error_with_a_pem_export_hint(declared: dict[str, str]) -> None:
    java = {"security.protocol": "SASL_SSL", "ssl.truststore.location": "/etc/kafka/trust.jks", **declared}
    java |= {"sasl.mechanism": "PLAIN", "sasl.username": "u", "ssl.truststore.password": PASSWORD}
    out, issues = translate(java)
    issue = only_issue(issues)
    assert (issue.key, issue.severity) == ("ssl.truststore.location", "error")
    assert issue.allowed is not None
    assert "keytool -exportcert -rfc -keystore /etc/kafka/trust.jks -alias ALIAS -file ca.pem" in issue.allowed
    assert "keytool -list -rfc" in issue.allowed
    assert "ssl.truststore.type=PEM" in issue.allowed and "ssl.ca.location" in issue.allowed
    assert "ssl.ca.location" not in out


def test_pkcs12_truststore_is_an_error_with_an_openssl_hint() -> None:
    java = {"security.protocol": "SSL", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t/trust.p12"}
    issue = only_issue(translate(java)[1])
    assert (issue.key, issue.severity) == ("ssl.truststore.location", "error")
    assert issue.allowed is not None and "openssl pkcs12 -in /t/trust.p12 -nokeys -out ca.pem" in issue.allowed


def test_tls_protocol_choices_are_dropped_with_a_warning_as_librdkafka_negotiates() -> None:
    java = {"security.protocol": "SSL", "ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}
    out, issues = translate(java)
    assert sorted((i.key, i.severity) for i in issues) == [
        ("ssl.enabled.protocols", "warning"),
        ("ssl.protocol", "warning"),
    ]
    assert "ssl.protocol" not in out


def test_empty_endpoint_identification_means_none_and_unknown_ones_are_errors() -> None:
    assert (
        translate({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})[0][
            "ssl.endpoint.identification.algorithm"
        ]
        == "none"
    )
    issue = only_issue(translate({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"})[1])
    assert (issue.key, issue.severity) == ("ssl.endpoint.identification.algorithm", "error")


def test_cipher_suites_keep_java_names_but_not_tls13_ones() -> None:
    java = {
        "security.protocol": "SSL",
        "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    }
    out, issues = translate(java)
    assert out["ssl.cipher.suites"] == "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert only_issue(issues).key == "ssl.cipher.suites"

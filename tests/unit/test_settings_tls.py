"""Java TLS settings -> librdkafka: PEM stores, endpoint identification, protocols, cipher suites.

JKS, JCEKS and PKCS12 stores (read into memory) are in test_keystores.py."""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.librdkafka.settings import ClientKind, TranslationIssue, translate_client_config

PASSWORD = "S3cr3t-Pa55word"


def translate(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[TranslationIssue]]:
    return translate_client_config({"bootstrap.servers": "b1:9092", **java}, kind)


def only_issue(issues: list[TranslationIssue]) -> TranslationIssue:
    assert len(issues) == 1, issues
    return issues[0]


def test_pem_truststore_and_endpoint_identification_pass_through() -> None:
    out, issues = translate(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.endpoint.identification.algorithm": "HTTPS",
        }
    )
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092",
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }


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

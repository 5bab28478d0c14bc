"""Java TLS settings -> librdkafka: PEM stores, endpoint identification, protocols, cipher suites.

JKS, JCEKS and PKCS12 stores (read into memory) are in test_keystores.py."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from mm2py.client_settings import ClientKind, KeyIssue
from mm2py.config.client_keys.cipher_names import OPENSSL_NAMES
from mm2py.librdkafka.tls_versions import PIN_KEY
from tests.harness.translation_helpers import client_keys

PASSWORD = "S3cr3t-Pa55word"
SCRAM = {
    "sasl.mechanism": "SCRAM-SHA-256",
    "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="u" password="{PASSWORD}";',
}


def translate(java: Mapping[str, str], kind: ClientKind = "producer") -> tuple[dict[str, str], list[KeyIssue]]:
    return client_keys({"bootstrap.servers": "b1:9092", **java}, kind)


def only_issue(issues: list[KeyIssue]) -> KeyIssue:
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
    }  # https hostname checks: librdkafka's default, so not spelt out


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


def test_java_default_tls_versions_are_no_pin_and_no_issue() -> None:
    java = {"security.protocol": "SSL", "ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}
    out, issues = translate(java)
    assert issues == []
    assert not {"ssl.protocol", "ssl.enabled.protocols", PIN_KEY} & set(out)


def test_a_tls13_only_pin_travels_to_the_batch_path_in_the_settings() -> None:
    out, issues = translate({"security.protocol": "SASL_SSL", "ssl.enabled.protocols": "TLSv1.3", **SCRAM})
    assert issues == []
    assert out[PIN_KEY] == "TLSv1.3"


def test_a_pin_that_keeps_tls13_out_is_an_error_naming_why() -> None:
    for java in ({"ssl.enabled.protocols": "TLSv1.2"}, {"ssl.protocol": "TLSv1.2"}):
        _, issues = translate({"security.protocol": "SSL", **java})
        issue = only_issue(issues)
        assert (issue.key, issue.severity) == (next(iter(java)), "error")
        assert "librdkafka" in issue.reason and issue.allowed is not None and "TLSv1.3" in issue.allowed


def test_old_and_unknown_tls_versions() -> None:
    _, issues = translate({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.1,TLSv1.3"})
    assert [(i.key, i.severity) for i in issues] == [("ssl.enabled.protocols", "warning")]
    _, issues = translate({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.4"})
    assert only_issue(issues).severity == "error" and "TLSv1.4" in only_issue(issues).reason


def test_empty_endpoint_identification_means_none_and_unknown_ones_are_errors() -> None:
    assert (
        translate({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})[0][
            "ssl.endpoint.identification.algorithm"
        ]
        == "none"
    )
    issue = only_issue(translate({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"})[1])
    assert (issue.key, issue.severity) == ("ssl.endpoint.identification.algorithm", "error")


def test_java_cipher_suite_names_become_openssl_names_and_tls13_ones_are_only_warned_about() -> None:
    java = {
        "security.protocol": "SSL",
        "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, SSL_RSA_WITH_AES_128_CBC_SHA, TLS_EMPTY_RENEGOTIATION_INFO_SCSV",
    }
    out, issues = translate(java)
    assert out["ssl.cipher.suites"] == "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA"
    assert (only_issue(issues).key, only_issue(issues).severity) == ("ssl.cipher.suites", "warning")


def test_openssl_cipher_names_and_cipher_list_words_are_kept_as_written() -> None:
    out, issues = translate(
        {"security.protocol": "SSL", "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256:HIGH:!aNULL"}
    )
    assert out["ssl.cipher.suites"] == "ECDHE-RSA-AES128-GCM-SHA256:HIGH:!aNULL"
    assert issues == []


def test_an_unknown_cipher_suite_name_is_an_error_naming_it() -> None:
    java = {"security.protocol": "SSL", "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_NO_SUCH_SUITE"}
    _, issues = translate(java)
    issue = only_issue(issues)
    assert (issue.key, issue.severity) == ("ssl.cipher.suites", "error")
    assert "TLS_NO_SUCH_SUITE" in issue.reason and "TLS_ECDHE" not in issue.reason


def test_every_openssl_name_in_the_table_is_one_pythons_openssl_accepts_for_a_suite_of_its_own() -> None:
    # The IANA code point is the low 16 bits of OpenSSL's cipher id: no two Java names may land on one suite.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.set_ciphers("ALL:@SECLEVEL=0")
    by_name = {c["name"]: c["id"] & 0xFFFF for c in context.get_ciphers()}
    assert [name for name in OPENSSL_NAMES.values() if name not in by_name] == []
    assert len({by_name[name] for name in OPENSSL_NAMES.values()}) == len(OPENSSL_NAMES)

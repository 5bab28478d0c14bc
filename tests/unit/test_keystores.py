"""Java key and trust stores as MM2 users have them: read into PEM in memory, or refused with one clear line."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

from mm2py.client_settings import KeyIssue
from mm2py.librdkafka.settings import masked
from mm2py.secrets import MASK
from tests.harness.keystore_files import (
    Identity,
    identity,
    jks_keystore,
    jks_truststore,
    pkcs12_keystore,
    pkcs12_truststore,
)
from tests.harness.translation_helpers import client_keys

STORE_PASSWORD = "st0re-Pa55word"
KEY_PASSWORD = "k3y-Pa55word"


def translate(java: Mapping[str, str]) -> tuple[dict[str, str], list[KeyIssue]]:
    return client_keys({"bootstrap.servers": "b1:9093", "security.protocol": "SSL", **java}, "consumer")


def subjects(pem: str) -> list[str]:
    return [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(pem.encode())]


def public_key(owner: Identity) -> bytes:
    return owner.key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)


@pytest.fixture(scope="module")
def ca() -> Identity:
    return identity("ca")


@pytest.fixture(scope="module")
def other_ca() -> Identity:
    return identity("other-ca")


@pytest.fixture(scope="module")
def client() -> Identity:
    return identity("client")


@pytest.mark.parametrize("declared", [{"ssl.truststore.type": "JKS"}, {}], ids=["declared", "java-default"])
def test_a_jks_truststore_becomes_an_in_memory_ca_bundle_with_every_certificate(
    tmp_path: Path, ca: Identity, other_ca: Identity, declared: dict[str, str]
) -> None:
    store = jks_truststore(tmp_path / "trust.jks", STORE_PASSWORD, other_ca, ca)
    out, issues = translate(
        {"ssl.truststore.location": str(store), "ssl.truststore.password": STORE_PASSWORD, **declared}
    )
    assert issues == []
    assert sorted(subjects(out["ssl.ca.pem"])) == ["CN=ca", "CN=other-ca"]
    assert "ssl.ca.location" not in out and STORE_PASSWORD not in out.values()


def test_a_truststore_without_a_password_is_read_without_its_integrity_check_as_java_does(
    tmp_path: Path, ca: Identity
) -> None:
    store = jks_truststore(tmp_path / "trust.jks", STORE_PASSWORD, ca)
    out, issues = translate({"ssl.truststore.location": str(store)})
    assert (subjects(out["ssl.ca.pem"]), issues) == (["CN=ca"], [])


@pytest.mark.parametrize("name", ["trust.p12", "trust.jks"])  # Java's JKS type opens PKCS12 files as well
def test_a_pkcs12_truststore_is_read_whatever_its_file_is_called(tmp_path: Path, ca: Identity, name: str) -> None:
    store = pkcs12_truststore(tmp_path / name, STORE_PASSWORD, ca)
    out, issues = translate({"ssl.truststore.location": str(store), "ssl.truststore.password": STORE_PASSWORD})
    assert (subjects(out["ssl.ca.pem"]), issues) == (["CN=ca"], [])


def test_a_jks_keystore_with_its_own_key_password_becomes_an_in_memory_key_and_chain(
    tmp_path: Path, client: Identity
) -> None:
    store = jks_keystore(tmp_path / "client.jks", STORE_PASSWORD, KEY_PASSWORD, client)
    out, issues = translate(
        {"ssl.keystore.location": str(store), "ssl.keystore.password": STORE_PASSWORD, "ssl.key.password": KEY_PASSWORD}
    )
    assert issues == []
    key = load_pem_private_key(out["ssl.key.pem"].encode(), password=None)  # unencrypted: only in memory
    assert key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo) == public_key(client)
    assert subjects(out["ssl.certificate.pem"]) == ["CN=client"]
    # Nothing that points at the store or opens it reaches the client.
    assert not {"ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"} & set(out)


def test_without_a_key_password_the_store_password_opens_the_key_as_in_kafka(tmp_path: Path, client: Identity) -> None:
    store = jks_keystore(tmp_path / "client.jks", STORE_PASSWORD, STORE_PASSWORD, client)
    out, issues = translate({"ssl.keystore.location": str(store), "ssl.keystore.password": STORE_PASSWORD})
    assert issues == [] and out["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")


def test_a_pkcs12_keystore_is_read_into_memory_as_well(tmp_path: Path, client: Identity) -> None:
    store = pkcs12_keystore(tmp_path / "client.p12", STORE_PASSWORD, client)
    out, issues = translate({"ssl.keystore.location": str(store), "ssl.keystore.password": STORE_PASSWORD})
    assert issues == []
    assert subjects(out["ssl.certificate.pem"]) == ["CN=client"] and "ssl.keystore.location" not in out


def test_secret_material_is_masked_when_settings_are_printed(tmp_path: Path, ca: Identity, client: Identity) -> None:
    trust = jks_truststore(tmp_path / "trust.jks", STORE_PASSWORD, ca)
    keys = jks_keystore(tmp_path / "client.jks", STORE_PASSWORD, KEY_PASSWORD, client)
    out, _ = translate(
        {
            "ssl.truststore.location": str(trust),
            "ssl.keystore.location": str(keys),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.key.password": KEY_PASSWORD,
        }
    )
    shown = masked(out)
    assert shown["ssl.key.pem"] == MASK and shown["ssl.certificate.pem"] == MASK and shown["ssl.ca.pem"] == MASK


def one_error(issues: list[KeyIssue]) -> KeyIssue:
    assert [i.severity for i in issues] == ["error"], issues
    text = f"{issues[0].key} {issues[0].value} {issues[0].reason} {issues[0].allowed}"
    assert STORE_PASSWORD not in text and KEY_PASSWORD not in text and "wrong-" not in text
    return issues[0]


def test_a_truststore_that_does_not_exist_is_one_error_naming_its_location(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.jks")
    issue = one_error(translate({"ssl.truststore.location": missing, "ssl.truststore.password": STORE_PASSWORD})[1])
    assert (issue.key, issue.value) == ("ssl.truststore.location", missing)
    assert issue.reason == "no such file (a JKS truststore, Java's default type)"


@pytest.mark.parametrize("writer", [jks_truststore, pkcs12_truststore], ids=["jks", "pkcs12"])
def test_a_wrong_truststore_password_is_one_error_on_the_password_key(
    tmp_path: Path, ca: Identity, writer: object
) -> None:
    store = writer(tmp_path / "trust.jks", STORE_PASSWORD, ca)  # type: ignore[operator]
    issue = one_error(translate({"ssl.truststore.location": str(store), "ssl.truststore.password": "wrong-pw"})[1])
    assert (issue.key, issue.value) == ("ssl.truststore.password", MASK)
    assert "wrong password" in issue.reason


def test_a_wrong_key_password_is_one_error_on_ssl_key_password(tmp_path: Path, client: Identity) -> None:
    store = jks_keystore(tmp_path / "client.jks", STORE_PASSWORD, KEY_PASSWORD, client)
    issue = one_error(
        translate(
            {
                "ssl.keystore.location": str(store),
                "ssl.keystore.password": STORE_PASSWORD,
                "ssl.key.password": "wrong-pw",
            }
        )[1]
    )
    assert (issue.key, issue.value) == ("ssl.key.password", MASK)
    assert issue.reason.startswith("does not decrypt the private key")


def test_a_keystore_with_two_keys_is_refused_because_a_client_presents_one(
    tmp_path: Path, client: Identity, ca: Identity
) -> None:
    store = jks_keystore(tmp_path / "two.jks", STORE_PASSWORD, STORE_PASSWORD, client, ca)
    issue = one_error(translate({"ssl.keystore.location": str(store), "ssl.keystore.password": STORE_PASSWORD})[1])
    assert issue.key == "ssl.keystore.location" and "2 private keys (aliases: ca, client)" in issue.reason


def test_a_file_that_is_no_store_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.jks"
    garbage.write_text("not a key store")
    issue = one_error(translate({"ssl.truststore.location": str(garbage), "ssl.truststore.password": "x"})[1])
    assert issue.key in ("ssl.truststore.location", "ssl.truststore.password")


def test_a_store_type_nobody_reads_is_an_error_listing_the_types_that_are_read(tmp_path: Path) -> None:
    issue = one_error(translate({"ssl.truststore.type": "BCFKS", "ssl.truststore.location": "/t/trust.bcfks"})[1])
    assert (issue.key, issue.allowed) == ("ssl.truststore.type", "JKS, JCEKS, PKCS12, PEM")

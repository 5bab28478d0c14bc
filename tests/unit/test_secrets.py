"""Secret masking: which keys are secret, redaction of free text, and the logging filter."""

from __future__ import annotations

import io
import logging

import pytest

from mm2py.errors import ConfigError
from mm2py.secrets import MASK, RedactingFilter, Redactor, is_secret_key, mask_value
from tests.harness.translation_helpers import client_keys

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="mirror-maker" password="Pa55 w\\"ord;x";'
)


@pytest.mark.parametrize(
    "key",
    [
        "ssl.key.password",
        "dc1.producer.ssl.key.password",
        "A->B.sasl.jaas.config",
        "sasl.jaas.config",
        "basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "ssl.keystore.key",
        "ssl.key.pem",
        "ssl.certificate.pem",
        "ssl.keystore.password",
        "backup.consumer.ssl.truststore.password",
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.config",
        "ssl_key",
        "aws.secret",
        "access.token",
        "config.providers.vault.param.token",
        "bearerToken",
        "clientSecret",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "aws.secret.access.key",
    ],
)
def test_keys_ending_in_a_secret_part_are_secret_whatever_the_prefix(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "bootstrap.servers",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.truststore.type",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.mechanism",
        "key.serializer",
        "tokenauth",
        "username",
        "sasl.username",
        "password.file",
        "",
    ],
)
def test_keys_that_only_mention_a_secret_word_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_mask_value_hides_secret_values_and_keeps_the_rest() -> None:
    assert mask_value("B.sasl.jaas.config", JAAS) == MASK == "[hidden]"
    assert mask_value("B.bootstrap.servers", "b1:9092") == "b1:9092"


def test_redactor_removes_every_known_secret_wherever_it_occurs() -> None:
    redactor = Redactor(["first-secret", "second-secret"])
    text = "a first-secret, b second-secret and xfirst-secretx"
    assert redactor.redact(text) == f"a {MASK}, b {MASK} and x{MASK}x"


def test_redactor_merges_overlapping_secrets_so_no_tail_survives() -> None:
    redactor = Redactor(["abcdef", "defghi"])
    assert redactor.redact("xxabcdefghiyy") == f"xx{MASK}yy"
    assert "ghi" not in redactor.redact("abcdefghi")


def test_redactor_prefers_the_longer_of_nested_secrets() -> None:
    redactor = Redactor(["hunter2pass", "hunter2passphrase"])
    assert redactor.redact("got hunter2passphrase!") == f"got {MASK}!"


def test_redactor_ignores_empty_and_very_short_values() -> None:
    redactor = Redactor(["", "ab", "xyz"])
    assert redactor.redact("ab xyz partition 0") == "ab xyz partition 0"


def test_redactor_remembers_a_padded_secret_with_and_without_its_padding() -> None:
    redactor = Redactor([" padded-secret "])
    assert redactor.redact("value=padded-secret.") == f"value={MASK}."


def test_redactor_masks_jaas_passwords_it_was_not_told_about() -> None:
    text = 'X required username="bob" password="s3cr3t value" clientSecret=\'abc\\\'def\';'
    redacted = Redactor().redact(text)
    assert redacted == f'X required username="bob" password="{MASK}" clientSecret=\'{MASK}\';'


def test_redactor_masks_secret_properties_lines_to_the_end_of_the_line() -> None:
    text = "bootstrap.servers = b1:9092\nB.ssl.key.password = my pass phrase\nsasl.password=abc"
    assert Redactor().redact(text) == (
        f"bootstrap.servers = b1:9092\nB.ssl.key.password = {MASK}\nsasl.password={MASK}"
    )


def test_redactor_masks_secret_entries_of_dict_reprs_and_url_credentials() -> None:
    text = "{'sasl.password': 'abc', 'client.id': 'c1'} fetched https://user:pw123@idp.example/token"
    assert Redactor().redact(text) == (
        f"{{'sasl.password': '{MASK}', 'client.id': 'c1'}} fetched https://user:{MASK}@idp.example/token"
    )


@pytest.mark.parametrize(
    "text",
    [
        "export the CA certificates as PEM: keytool -exportcert -rfc",
        "Password: must be at least 8 characters",
        "unexpected token: '}' at offset 12",
        "Token: refreshed",
        "PEM: keytool -list -rfc\nToken: expired",  # whole lines too
    ],
)
def test_redactor_leaves_prose_where_a_secret_word_is_followed_by_a_colon(text: str) -> None:
    assert Redactor().redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("login with password: hunter2 failed", f"login with password: {MASK} failed"),
        ("secret: abc123", f"secret: {MASK}"),
        ("ssl.key.pem: -----BEGIN", f"ssl.key.pem: {MASK}"),
        ("auth clientSecret: abc, access_token: xyz", f"auth clientSecret: {MASK}, access_token: {MASK}"),
        ('{"password": "x", "token": "t0k3n"}', f'{{"password": "{MASK}", "token": "{MASK}"}}'),
        ("{'pem': 'abc'}", f"{{'pem': '{MASK}'}}"),
        ("set PEM=abc Token=xyz Password=pw", f"set PEM={MASK} Token={MASK} Password={MASK}"),
        ("sasl.password=x", f"sasl.password={MASK}"),
        ("SSL_KEY_PASSWORD: abc", f"SSL_KEY_PASSWORD: {MASK}"),
    ],
)
def test_redactor_still_masks_secret_keys_before_a_colon_when_they_look_like_keys(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


def test_redactor_masks_colon_properties_lines_of_config_keys_but_not_prose_lines() -> None:
    text = "ssl.keystore.password: two words\npassword: hunter2\nPassword: see the docs"
    assert Redactor().redact(text) == f"ssl.keystore.password: {MASK}\npassword: {MASK}\nPassword: see the docs"


def test_store_problems_survive_redaction_unchanged() -> None:
    # Our own error messages are prose about stores and passwords; redacting them must not garble the advice.
    java = {
        "security.protocol": "SSL",
        "ssl.truststore.location": "/etc/t.jks",
        "ssl.keystore.location": "/k.jks",
        "ssl.truststore.type": "BCFKS",
    }
    _, issues = client_keys(java, "consumer")
    messages = [str(ConfigError(i.reason, key=i.key, value=i.value, allowed=i.allowed)) for i in issues]
    assert len(messages) == 2 and "no such file" in messages[0] and "JKS, JCEKS, PKCS12, PEM" in messages[1]
    assert [Redactor().redact(message) for message in messages] == messages


def test_redactor_leaves_non_secret_assignments_alone_and_is_idempotent() -> None:
    text = "sasl.oauthbearer.token.endpoint.url=https://idp/token topic=orders sasl.password=[hidden]"
    assert Redactor().redact(text) == text
    once = Redactor(["hunter22"]).redact("password=hunter22 other")
    assert Redactor(["hunter22"]).redact(once) == once


def test_from_properties_collects_secret_values_and_jaas_passwords() -> None:
    props = {"B.sasl.jaas.config": JAAS, "B.ssl.key.password": "keypass1", "B.client.id": "mm2-client"}
    redactor = Redactor.from_properties(props)
    message = 'auth failed for user mirror-maker with Pa55 w"ord;x (key keypass1) from mm2-client'
    # The user name is the principal a refusal names: not a secret.
    assert redactor.redact(message) == f"auth failed for user mirror-maker with {MASK} (key {MASK}) from mm2-client"
    assert redactor.redact(f"config was {JAAS}") == f"config was {MASK}"


def test_redacting_filter_formats_then_redacts_so_caplog_never_sees_a_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.handler.addFilter(RedactingFilter(Redactor(["hunter22-secret"])))
    logger = logging.getLogger("mm2py.test.secrets")
    with caplog.at_level(logging.INFO, logger="mm2py.test.secrets"):
        logger.info("connecting with %s and %s", "hunter22-secret", "sasl.password=other1")
        try:
            raise RuntimeError("login failed: hunter22-secret rejected")
        except RuntimeError:
            logger.exception("task failed")
    assert "hunter22-secret" not in caplog.text
    assert "other1" not in caplog.text
    assert f"connecting with {MASK} and sasl.password={MASK}" in caplog.text
    assert f"RuntimeError: login failed: {MASK} rejected" in caplog.text


def test_redacting_filter_on_a_handler_covers_records_from_child_loggers() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(Redactor.from_properties({"sasl.jaas.config": JAAS})))
    parent = logging.getLogger("mm2py.test.parent")
    parent.addHandler(handler)
    parent.setLevel(logging.INFO)
    try:
        logging.getLogger("mm2py.test.parent.child").info("effective config: %r", {"sasl.jaas.config": JAAS})
    finally:
        parent.removeHandler(handler)
    output = stream.getvalue()
    assert "Pa55" not in output and "mirror-maker" not in output
    assert output.startswith("effective config: {'sasl.jaas.config': '[hidden]")


def test_redacting_filter_survives_a_malformed_logging_call() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "only %s %s", ("hunter22-secret",), None)
    assert RedactingFilter(Redactor(["hunter22-secret"])).filter(record)
    assert "hunter22-secret" not in record.getMessage()

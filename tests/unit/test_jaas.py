"""sasl.jaas.config: parsed the way Java's JaasConfig parses it, and each login module's options carried over
to librdkafka (or refused with a reason that never echoes the secret string)."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest

from mm2py.config.client_keys import login
from mm2py.config.client_keys.jaas import JaasSyntaxError, parse_jaas
from mm2py.secrets import MASK
from tests.harness.translation_helpers import KRB5, OAUTH, PASSWORD, PLAIN, SCRAM, only_issue, sasl, translate


@pytest.fixture
def gssapi(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pretend librdkafka has Kerberos support (the PyPI wheel has none)."""
    monkeypatch.setattr(login, "gssapi_available", lambda: True)
    yield


# --- the parser alone ---------------------------------------------------------------------------------------
def test_parse_jaas_returns_the_module_and_its_options_in_order() -> None:
    module, options = parse_jaas(f'{SCRAM} required username="mm2" password={PASSWORD} tokenauth=false;')
    assert module == SCRAM
    assert list(options.items()) == [("username", "mm2"), ("password", PASSWORD), ("tokenauth", "false")]


def test_parse_jaas_accepts_every_control_flag_in_any_case_and_no_options() -> None:
    for flag in ("required", "Requisite", "SUFFICIENT", "optional"):
        assert parse_jaas(f"{PLAIN} {flag};") == (PLAIN, {})


def test_parse_jaas_lets_an_unquoted_value_start_with_a_digit() -> None:
    assert parse_jaas(f"{OAUTH} required unsecuredLoginLifetimeSeconds=3600;")[1] == {
        "unsecuredLoginLifetimeSeconds": "3600"
    }


@pytest.mark.parametrize(
    "jaas",
    [
        f"{PLAIN};",
        f"{PLAIN} required username;",
        f"{PLAIN} required =x;",
        f"{PLAIN} required password={PASSWORD} /* never closed",
        ";",
    ],
)
def test_parse_jaas_errors_never_quote_the_string(jaas: str) -> None:
    with pytest.raises(JaasSyntaxError) as caught:
        parse_jaas(jaas)
    assert PASSWORD not in str(caught.value)
    assert isinstance(caught.value, ValueError)


# --- login modules -> librdkafka ----------------------------------------------------------------------------
def test_plain_login_module_becomes_username_and_password() -> None:
    out, issues = translate(sasl("PLAIN", f'{PLAIN} required username="mm2" password="{PASSWORD}";'))
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "mm2",
        "sasl.password": PASSWORD,
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_module_becomes_username_and_password(mechanism: str) -> None:
    out, issues = translate(sasl(mechanism, f"{SCRAM} required username=mm2 password={PASSWORD};"))
    assert issues == []
    assert (out["sasl.mechanism"], out["sasl.username"], out["sasl.password"]) == (mechanism, "mm2", PASSWORD)


@pytest.mark.parametrize(
    ("jaas", "username", "password"),
    [
        (f'{PLAIN} required username="mirror maker" password="a b;c";', "mirror maker", "a b;c"),
        (f'{PLAIN} required username="mm2" password="say \\"hi\\"";', "mm2", 'say "hi"'),
        (f"{PLAIN} required username='mm2' password='it\\'s; ok';", "mm2", "it's; ok"),
        (f"{PLAIN} REQUIRED\n  username=mm2_user-1\n  password=p.w$d-1_x;", "mm2_user-1", "p.w$d-1_x"),
        (f'{PLAIN} required /* who */ username="u" // why\n password="p\\\\q";', "u", "p\\q"),
        (f'{PLAIN} required username="\\101\\tz" password="x";', "A\tz", "x"),
    ],
)
def test_jaas_values_are_read_like_java_reads_them(jaas: str, username: str, password: str) -> None:
    out, issues = translate(sasl("PLAIN", jaas))
    assert issues == []
    assert (out["sasl.username"], out["sasl.password"]) == (username, password)


def test_mechanism_that_does_not_match_the_login_module_is_an_error() -> None:
    out, issues = translate(sasl("SCRAM-SHA-512", f'{PLAIN} required username="mm2" password="{PASSWORD}";'))
    issue = only_issue(issues)
    assert (issue.key, issue.severity, issue.allowed) == ("sasl.mechanism", "error", "sasl.mechanism=PLAIN")
    assert "PlainLoginModule" in issue.reason
    assert "sasl.password" not in out


def test_unset_mechanism_means_gssapi_as_in_java_and_mismatches_a_plain_module() -> None:
    java = sasl("PLAIN", f'{PLAIN} required username="mm2" password="{PASSWORD}";')
    del java["sasl.mechanism"]
    issue = only_issue(translate(java)[1])
    assert (issue.key, issue.severity, issue.allowed) == ("sasl.mechanism", "error", "sasl.mechanism=PLAIN")
    assert "GSSAPI" in issue.reason


def test_oauthbearer_with_a_token_endpoint_becomes_oidc() -> None:
    jaas = f'{OAUTH} required clientId="mm2" clientSecret="{PASSWORD}" scope="kafka" extension_logicalCluster=lkc-1;'
    url = "https://idp.example/oauth2/token"
    out, issues = translate(sasl("OAUTHBEARER", jaas, **{"sasl.oauthbearer.token.endpoint.url": url}))
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "mm2",
        "sasl.oauthbearer.client.secret": PASSWORD,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        "sasl.oauthbearer.token.endpoint.url": url,
    }


def test_oauthbearer_unsecured_jwt_becomes_librdkafkas_unsecure_jwt() -> None:
    jaas = (
        f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",read,write" '
        'unsecuredLoginLifetimeSeconds="600" unsecuredLoginExtension_traceId="123";'
    )
    out, issues = translate(sasl("OAUTHBEARER", jaas))
    assert issues == []
    assert (out["enable.sasl.oauthbearer.unsecure.jwt"], out["sasl.oauthbearer.config"]) == (
        "true",
        "principal=alice scope=read,write lifeSeconds=600 extension_traceId=123",
    )


def test_oauthbearer_without_endpoint_or_unsecured_subject_is_an_error() -> None:
    out, issues = translate(sasl("OAUTHBEARER", f'{OAUTH} required clientId="mm2" clientSecret="{PASSWORD}";'))
    issue = only_issue(issues)
    assert (issue.key, issue.severity, issue.value) == ("sasl.jaas.config", "error", MASK)
    assert "sasl.oauthbearer.method" not in out


def test_oauthbearer_token_file_is_an_error() -> None:
    jaas = f'{OAUTH} required clientId="mm2" clientSecret="{PASSWORD}";'
    java = sasl("OAUTHBEARER", jaas, **{"sasl.oauthbearer.token.endpoint.url": "file:///var/run/token"})
    issue = only_issue(translate(java)[1])
    assert (issue.key, issue.severity) == ("sasl.oauthbearer.token.endpoint.url", "error")


def test_kerberos_login_module_becomes_keytab_and_principal(gssapi: None) -> None:
    jaas = f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/security/mm2.keytab" principal="mm2/h@EX.COM";'
    out, issues = translate(sasl("GSSAPI", jaas, **{"sasl.kerberos.service.name": "kafka"}))
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.keytab": "/etc/security/mm2.keytab",
        "sasl.kerberos.principal": "mm2/h@EX.COM",
        "sasl.kerberos.service.name": "kafka",
    }


def test_kerberos_without_librdkafka_support_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login, "gssapi_available", lambda: False)
    jaas = f'{KRB5} required useKeyTab=true keyTab="/k.keytab" principal="mm2@EX.COM";'
    issue = only_issue(translate(sasl("GSSAPI", jaas))[1])
    assert (issue.key, issue.severity) == ("sasl.mechanism", "error")
    assert "Kerberos" in issue.reason


def test_kerberos_refusal_names_the_librdkafka_build_both_paths_and_what_works_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(login, "gssapi_available", lambda: False)
    jaas = f'{KRB5} required useKeyTab=true storeKey=true keyTab="/k.keytab" principal="mm2@EX.COM";'
    issue = only_issue(translate(sasl("GSSAPI", jaas, **{"sasl.kerberos.service.name": "kafka"}))[1])
    assert f"librdkafka {confluent_kafka.libversion()[0]} was built without it (no cyrus-sasl)" in issue.reason
    assert "either copy path" in issue.reason
    assert issue.allowed is not None and "SCRAM-SHA-512" in issue.allowed and "librdkafka with GSSAPI" in issue.allowed


def test_the_pypi_librdkafka_really_lacks_gssapi_as_the_check_reports() -> None:
    try:
        confluent_kafka.Producer({"builtin.features": "sasl_gssapi", "log_level": 0})
        supported = True
    except confluent_kafka.KafkaException:
        supported = False
    assert login.gssapi_available() is supported


@pytest.mark.parametrize(
    ("jaas", "fragment"),
    [
        (f'{PLAIN} required username="mm2" password="{PASSWORD}"', "terminated"),
        (f"{PLAIN} required username= ;", "name=value"),
        (f'{PLAIN} required username="mm2 password={PASSWORD};', "not closed"),
        (f"{PLAIN} mandatory username=mm2 password={PASSWORD};", "control flag"),
        (f"{PLAIN} required username=mm2 password={PASSWORD}; {PLAIN} required username=b password=c;", "2 login"),
        (f"{PLAIN} required username=mm2 password=a@b;", "unexpected character"),
        ("", "credentials"),
    ],
)
def test_unparsable_jaas_is_an_error_that_never_echoes_it(jaas: str, fragment: str) -> None:
    out, issues = translate(sasl("PLAIN", jaas))
    issue = only_issue(issues)
    assert (issue.key, issue.severity) == ("sasl.jaas.config", "error")
    assert fragment in issue.reason
    assert "sasl.username" not in out


def test_unknown_login_module_is_an_error() -> None:
    jaas = "com.example.kafka.CustomLoginModule required;"
    issue = only_issue(translate(sasl("PLAIN", jaas))[1])
    assert (issue.key, issue.severity, issue.value) == ("sasl.jaas.config", "error", MASK)
    assert "CustomLoginModule" in issue.reason


def test_scram_delegation_tokens_and_missing_passwords_are_errors() -> None:
    token = translate(sasl("SCRAM-SHA-256", f"{SCRAM} required username=t password={PASSWORD} tokenauth=true;"))
    missing = translate(sasl("PLAIN", f"{PLAIN} required username=mm2;"))
    assert "tokenauth" in only_issue(token[1]).reason
    assert "password" in only_issue(missing[1]).reason


def test_librdkafka_credentials_may_replace_jaas() -> None:
    java = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": PASSWORD,
    }
    out, issues = translate(java)
    assert (out["sasl.username"], out["sasl.password"], issues) == ("u", PASSWORD, [])

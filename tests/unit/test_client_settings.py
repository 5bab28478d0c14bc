"""The typed, library-neutral ClientSettings: read once with the configuration, carried to executors, asked by the
copy-path decision, adapted by the batch path's client alone."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

from mm2py.client_settings import OidcLogin, PasswordLogin, TlsSettings
from mm2py.config import MirrorMakerConfig
from mm2py.config.client_keys.client_settings_reader import read_client_keys, read_client_settings
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.copy_path import choose_copy_path
from mm2py.engine.spec import copy_spec
from mm2py.executor.batch_fetching import fetcher_settings, partition_fetch_bytes
from mm2py.executor.batch_producer import max_batch_bytes, sender_settings
from mm2py.executor.contract import ControlEndpoint
from mm2py.librdkafka.tls_versions import PIN_KEY
from tests.harness.translation_helpers import client_settings

SECRETS = ("pl4in-Secret", "oidc-Secret", "-----BEGIN PRIVATE KEY-----x", "k3y-Secret")


def flow(extra: str = "") -> FlowConfig:
    text = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
    mm = MirrorMakerConfig(parse_properties(text + extra, "mm2.properties"))
    return build_flow_config(mm, Flow("a", "b"))


def test_java_keys_become_one_typed_login_and_tls_material_on_every_client_of_the_cluster() -> None:
    f = flow(
        "a.security.protocol = SASL_SSL\na.sasl.mechanism = SCRAM-SHA-512\n"
        'a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
        'password="pl4in-Secret";\n'
        "a.ssl.truststore.type = PEM\na.ssl.truststore.location = /etc/ca.pem\n"
        "a.ssl.endpoint.identification.algorithm =\n"
        "a.consumer.request.timeout.ms = 7000\na.consumer.retry.backoff.ms = 250\n"
    )
    source = f.source_consumer.connection
    assert source.bootstrap_servers == ("a:9092",) and source.security_protocol == "SASL_SSL"
    assert source.login == PasswordLogin("SCRAM-SHA-512", "u", "pl4in-Secret")
    assert source.tls == TlsSettings(ca_location="/etc/ca.pem", endpoint_identification="none")
    assert (source.request_timeout_ms, source.retry_backoff_ms) == (7000, 250)
    assert source.backoff().initial_s == 0.25
    assert f.source_admin.connection.login == source.login  # every client of cluster a logs in alike
    assert f.target_producer.connection.security_protocol == "PLAINTEXT" and f.target_producer.connection.tls is None
    assert source.other_security_keys == () and source.problems == ()


def test_secrets_never_show_in_a_repr_and_the_object_travels_to_executors() -> None:
    settings = client_settings(
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "id",
            "sasl.oauthbearer.client.secret": "oidc-Secret",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----x",
            "ssl.key.pem": "-----BEGIN PRIVATE KEY-----x",
            "ssl.key.password": "k3y-Secret",
            "ssl.engine.passphrase": "pl4in-Secret",  # a key the object has no field for is kept masked when secret
        }
    )
    assert isinstance(settings.login, OidcLogin) and settings.login.client_secret == "oidc-Secret"
    assert pickle.loads(pickle.dumps(settings)) == settings
    f = flow(
        "a.security.protocol = SASL_PLAINTEXT\na.sasl.mechanism = PLAIN\n"
        'a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="pl4in-Secret";\n'
    )
    shown = repr(settings) + repr(f.source_consumer) + repr(copy_spec(f, choose_copy_path(f)))
    assert not [secret for secret in SECRETS if secret in shown]


def test_what_the_batch_path_cannot_honour_is_reported_not_dropped() -> None:
    settings = client_settings(
        {
            "bootstrap.servers": "a:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "socket.timeout.ms": "soon",
            "ssl.engine.id": "x",
        }
    )
    assert settings.login is None
    assert [(p.key, p.reason) for p in settings.problems] == [
        ("socket.timeout.ms", "not a whole number of milliseconds"),
        ("sasl.username", "PLAIN needs sasl.username and sasl.password"),
    ]
    assert settings.other_security_keys == (("ssl.engine.id", "x"),)


def test_choosing_the_copy_path_asks_the_typed_object() -> None:
    f = flow()
    assert choose_copy_path(f).batch
    odd = dataclasses.replace(f.source_consumer.connection, other_security_keys=(("ssl.engine.id", "pkcs11"),))
    changed = dataclasses.replace(f, source_consumer=dataclasses.replace(f.source_consumer, connection=odd))
    path = choose_copy_path(changed)
    assert not path.batch and "ssl.engine.id" in path.describe()
    pinned = dataclasses.replace(
        f.target_producer.connection, security_protocol="SSL", tls=TlsSettings(minimum_version="TLSv1.3")
    )
    assert choose_copy_path(
        dataclasses.replace(f, target_producer=dataclasses.replace(f.target_producer, connection=pinned))
    ).batch


def test_the_batch_path_client_loads_neither_librdkafka_nor_the_configuration() -> None:
    """The wire client adapts ClientSettings and nothing else: no librdkafka key reaches it."""
    probe = "import sys, json, mm2py.wire.connection; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout))
    assert "mm2py.wire.connection_settings" in loaded and "mm2py.client_settings" in loaded
    assert not {m for m in loaded if m.startswith(("mm2py.librdkafka", "mm2py.config", "confluent_kafka"))}


def test_the_batch_sender_reads_the_producer_s_timeouts_and_sizes_from_the_typed_object() -> None:
    """Java keys and librdkafka's own aliases, librdkafka's spelling winning as in librdkafka;
    unset or not a whole number: the Java producer's defaults (mm2py's own linger.ms and batch.size)."""
    spec = copy_spec(flow(), choose_copy_path(flow()))
    java_names = client_settings(
        {
            "bootstrap.servers": "b:1",
            "request.timeout.ms": "7000",
            "socket.timeout.ms": "9000",  # the connection's timeout; a Produce waits request.timeout.ms
            "delivery.timeout.ms": "soon",
            "message.timeout.ms": "45000",
            "linger.ms": "20",
            "batch.size": "65536",
            "message.max.bytes": "2000000",
            "retry.backoff.ms": "250",
        },
        "producer",
    )
    sender = sender_settings(spec, java_names, "b", lingers=True)
    assert (sender.request_timeout_s, sender.delivery_timeout_s, sender.linger_s) == (7.0, 45.0, 0.02)
    assert (sender.batch_bytes, sender.merge_up_to, sender.retry_backoff_s) == (65536, 512 * 1024, 0.25)
    assert java_names.request_timeout_ms == 9000 and max_batch_bytes(java_names) == 2_000_000
    defaults = sender_settings(spec, client_settings({"bootstrap.servers": "b:1", "socket.timeout.ms": "3000"}), "b")
    assert (defaults.request_timeout_s, defaults.delivery_timeout_s, defaults.linger_s) == (3.0, 120.0, 0.0)
    assert defaults.batch_bytes == defaults.merge_up_to == 500_000  # mm2py's batch.size, capped by the merge size


def test_the_batch_fetcher_sends_the_source_consumer_s_fetch_keys() -> None:
    """fetch.min.bytes, fetch.max.wait.ms (librdkafka: fetch.wait.max.ms), fetch.max.bytes and
    max.partition.fetch.bytes (librdkafka: fetch.message.max.bytes), as the Java consumer's FetchConfig reads them;
    unset, mm2py's defaults: a range's wait (100 ms) or a following task's (500 ms), one byte, 64 MB and 4 MB."""
    keys = (
        "a.consumer.fetch.min.bytes = 65536\na.consumer.fetch.max.wait.ms = 250\n"
        "a.consumer.fetch.max.bytes = 8388608\na.consumer.max.partition.fetch.bytes = 1048576\n"
    )
    consumer = copy_spec(flow(keys), choose_copy_path(flow(keys))).consumer_connection
    for following in (False, True):
        tuned = fetcher_settings(consumer, read_committed=False, following=following, stall_timeout_s=60)
        assert (tuned.max_wait_ms, tuned.min_bytes, tuned.max_bytes) == (250, 65536, 8 << 20)
    assert partition_fetch_bytes(consumer) == 1 << 20
    native = client_settings(
        {
            "bootstrap.servers": "a:1",
            "fetch.wait.max.ms": "40",
            "fetch.max.wait.ms": "900",
            "fetch.message.max.bytes": 7,
        }
    )
    assert fetcher_settings(native, read_committed=False, following=True, stall_timeout_s=60).max_wait_ms == 40
    assert partition_fetch_bytes(native) == 7
    plain = copy_spec(flow(), choose_copy_path(flow())).consumer_connection
    ranges, follows = (
        fetcher_settings(plain, read_committed=True, following=following, stall_timeout_s=60)
        for following in (False, True)
    )
    assert (ranges.max_wait_ms, follows.max_wait_ms, ranges.stall_timeout_s, follows.stall_timeout_s) == (
        100,
        500,
        60,
        float("inf"),
    )
    assert (ranges.min_bytes, ranges.max_bytes, partition_fetch_bytes(plain)) == (1, 64 << 20, 4 << 20)
    assert client_settings({"bootstrap.servers": "a:1", "fetch.min.bytes": "9"}, "producer").fetch_min_bytes is None


@pytest.mark.parametrize(("keys", "interval_s"), [("", 0.02), ("mm2py.continuous.fetch.min.interval.ms = 0\n", 0.0)])
def test_a_following_task_spaces_its_fetches_by_the_flow_s_interval_and_a_range_does_not(
    keys: str, interval_s: float
) -> None:
    ranges = copy_spec(flow(keys), choose_copy_path(flow(keys)))
    follows = dataclasses.replace(ranges, control=ControlEndpoint("http://driver:1/report", "t"))
    assert (ranges.following, follows.following) == (False, True)
    assert (ranges.fetch_min_interval_s, follows.fetch_min_interval_s) == (0.0, interval_s)
    spaced = fetcher_settings(
        follows.consumer_connection,
        read_committed=False,
        following=follows.following,
        stall_timeout_s=60,
        min_interval_s=follows.fetch_min_interval_s,
    )
    assert spaced.min_interval_s == interval_s


@pytest.mark.parametrize(
    ("following", "keys", "linger_s"),
    [
        (False, "", 0.010),  # a range: mm2py's copy linger
        (True, "", 0.0),  # following with spaced fetches: the interval gathers, the sender does not wait
        (True, "mm2py.continuous.fetch.min.interval.ms = 0\n", 0.010),  # fetches not spaced: the linger gathers
        (True, "b.producer.linger.ms = 7\n", 0.007),  # the user's linger.ms wins
    ],
)
def test_a_following_task_that_spaces_its_fetches_does_not_linger_unless_told_to(
    following: bool, keys: str, linger_s: float
) -> None:
    spec = copy_spec(flow(keys), choose_copy_path(flow(keys)))
    if following:
        spec = dataclasses.replace(spec, control=ControlEndpoint("http://driver:1/report", "t"))
    assert sender_settings(spec, spec.producer_connection, "b", lingers=True).linger_s == linger_s
    assert sender_settings(spec, spec.producer_connection, "b").linger_s == 0.0  # a recording never lingers


_PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pl4in-Secret";'
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
_KRB5 = "com.sun.security.auth.module.Krb5LoginModule required"


@pytest.mark.parametrize(
    "java",
    [
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": _PLAIN_JAAS},
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": f'{_OAUTH} clientId="c" clientSecret="oidc-Secret" scope="s" extension_lc="x";',
        },
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{_OAUTH} unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",a,b" '
            'unsecuredLoginLifetimeSeconds="60";',
        },
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.jaas.config": f'{_KRB5} useKeyTab=true keyTab="/k.keytab" principal="mm2@EX.COM" serviceName="kfk";',
        },
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/etc/me.pem",
            "ssl.key.password": "k3y-Secret",
            "ssl.endpoint.identification.algorithm": "",
            "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "ssl.enabled.protocols": "TLSv1.3",
        },
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.certificate.location": "/etc/me.crt",
            "ssl.key.location": "/etc/me.key",
            "ssl.crl.location": "/etc/crl.pem",
            "enable.ssl.certificate.verification": "FALSE",
        },
    ],
    ids=["plain", "oidc", "unsecured-token", "kerberos", "java-tls-keys", "librdkafka-tls-keys"],
)
def test_librdkafka_is_given_exactly_what_the_typed_settings_hold(java: dict[str, str]) -> None:
    """Both client stacks connect from one reading: the librdkafka properties rendered from the typed settings, read
    back as keys, make the same typed settings (nothing librdkafka gets is missing from what the batch path gets,
    and nothing is added)."""
    keys = read_client_keys({"bootstrap.servers": "a:9092", **java}, "consumer")
    rendered = dict(keys.librdkafka)
    if rendered.pop(PIN_KEY, None) is not None:  # librdkafka has no version pin; the driver checks it apart
        rendered["ssl.enabled.protocols"] = keys.connection.tls.minimum_version if keys.connection.tls else ""
    again = read_client_settings(rendered, "consumer")[0]
    assert again == keys.connection
    assert keys.connection.problems == () and keys.connection.other_security_keys == ()
    assert (keys.connection.login is not None) == java["security.protocol"].startswith("SASL")

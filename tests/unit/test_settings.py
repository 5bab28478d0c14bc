"""Java client settings -> librdkafka settings: pass-through, renames, dropped keys, and no secret in any issue.

SASL/JAAS is tested in test_jaas.py, TLS stores in test_settings_tls.py, and that the installed librdkafka
accepts every emitted key in test_client_keys.py."""

from __future__ import annotations

import pytest

from mm2py.client_settings import ClientKind
from mm2py.librdkafka.settings import masked
from mm2py.secrets import MASK
from tests.harness.translation_helpers import OAUTH, PASSWORD, PLAIN, only_issue, sasl, translate


# --- pass-through and renames -------------------------------------------------------------------------------
def test_keys_librdkafka_knows_by_the_same_name_pass_through_unchanged() -> None:
    java = {
        "client.id": "mm2|dc1->dc2|task-0",
        "acks": "all",
        "linger.ms": "5",
        "batch.size": "65536",
        "compression.type": "zstd",
        "max.in.flight.requests.per.connection": "5",
        "retries": "10",
        "retry.backoff.ms": "100",
        "delivery.timeout.ms": "120000",
        "transactional.id": "mm2-tx",
        "transaction.timeout.ms": "60000",
        "reconnect.backoff.ms": "50",
        "reconnect.backoff.max.ms": "1000",
        "connections.max.idle.ms": "540000",
        "request.timeout.ms": "30000",
    }
    out, issues = translate(java)
    assert issues == []
    assert out == {"bootstrap.servers": "b1:9092", **java}


def test_consumer_keys_pass_through_for_consumers() -> None:
    java = {
        "group.id": "mm2",
        "group.instance.id": "mm2-0",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
        "session.timeout.ms": "45000",
        "heartbeat.interval.ms": "3000",
        "max.poll.interval.ms": "300000",
        "fetch.min.bytes": "1",
        "fetch.max.bytes": "52428800",
        "max.partition.fetch.bytes": "1048576",
        "client.rack": "rack-a",
    }
    out, issues = translate(java, "consumer")
    assert issues == []
    assert out == {"bootstrap.servers": "b1:9092", **java}


@pytest.mark.parametrize(
    ("key", "value", "target", "expected"),
    [
        ("max.request.size", "2097152", "message.max.bytes", "2097152"),
        ("buffer.memory", "33554432", "queue.buffering.max.kbytes", "32768"),
        ("buffer.memory", "33554433", "queue.buffering.max.kbytes", "32769"),
        ("buffer.memory", "1", "queue.buffering.max.kbytes", "1"),
        ("metadata.max.age.ms", "300000", "topic.metadata.refresh.interval.ms", "300000"),
        ("send.buffer.bytes", "131072", "socket.send.buffer.bytes", "131072"),
        ("send.buffer.bytes", "-1", "socket.send.buffer.bytes", "0"),
        ("receive.buffer.bytes", "-1", "socket.receive.buffer.bytes", "0"),
        ("compression.zstd.level", "3", "compression.level", "3"),
    ],
)
def test_producer_keys_librdkafka_names_differently_are_renamed(
    key: str, value: str, target: str, expected: str
) -> None:
    out, issues = translate({key: value, "compression.type": "zstd"})
    assert issues == []
    assert out[target] == expected
    assert key not in out


def test_fetch_max_wait_ms_becomes_fetch_wait_max_ms() -> None:
    out, issues = translate({"fetch.max.wait.ms": "250"}, "consumer")
    assert (out.get("fetch.wait.max.ms"), "fetch.max.wait.ms" in out, issues) == ("250", False, [])


@pytest.mark.parametrize("kind", ["consumer", "admin"])
def test_request_timeout_is_the_socket_timeout_outside_producers(kind: ClientKind) -> None:
    out, issues = translate({"request.timeout.ms": "20000"}, kind)
    assert (out.get("socket.timeout.ms"), "request.timeout.ms" in out, issues) == ("20000", False, [])


def test_java_auto_offset_reset_none_is_librdkafka_error() -> None:
    out, _ = translate({"auto.offset.reset": "none"}, "consumer")
    assert out["auto.offset.reset"] == "error"


def test_assignor_classes_become_librdkafka_names_without_mixing_protocols() -> None:
    out, issues = translate(
        {
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor, "
            "org.apache.kafka.clients.consumer.StickyAssignor, "
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        },
        "consumer",
    )
    assert out["partition.assignment.strategy"] == "range"
    assert [i.severity for i in issues] == ["warning", "warning"]
    assert "StickyAssignor" in issues[0].reason and "eager and cooperative" in issues[1].reason


def test_compression_level_of_another_codec_is_dropped_with_a_warning() -> None:
    out, issues = translate({"compression.type": "lz4", "compression.gzip.level": "9"})
    assert "compression.level" not in out
    assert only_issue(issues).key == "compression.gzip.level"


def test_values_are_normalised_the_way_java_reads_them() -> None:
    out, issues = translate(
        {
            "bootstrap.servers": " b1:9092 , b2:9092 ,",
            "security.protocol": "ssl",
            "enable.idempotence": "TRUE",
            "client.id": " TRUE ",
        }
    )
    assert issues == []
    assert out == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SSL",
        "enable.idempotence": "true",
        "client.id": "TRUE",
    }


def test_an_unknown_security_protocol_is_an_error() -> None:
    out, issues = translate({"security.protocol": "TLS"})
    issue = only_issue(issues)
    assert (issue.severity, issue.key, issue.value, "security.protocol" in out) == (
        "error",
        "security.protocol",
        "TLS",
        False,
    )
    assert issue.allowed == "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"


def test_explicit_librdkafka_key_wins_over_a_translated_one() -> None:
    out, issues = translate({"buffer.memory": "1048576", "queue.buffering.max.kbytes": "4096"})
    assert out["queue.buffering.max.kbytes"] == "4096"
    issue = only_issue(issues)
    assert (issue.key, issue.severity) == ("buffer.memory", "warning")


def test_librdkafka_only_properties_are_accepted_as_they_are() -> None:
    out, issues = translate({"fetch.queue.backoff.ms": "10", "statistics.interval.ms": "0"}, "consumer")
    assert (out["fetch.queue.backoff.ms"], out["statistics.interval.ms"], issues) == ("10", "0", [])


# --- dropped keys -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    [
        "key.serializer",
        "value.deserializer",
        "interceptor.classes",
        "partitioner.class",
        "metric.reporters",
        "metrics.num.samples",
        "max.block.ms",
        "max.poll.records",
        "default.api.timeout.ms",
        "key.converter.schemas.enable",
    ],
)
def test_java_only_keys_are_dropped_with_a_warning(key: str) -> None:
    out, issues = translate({key: "org.example.Thing"}, "consumer")
    issue = only_issue(issues)
    assert (issue.key, issue.severity, key in out) == (key, "warning", False)
    assert "dropped" in issue.reason


def test_java_only_keys_with_an_empty_value_are_dropped_silently() -> None:
    out, issues = translate({"interceptor.classes": "", "metric.reporters": ""})
    assert (out, issues) == ({"bootstrap.servers": "b1:9092"}, [])


def test_unknown_keys_are_dropped_with_a_warning_so_typos_show() -> None:
    out, issues = translate({"linger.msec": "5"})
    issue = only_issue(issues)
    assert (issue.key, issue.severity, "linger.msec" in out) == ("linger.msec", "warning", False)
    assert "typo" in issue.reason


def test_values_of_unknown_keys_are_hidden_as_they_may_be_misspelt_secrets() -> None:
    java = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u"}
    issue = only_issue(translate({**java, "sasl.jaas.confg": f"{PLAIN} required password={PASSWORD};"})[1])
    assert (issue.key, issue.value) == ("sasl.jaas.confg", MASK)


@pytest.mark.parametrize(
    ("kind", "key", "scope"),
    [
        ("consumer", "acks", "producer"),
        ("consumer", "max.request.size", "producer"),
        ("producer", "group.id", "consumer"),
        ("admin", "enable.idempotence", "producer"),
        ("admin", "fetch.max.wait.ms", "consumer"),
    ],
)
def test_keys_for_another_kind_of_client_are_dropped_with_a_warning(kind: ClientKind, key: str, scope: str) -> None:
    out, issues = translate({key: "1"}, kind)
    issue = only_issue(issues)
    assert (issue.key, issue.severity) == (key, "warning")
    assert f"{scope}-only" in issue.reason
    assert out == {"bootstrap.servers": "b1:9092"}


def test_custom_authentication_classes_are_errors_but_kafka_builtins_are_not() -> None:
    _, issues = translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f"{OAUTH} required clientId=mm2 clientSecret={PASSWORD};",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginCallbackHandler",
            "sasl.client.callback.handler.class": "com.example.VaultCallbackHandler",
            "ssl.engine.factory.class": "com.example.HsmEngineFactory",
        }
    )
    assert sorted((i.key, i.severity) for i in issues) == [
        ("sasl.client.callback.handler.class", "error"),
        ("ssl.engine.factory.class", "error"),
    ]


def test_tls_and_sasl_keys_are_ignored_when_the_protocol_does_not_use_them() -> None:
    out, issues = translate(
        {
            "ssl.truststore.location": "/etc/kafka/truststore.jks",
            "sasl.jaas.config": "not even JAAS",
            "security.protocol": "PLAINTEXT",
        }
    )
    assert (out, issues) == ({"bootstrap.servers": "b1:9092"}, [])  # PLAINTEXT: librdkafka's default


# --- secrets never leak -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "java",
    [
        sasl("SCRAM-SHA-512", f'{PLAIN} required username="mm2" password="{PASSWORD}";'),
        sasl("PLAIN", f'{PLAIN} required username="mm2" password="{PASSWORD}"'),
        sasl("PLAIN", f"{PLAIN} required username=mm2 password={PASSWORD} @;"),
        sasl("PLAIN", f'com.example.Custom required password="{PASSWORD}";'),
        sasl("OAUTHBEARER", f'{OAUTH} required clientSecret="{PASSWORD}";'),
        sasl("OAUTHBEARER", f'{OAUTH} required unsecuredLoginStringClaim_sub="{PASSWORD} x";'),
        sasl("PLAIN", f'{PLAIN} required username="mm2" password="{PASSWORD}";', **{"sasl.password": "other-pass"}),
        {
            "security.protocol": "SSL",
            "ssl.keystore.location": "/k.jks",
            "ssl.keystore.password": PASSWORD,
            "ssl.truststore.location": "/t.p12",
            "ssl.truststore.password": PASSWORD,
        },
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/k.p12",
            "ssl.keystore.password": "another-pass",
            "ssl.key.password": PASSWORD,
        },
        {"security.protocol": "SSL", "ssl.keystore.type": "JKS", "ssl.keystore.key": PASSWORD},
        {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.password": PASSWORD},
        {"sasl.oauthbearer.client.secret": PASSWORD, "client.secret": PASSWORD, "x.password": PASSWORD},
    ],
)
def test_no_issue_ever_contains_a_secret(java: dict[str, str]) -> None:
    out, issues = translate(java, "consumer")
    assert issues, "each of these configs has something to report"
    for issue in issues:
        assert PASSWORD not in repr(issue)
    assert PASSWORD not in repr(masked(out))


def test_masked_hides_every_secret_setting_for_logs() -> None:
    out, _ = translate(sasl("PLAIN", f'{PLAIN} required username="mm2" password="{PASSWORD}";'))
    assert masked(out)["sasl.password"] == MASK
    assert masked(out)["sasl.username"] == "mm2"
    assert out["sasl.password"] == PASSWORD  # masking copies

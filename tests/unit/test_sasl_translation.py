"""SASL from an MM2 properties file to real librdkafka clients: ``dc1.sasl.jaas.config`` at cluster level.

test_jaas.py covers reading JAAS strings and test_client_keys.py constructs clients from a translated map.
What is left is the whole path a user takes: the properties reader (``\\`` line continuations, its own escapes),
the ``dc1.`` prefix reaching every client of the source cluster and none of the target's, the exact settings
in the FlowConfig clients, and confluent-kafka accepting them — including librdkafka's own parse of an
unsecured-JWT ``sasl.oauthbearer.config``, which happens only when the client first serves its queue.
No broker can authenticate here (docs/test-broker.md, *SASL*), so nothing connects: bootstrap is 127.0.0.1:1.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from mm2py.config import FlowConfig, load
from mm2py.control.copy_path import choose_copy_path
from mm2py.errors import ConfigError
from mm2py.wire.connection_settings import wire_config

PASSWORD = "S3cr3t-Pa55word"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SOURCE = "127.0.0.1:1"
TOKEN_URL = "https://127.0.0.1:1/oauth2/token"


@dataclass(frozen=True)
class Case:
    """Cluster-level lines for dc1, and the SASL settings librdkafka must get from them."""

    lines: str
    expected: dict[str, str]
    secret: str
    unsecured_jwt: bool = False


CASES = {
    "PLAIN": Case(
        "dc1.security.protocol = SASL_SSL\n"
        "dc1.sasl.mechanism = PLAIN\n"
        f'dc1.sasl.jaas.config = {PLAIN} required username="mm2" password="{PASSWORD}";\n',
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "mm2", "sasl.password": PASSWORD},
        PASSWORD,
    ),
    "SCRAM-SHA-256": Case(
        "dc1.security.protocol = sasl_plaintext\n"
        "dc1.sasl.mechanism = SCRAM-SHA-256\n"
        f"dc1.sasl.jaas.config = {SCRAM} required username=mm2 password={PASSWORD};\n",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "mm2",
            "sasl.password": PASSWORD,
        },
        PASSWORD,
    ),
    # Spread over lines the way MM2 files usually are; "\\\\" in the file is "\\" to JAAS, which reads "\".
    "SCRAM-SHA-512": Case(
        "dc1.security.protocol = SASL_SSL\n"
        "dc1.sasl.mechanism = SCRAM-SHA-512\n"
        f"dc1.sasl.jaas.config = {SCRAM} required \\\n"
        '    username="mirror maker" \\\n'
        f'    password="{PASSWORD}\\\\\\\\x;y";\n',
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "mirror maker",
            "sasl.password": f"{PASSWORD}\\x;y",
        },
        PASSWORD,
    ),
    "OAUTHBEARER-oidc": Case(
        "dc1.security.protocol = SASL_SSL\n"
        "dc1.sasl.mechanism = OAUTHBEARER\n"
        f"dc1.sasl.oauthbearer.token.endpoint.url = {TOKEN_URL}\n"
        f'dc1.sasl.jaas.config = {OAUTH} required clientId="mm2" clientSecret="{PASSWORD}" scope="kafka";\n',
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "mm2",
            "sasl.oauthbearer.client.secret": PASSWORD,
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
        },
        PASSWORD,
    ),
    "OAUTHBEARER-oidc-kafka-4.1-keys": Case(
        "dc1.security.protocol = SASL_SSL\n"
        "dc1.sasl.mechanism = OAUTHBEARER\n"
        f"dc1.sasl.oauthbearer.token.endpoint.url = {TOKEN_URL}\n"
        "dc1.sasl.oauthbearer.jwt.retriever.class = "
        "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever\n"
        "dc1.sasl.oauthbearer.client.credentials.client.id = mm2\n"
        f"dc1.sasl.oauthbearer.client.credentials.client.secret = {PASSWORD}\n"
        "dc1.sasl.oauthbearer.scope = kafka\n"
        f"dc1.sasl.jaas.config = {OAUTH} required ;\n",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "mm2",
            "sasl.oauthbearer.client.secret": PASSWORD,
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
        },
        PASSWORD,
    ),
    "OAUTHBEARER-unsecured": Case(
        "dc1.security.protocol = SASL_PLAINTEXT\n"
        "dc1.sasl.mechanism = OAUTHBEARER\n"
        f'dc1.sasl.jaas.config = {OAUTH} required unsecuredLoginStringClaim_sub="mm2" '
        'unsecuredLoginListClaim_scope="|read|write" unsecuredLoginLifetimeSeconds="600";\n',
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=mm2 scope=read,write lifeSeconds=600",
        },
        "unsecuredLoginStringClaim_sub",
        unsecured_jwt=True,
    ),
}


def load_flow(tmp_path: Path, case: Case) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = dc1, target\ndc1.bootstrap.servers = {SOURCE}\ntarget.bootstrap.servers = "
        f"127.0.0.1:2\ndc1->target.enabled = true\n{case.lines}"
    )
    loaded = load(path, environ={})
    assert loaded.warnings == ()
    (flow,) = loaded.flows
    return flow


def client_settings(flow: FlowConfig, attribute: str) -> dict[str, str]:
    client = getattr(flow, attribute)
    assert client is not None, attribute
    settings: dict[str, str] = client.settings()
    return settings


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_cluster_level_jaas_becomes_exact_librdkafka_settings_for_the_source_consumer(
    tmp_path: Path, case: Case
) -> None:
    flow = load_flow(tmp_path, case)
    assert client_settings(flow, "source_consumer") == {
        **case.expected,
        "bootstrap.servers": SOURCE,
        "client.id": "dc1->target|MirrorSourceConnector|replication-consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_source_client_authenticates_and_no_target_client_inherits_it(tmp_path: Path, case: Case) -> None:
    flow = load_flow(tmp_path, case)
    for attribute in ("source_admin", "offset_syncs_producer"):  # offset syncs live on the source by default
        settings = client_settings(flow, attribute)
        assert {k: settings.get(k) for k in case.expected} == case.expected, attribute
    for attribute in ("target_admin", "target_consumer", "target_producer"):
        settings = client_settings(flow, attribute)
        assert not [k for k in settings if k.startswith(("sasl.", "security.", "enable.sasl"))], attribute
    assert case.secret not in repr(flow)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_confluent_kafka_clients_accept_the_settings_without_connecting(tmp_path: Path, case: Case) -> None:
    flow = load_flow(tmp_path, case)
    capture, errors = _Capture(), list[confluent_kafka.KafkaError]()
    logger = logging.getLogger(f"mm2py.test.sasl.{id(capture)}")
    logger.addHandler(capture)
    extra: dict[str, Any] = {"logger": logger, "error_cb": errors.append}
    try:
        producer = confluent_kafka.Producer({**client_settings(flow, "offset_syncs_producer"), **extra})
        consumer = confluent_kafka.Consumer({**client_settings(flow, "source_consumer"), "group.id": "g", **extra})
        admin = AdminClient({**client_settings(flow, "source_admin"), **extra})
        if case.unsecured_jwt:
            # The first poll runs librdkafka's unsecured-token builder; a config it cannot parse fails here.
            producer.poll(0)
            admin.poll(0)
        consumer.close()
        producer.flush(0)
    finally:
        logger.removeHandler(capture)
    assert [m for m in capture.messages if "CONFWARN" in m] == []
    # Fetching an OIDC token from the unreachable endpoint fails too, but that is not refusing the settings.
    refused = {confluent_kafka.KafkaError._AUTHENTICATION, confluent_kafka.KafkaError._INVALID_ARG}
    assert [e for e in errors if e.code() in refused and "connect to 127.0.0.1:1" not in e.str()] == []


def test_kafka_41_oidc_keys_keep_a_flow_on_the_batch_path(tmp_path: Path) -> None:
    flow = load_flow(tmp_path, CASES["OAUTHBEARER-oidc-kafka-4.1-keys"])
    assert choose_copy_path(flow).describe() == "batch"
    config = wire_config("dc1", flow.source_consumer.connection)
    assert config["sasl_mechanism"] == "OAUTHBEARER"
    assert config["sasl_oauth_token_source"].client_id == "mm2"


def test_a_kafka_41_token_retriever_librdkafka_lacks_is_refused_naming_the_key(tmp_path: Path) -> None:
    lines = CASES["OAUTHBEARER-oidc-kafka-4.1-keys"].lines.replace(
        "ClientCredentialsJwtRetriever", "JwtBearerJwtRetriever"
    )
    with pytest.raises(ConfigError) as caught:
        load_flow(tmp_path, Case(lines, {}, PASSWORD))
    assert "sasl.oauthbearer.jwt.retriever.class" in str(caught.value)
    assert PASSWORD not in str(caught.value)

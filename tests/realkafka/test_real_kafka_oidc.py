"""OAUTHBEARER with OIDC client credentials against real Kafka, on both copy paths: the broker validates every token
with Kafka's own ``OAuthBearerValidatorCallbackHandler`` against the JWKS of a provider the test serves
(tests/harness/oidc_provider.py), and mm2py's clients fetch their tokens from that provider's token endpoint.

The properties are what an MM2 user writes: the source cluster logs in through the JAAS options
(``clientId``/``clientSecret``/``scope``), the target through Kafka 4.1's ``sasl.oauthbearer.jwt.retriever.class``
and ``sasl.oauthbearer.client.credentials.*`` keys, so each run proves both forms. A refusal of the copy task's
own login needs a setting only that client gets: ``src.consumer.*`` (see test_real_kafka_logins.py).

Tokens that expire mid-run: the provider issues tokens that live 5 s, the broker holds each session to its token's
expiry, and a continuous run must copy records produced after the copy client's first token expired. The copy
client logs in with a client id of its own, so the token endpoint's grants to it are counted apart.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness.flows_helpers import start_run
from tests.harness.kafka_harness import Record, end_offsets, list_topics, make_records, produce, read_all
from tests.harness.oidc_provider import SCOPE, OidcProvider
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.secured_flows import (
    COPY_PATHS,
    assert_no_secret,
    cluster_lines,
    copy_once,
    refused_run,
    secrets_of,
    write_flow,
)

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

CLIENT_ID = "mm2py-mirror"
COPY_CLIENT_ID = "mm2py-copy-task"
EXPIRED_CLIENT_ID = "mm2py-expired-tokens"
SHORT_LIFETIME_S = 5
SECRET = secrets.token_urlsafe(16)
REFUSED_WITHIN_S = 30
DEFAULT_LIFETIME_S = 300
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
RETRIEVER = "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever"


@pytest.fixture(scope="module")
def oidc() -> Iterator[OidcProvider]:
    clients = {CLIENT_ID: SECRET, EXPIRED_CLIENT_ID: SECRET}
    with OidcProvider(clients, token_lifetime_s=DEFAULT_LIFETIME_S, expired=frozenset({EXPIRED_CLIENT_ID})) as provider:
        yield provider


@pytest.fixture(scope="module")
def oidc_kafka(
    kafka_runtime: KafkaRuntime, oidc: OidcProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """One real Kafka node whose SASL_PLAINTEXT listener takes OAUTHBEARER only, validated against ``oidc``;
    PLAINTEXT stays open for the harness's own calls and inter-broker traffic."""
    with KafkaCluster(
        tmp_path_factory.mktemp("real-kafka-oidc"),
        1,
        runtime=kafka_runtime,
        listeners=("SASL_PLAINTEXT",),
        broker_config=oidc.broker_settings(),
        jvm_options=oidc.jvm_options(),
    ) as cluster:
        yield cluster


def jaas_login(provider: OidcProvider, secret: str = SECRET) -> dict[str, str]:
    """Java client settings with the client credentials in the JAAS options (Kafka 3.1+)."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
        "sasl.login.callback.handler.class": LOGIN_HANDLER,
        "sasl.jaas.config": jaas_config(secret),
    }


def jaas_config(secret: str, client_id: str = CLIENT_ID) -> str:
    return f'{OAUTH_MODULE} required clientId="{client_id}" clientSecret="{secret}" scope="{SCOPE}";'


def retriever_login(provider: OidcProvider) -> dict[str, str]:
    """Java client settings with Kafka 4.1's token retriever and client-credentials keys."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
        "sasl.login.callback.handler.class": LOGIN_HANDLER,
        "sasl.oauthbearer.jwt.retriever.class": RETRIEVER,
        "sasl.oauthbearer.client.credentials.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
        "sasl.oauthbearer.scope": SCOPE,
        "sasl.jaas.config": f"{OAUTH_MODULE} required ;",
    }


def copied(cluster: KafkaCluster, topic: str) -> int:
    """Records in the remote topic ``src.<topic>``; 0 before it exists."""
    try:
        return sum(end_offsets(cluster.bootstrap, f"src.{topic}").values())
    except Exception:  # the remote topic may not exist yet
        return 0


def copy_grants_since(provider: OidcProvider, moment: float) -> bool:
    return any(grant.client_id == COPY_CLIENT_ID for grant in provider.issued_since(moment))


def record_keys(records: list[Record]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.partition, r.key, r.value) for r in records]


def oidc_flow(cluster: KafkaCluster, provider: OidcProvider) -> tuple[str, str]:
    """Source lines (JAAS form) and target lines (Kafka 4.1 form), both on the OAUTHBEARER listener."""
    bootstrap = cluster.bootstrap_for("SASL_PLAINTEXT")
    return cluster_lines("src", bootstrap, jaas_login(provider)), cluster_lines(
        "tgt", bootstrap, retriever_login(provider)
    )


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_oidc_client_credentials_in_either_form_copy_every_record_on_each_copy_path(
    oidc_kafka: KafkaCluster, oidc: OidcProvider, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    topic = oidc_kafka.create_topic(unique_topic("orders"), partitions=2)
    source, target = oidc_flow(oidc_kafka, oidc)
    started = time.time()

    result = copy_once(tmp_path, oidc_kafka, topic, source, target, copy_path)

    grants = oidc.issued_since(started)
    copied = len(read_all(oidc_kafka.bootstrap, f"src.{topic}"))
    print(f"path={copy_path} copied={copied} tokens issued={len(grants)}")  # the figures, with -s
    assert grants and all(grant.client_id == CLIENT_ID for grant in grants)
    assert_no_secret(result, oidc_kafka, SECRET)


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_a_wrong_client_secret_on_the_copy_client_is_refused_within_30_s_naming_the_token_endpoint(
    oidc_kafka: KafkaCluster, oidc: OidcProvider, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    wrong = secrets.token_urlsafe(16)
    source, target = oidc_flow(oidc_kafka, oidc)
    source += f"src.consumer.sasl.jaas.config = {jaas_config(wrong)}\n"
    topic = oidc_kafka.create_topic(unique_topic("orders"), partitions=1)

    refusal = refused_run(tmp_path, oidc_kafka, topic, source, target, copy_path)

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    # The token endpoint's own answer (its OAuth error code), on the copy task's cluster.
    assert "src" in line and "OAUTHBEARER token" in line and "invalid_client" in line, line
    assert "Traceback" not in refusal.result.stderr
    assert_no_secret(refusal.result, oidc_kafka, SECRET, wrong)
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"
    assert [g for g in oidc.grants if not g.issued], "the token endpoint never saw the wrong secret"


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_tokens_that_expire_mid_run_are_fetched_again_and_every_record_is_copied(
    oidc_kafka: KafkaCluster, oidc: OidcProvider, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    # The copy task's consumer logs in as a client id of its own, so its grants are counted apart from the driver's.
    oidc.clients[COPY_CLIENT_ID] = SECRET
    topic = oidc_kafka.create_topic(unique_topic("orders"), partitions=2)
    source, target = oidc_flow(oidc_kafka, oidc)
    source += f"src.consumer.sasl.jaas.config = {jaas_config(SECRET, COPY_CLIENT_ID)}\n"
    config = write_flow(
        tmp_path / "mm2.properties", topic, source, target + "consumer.poll.timeout.ms = 200\n", copy_path
    )
    first, second = make_records(60, partitions=2, seed=11), make_records(60, partitions=2, seed=12)
    log = tmp_path / "run.log"
    oidc.token_lifetime_s = SHORT_LIFETIME_S
    try:
        produce(oidc_kafka.bootstrap, topic, first)
        started = time.time()
        proc = start_run(config, log)
        try:
            poll_until(lambda: copied(oidc_kafka, topic) >= 60, 120, "the first 60 records", process=proc, log=log)
            # A copy-client token issued a full lifetime after its first: by then the first token has expired, and
            # the broker (connections.max.reauth.ms) no longer serves a session it opened.
            first_copy_token = min(g.at for g in oidc.issued_since(started) if g.client_id == COPY_CLIENT_ID)
            poll_until(
                lambda: copy_grants_since(oidc, first_copy_token + SHORT_LIFETIME_S),
                60,
                "a token fetched after the copy client's first one expired",
                process=proc,
                log=log,
            )
            produce(oidc_kafka.bootstrap, topic, second)
            poll_until(lambda: copied(oidc_kafka, topic) >= 120, 60, "the second 60 records", process=proc, log=log)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    finally:
        oidc.token_lifetime_s = DEFAULT_LIFETIME_S

    output = log.read_text()
    copy_grants = [g for g in oidc.issued_since(started) if g.client_id == COPY_CLIENT_ID]
    span = copy_grants[-1].at - copy_grants[0].at
    print(
        f"path={copy_path} copied={copied(oidc_kafka, topic)} copy-client tokens={len(copy_grants)} over {span:.1f} s"
    )
    assert f"path={copy_path}" in output, output[-4000:]
    assert len(copy_grants) > 1
    assert sorted(record_keys(read_all(oidc_kafka.bootstrap, f"src.{topic}"))) == sorted(record_keys(first + second))
    for secret in (SECRET, *secrets_of(oidc_kafka)):
        assert secret not in output


def test_a_wrong_client_secret_for_the_whole_cluster_stops_the_run_before_any_copy(
    oidc_kafka: KafkaCluster, oidc: OidcProvider, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    # The driver's admin clients (librdkafka) log in first, so they meet the refusal before any copy task runs.
    wrong = secrets.token_urlsafe(16)
    bootstrap = oidc_kafka.bootstrap_for("SASL_PLAINTEXT")
    source = cluster_lines("src", bootstrap, jaas_login(oidc, wrong))
    target = cluster_lines("tgt", bootstrap, retriever_login(oidc))
    topic = oidc_kafka.create_topic(unique_topic("orders"), partitions=1)

    refusal = refused_run(tmp_path, oidc_kafka, topic, source, target, "batch")

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    assert "src" in line and "invalid_client" in line, line
    assert_no_secret(refusal.result, oidc_kafka, SECRET, wrong)
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"
    assert f"src.{topic}" not in list_topics(oidc_kafka.bootstrap)  # not even the remote topic was created


@pytest.mark.parametrize("copy_path", COPY_PATHS)
def test_an_expired_token_on_the_copy_client_is_refused_within_30_s_naming_the_expiry_or_the_brokers_answer(
    oidc_kafka: KafkaCluster, oidc: OidcProvider, unique_topic: Callable[..., str], tmp_path: Path, copy_path: str
) -> None:
    # The token endpoint grants the copy client's credentials, but every token it issues expired an hour ago:
    # the broker refuses the login, and no fresh token can cure it.
    source, target = oidc_flow(oidc_kafka, oidc)
    source += f"src.consumer.sasl.jaas.config = {jaas_config(SECRET, EXPIRED_CLIENT_ID)}\n"
    topic = oidc_kafka.create_topic(unique_topic("orders"), partitions=1)
    started = time.time()

    refusal = refused_run(tmp_path, oidc_kafka, topic, source, target, copy_path)

    assert refusal.result.returncode == 3, refusal.result.stdout + refusal.result.stderr
    line = refusal.error_line
    print(f"refused in {refusal.seconds:.1f} s, exit {refusal.result.returncode}: {line}")  # the figures, with -s
    # The batch path sends the token and names the broker's answer (`invalid_token`); librdkafka checks `exp`
    # itself and refuses to send it (`Must supply an unexpired token`).
    assert "src" in line and "OAUTHBEARER" in line, line
    assert '"invalid_token"' in line if copy_path == "batch" else "unexpired token" in line, line
    assert "Traceback" not in refusal.result.stderr
    assert_no_secret(refusal.result, oidc_kafka, SECRET)
    assert refusal.seconds < REFUSED_WITHIN_S, f"{refusal.seconds:.1f} s: {refusal.result.stderr[-3000:]}"
    expired_grants = [g for g in oidc.issued_since(started) if g.client_id == EXPIRED_CLIENT_ID]
    assert expired_grants, "the copy client never asked for a token"

"""AWS MSK IAM on the batch path, from an MM2 properties file to a login judged by AWS's own signer.

The batch path's connection is built exactly as an executor builds it (the file -> FlowConfig -> librdkafka
settings -> wire settings -> KafkaConnection) and logs in to a fake MSK broker (tests/harness/fake_msk_broker.py)
over TLS; the broker checks the SaslAuthenticate payload with botocore's SigV4 signer and the credentials the
test put in the environment or in an AWS profile. No AWS service is reached: this is not a proof against MSK.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.credentials import Credentials

from mm2py.config import load
from mm2py.config.flow import build_flow_config
from mm2py.config.mirror_maker import MirrorMakerConfig
from mm2py.config.problems import ProblemSink
from mm2py.errors import ConfigError, ReplicationError
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.connection_settings import wire_config
from tests.harness.fake_msk_broker import HOST, FakeMskBroker, Verdict, check_msk_payload
from tests.harness.mm2py_cli import mm2py
from tests.harness.tls_proxy import Certificates, make_certificates

REGION = "eu-west-1"
ENV_KEYS = Credentials("AKIAMM2PYTESTENV0001", "env-secret-9f3b7c1d2e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c")
PROFILE_KEYS = Credentials("AKIAMM2PYTESTPROF002", "profile-secret-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f")
IAM_JAAS = "software.amazon.msk.auth.iam.IAMLoginModule required{options};"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("msk-tls"))


@pytest.fixture
def aws_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Credentials in the environment, a profile ``mirror`` in shared files of the test's own, no other source."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ENV_KEYS.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENV_KEYS.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    (tmp_path / "aws-credentials").write_text(
        f"[mirror]\naws_access_key_id = {PROFILE_KEYS.access_key}\naws_secret_access_key = {PROFILE_KEYS.secret_key}\n"
    )
    (tmp_path / "aws-config").write_text(f"[profile mirror]\nregion = {REGION}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    return tmp_path


def broker_judging_with(certificates: Certificates, keys: Credentials) -> FakeMskBroker:
    return FakeMskBroker(
        certificates.server,
        certificates.server_key,
        lambda raw: check_msk_payload(raw, keys, REGION, HOST),
    ).start()


@pytest.fixture
def env_broker(certificates: Certificates) -> Iterator[FakeMskBroker]:
    broker = broker_judging_with(certificates, ENV_KEYS)
    yield broker
    broker.stop()


def msk_properties(
    directory: Path, port: int, certificates: Certificates, jaas_options: str = "", extra: str = ""
) -> Path:
    """An MM2 file as MSK's documentation has users write it: msk is the source, a plain cluster the target."""
    path = directory / "mm2.properties"
    path.write_text(
        "clusters = msk, backup\n"
        f"msk.bootstrap.servers = {HOST}:{port}\n"
        "msk.security.protocol = SASL_SSL\n"
        "msk.sasl.mechanism = AWS_MSK_IAM\n"
        f"msk.sasl.jaas.config = {IAM_JAAS.format(options=jaas_options)}\n"
        "msk.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler\n"
        "msk.ssl.truststore.type = PEM\n"
        f"msk.ssl.truststore.location = {certificates.ca}\n"
        "backup.bootstrap.servers = 127.0.0.1:9\n"
        "msk->backup.enabled = true\n"
        "msk->backup.topics = orders\n" + extra
    )
    return path


def batch_path_connection(path: Path) -> KafkaConnection:
    """The source connection a batch-path task makes, from the file through mm2py's own translation."""
    mm = MirrorMakerConfig.from_file(path)
    # Collected, not raised: the file is refused for the driver (asserted below), but its settings are what a
    # batch-path executor would receive.
    flow = build_flow_config(mm, mm.enabled_flows()[0], ProblemSink(collect=True))
    return KafkaConnection(flow.source, flow.source_consumer.connection)


def test_login_from_environment_credentials_is_signed_as_aws_signer_expects(
    aws_environment: Path, env_broker: FakeMskBroker, certificates: Certificates
) -> None:
    connection = batch_path_connection(msk_properties(aws_environment, env_broker.port, certificates))
    try:
        connection.bootstrap(timeout_s=20)
        assert connection.brokers() == frozenset({1})
    finally:
        connection.close()
    # One login per connection (the bootstrap address, then node 1 as Metadata named it): every one signed right.
    assert env_broker.verdicts and [v.problem for v in env_broker.verdicts] == [None] * len(env_broker.verdicts)
    verdict = env_broker.verdicts[0]
    assert verdict.payload["action"] == "kafka-cluster:Connect"
    assert verdict.payload["host"] == HOST
    assert verdict.payload["x-amz-credential"].startswith(f"{ENV_KEYS.access_key}/")
    assert f"/{REGION}/kafka-cluster/aws4_request" in verdict.payload["x-amz-credential"]
    assert verdict.payload["x-amz-expires"] == "900"
    # The handshake and the login came first, then the client went on as an authenticated one (Metadata).
    assert env_broker.requests[env_broker.requests.index(17) :][:3] == [17, 36, 3]


def test_aws_profile_name_signs_with_that_profile_not_the_environment(
    aws_environment: Path, certificates: Certificates
) -> None:
    broker = broker_judging_with(certificates, PROFILE_KEYS)
    try:
        path = msk_properties(aws_environment, broker.port, certificates, ' awsProfileName="mirror"')
        connection = batch_path_connection(path)
        try:
            connection.bootstrap(timeout_s=20)
        finally:
            connection.close()
    finally:
        broker.stop()
    assert broker.verdicts and all(v.accepted for v in broker.verdicts), [v.problem for v in broker.verdicts]
    assert broker.verdicts[0].payload["x-amz-credential"].startswith(f"{PROFILE_KEYS.access_key}/")


def test_wrong_secret_is_refused_with_one_line_naming_the_cluster_and_no_secret(
    aws_environment: Path, env_broker: FakeMskBroker, certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-the-broker-knows-0000000000000")
    connection = batch_path_connection(msk_properties(aws_environment, env_broker.port, certificates))
    started = time.monotonic()
    try:
        with pytest.raises(ReplicationError) as refused:
            connection.bootstrap(timeout_s=30)
    finally:
        connection.close()
    assert time.monotonic() - started < 15  # at the first refusal (slices of 1, 2, 4 s...), not at the 30-s deadline
    message = str(refused.value)
    assert [v.problem for v in env_broker.verdicts][:1] == ["signature does not match"]
    assert "\n" not in message
    assert "msk" in message and "AWS_MSK_IAM" in message and "Access denied" in message
    assert "not-the-secret" not in message and ENV_KEYS.secret_key not in message


def test_the_signer_check_rejects_a_payload_signed_for_another_region() -> None:
    from kafka.net.sasl.msk import AwsMskIamClient  # type: ignore[import-untyped]

    other = AwsMskIamClient(HOST, ENV_KEYS.access_key, ENV_KEYS.secret_key, "us-east-1").first_message()
    assert check_msk_payload(other, ENV_KEYS, REGION, HOST) == Verdict(
        check_msk_payload(other, ENV_KEYS, REGION, HOST).payload, "credential scope (key, day, region, service) differs"
    )
    assert check_msk_payload(other, ENV_KEYS, "us-east-1", HOST).accepted


def test_driver_refuses_an_aws_msk_iam_cluster_at_load_naming_it(
    aws_environment: Path, certificates: Certificates
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(msk_properties(aws_environment, 9092, certificates))
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert refused.value.key == "msk.sasl.mechanism"
    assert "cluster msk" in message and "librdkafka" in message and "SCRAM" in message
    assert "\n" not in message


def test_role_arn_is_refused_with_the_profile_way_out(aws_environment: Path, certificates: Certificates) -> None:
    options = ' awsRoleArn="arn:aws:iam::123456789012:role/mirror"'
    mm = MirrorMakerConfig.from_file(msk_properties(aws_environment, 9092, certificates, options))
    sink = ProblemSink(collect=True)
    build_flow_config(mm, mm.enabled_flows()[0], sink)
    problems = [p for p in sink.errors if "awsRoleArn" in p.reason]
    assert problems, [p.render() for p in sink.errors]
    assert "role_arn" in (problems[0].allowed or "")


def test_plan_on_an_aws_msk_iam_file_exits_2_with_one_line_naming_the_cluster(
    aws_environment: Path, certificates: Certificates
) -> None:
    result = mm2py("plan", str(msk_properties(aws_environment, 9092, certificates)), timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "cluster msk" in lines[0] and "msk.sasl.mechanism" in lines[0], lines
    assert "librdkafka" in lines[0] and "SCRAM" in lines[0]


def test_without_botocore_the_batch_path_refuses_naming_the_extra(
    aws_environment: Path, certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = MirrorMakerConfig.from_file(msk_properties(aws_environment, 9092, certificates))
    flow = build_flow_config(mm, mm.enabled_flows()[0], ProblemSink(collect=True))
    monkeypatch.setitem(sys.modules, "botocore", None)  # what importing it finds when it is not installed
    with pytest.raises(ConfigError) as refused:
        wire_config(flow.source, flow.source_consumer.connection)
    assert "mm2py[aws]" in str(refused.value) and "botocore" in str(refused.value)


def test_a_session_token_is_signed_and_sent_as_aws_signer_expects(
    aws_environment: Path, certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "IQoJb3JpZ2luX2VjEmm2pyTestSessionToken/+=="  # characters that need URI-encoding in the query
    monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    broker = broker_judging_with(certificates, Credentials(ENV_KEYS.access_key, ENV_KEYS.secret_key, token))
    try:
        connection = batch_path_connection(msk_properties(aws_environment, broker.port, certificates))
        try:
            connection.bootstrap(timeout_s=20)
        finally:
            connection.close()
    finally:
        broker.stop()
    assert broker.verdicts and all(v.accepted for v in broker.verdicts), [v.problem for v in broker.verdicts]
    assert broker.verdicts[0].payload["x-amz-security-token"] == token


@pytest.mark.parametrize(
    ("unset", "jaas_options", "fragment"),
    [
        ("AWS_DEFAULT_REGION", "", "botocore's default chain, which has no AWS region"),
        ("AWS_SECRET_ACCESS_KEY", "", "botocore's default chain, which has no AWS credentials"),
        (None, ' awsProfileName="nobody"', "AWS profile nobody, which cannot be read (ProfileNotFound)"),
    ],
)
def test_a_login_botocore_cannot_sign_is_refused_before_connecting_in_one_line(
    aws_environment: Path,
    certificates: Certificates,
    monkeypatch: pytest.MonkeyPatch,
    unset: str | None,
    jaas_options: str,
    fragment: str,
) -> None:
    if unset == "AWS_SECRET_ACCESS_KEY":
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    if unset is not None:
        monkeypatch.delenv(unset)
    with pytest.raises(ConfigError) as refused:
        batch_path_connection(msk_properties(aws_environment, 9092, certificates, jaas_options))
    message = str(refused.value)
    assert fragment in message and "msk: AWS_MSK_IAM signs with" in message, message
    assert "\n" not in message and ENV_KEYS.secret_key not in message and PROFILE_KEYS.secret_key not in message

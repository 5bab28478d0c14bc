"""No command prints a secret: not in tables, JSON, warnings, -v logs, error lines or Spark task failures.

Every secret below is a random-looking token, so a leak is recognised even in part: any 6 characters of a
secret found anywhere in stdout or stderr count as a leak. Only the *values* are secret; key names and the
``${env:SECRET_X}`` reference itself may be printed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.harness.kafka_harness import ClusterFactory, TansuBroker, create_topic, make_records, produce
from tests.harness.mm2py_cli import mm2py, write_config

pytestmark = pytest.mark.integration

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
ENV_SECRET = "Fb1gHj7KlZ3x"
SECRETS = {
    "dc1 PLAIN password": "Pq7vZt3RmK9w",
    "target SCRAM password": "Hx4nLc8QsV2j",
    "dc1 ssl.key.password": "Wd6rTy1UoP5a",
    "dc1 ssl.keystore.password": "Gk3eMz9BxN7f",
    "dc1 ssl.truststore.password": "Jr8sAq2CwE6h",
    "basic.auth.user.info": "carol:Yt5uIo0LpS4d",
    "${env:SECRET_X} value": ENV_SECRET,
    "secret with an inline comment": "Nm2bVc6XzQ8r # rotate quarterly",
    "misspelt cluster-level key": "Ue9iOp4AsD1g",
    "misspelt client-level key": "Ca7sDf2GhJ4k",
    "target producer ssl.key.password": "Lo3kJi8HuG2y",
}
S = SECRETS
SECRETS_FILE = f"""\
config.providers = env
config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider
dc1.sasl.jaas.config = {PLAIN} required username="alice" password="{S["dc1 PLAIN password"]}";
target.sasl.jaas.config = {SCRAM} required username="bob" password="{S["target SCRAM password"]}";
target.producer.sasl.jaas.config = {SCRAM} required username="bob" password="${{env:SECRET_X}}";
dc1.ssl.key.password = {S["dc1 ssl.key.password"]}
dc1.ssl.keystore.password = {S["dc1 ssl.keystore.password"]}
dc1.ssl.truststore.password = {S["dc1 ssl.truststore.password"]}
dc1.basic.auth.user.info = {S["basic.auth.user.info"]}
target.ssl.key.password = {S["secret with an inline comment"]}
dc1.ssl.keystore.pasword = {S["misspelt cluster-level key"]}
dc1.consumer.ssl.key.pasword = {S["misspelt client-level key"]}
target.producer.ssl.key.password = {S["target producer ssl.key.password"]}
"""
# The same clusters behind SASL: tansu has no SASL configured (docs/test-broker.md, *SASL*), so every login fails —
# which is the point here: the error paths must not leak either. SASL_SSL on dc1 also fails its TLS
# handshake and makes the ssl.* keys (and the misspelt one) part of dc1's client settings. A 2-s admin timeout:
# each command fails at its first admin call, whose wait proves nothing more for being longer.
LOGIN_FAILS = """\
dc1.security.protocol = SASL_SSL
dc1.sasl.mechanism = PLAIN
target.security.protocol = SASL_PLAINTEXT
target.sasl.mechanism = SCRAM-SHA-512
dc1->target.admin.timeout.ms = 2000
"""
TRANSLATE = ("--group", "orders-app", "--source", "dc1", "--target", "target")
COMMANDS: dict[str, tuple[str, ...]] = {
    "validate": ("validate",),
    "plan": ("plan",),
    "plan --json": ("plan", "--json"),
    "lag": ("lag",),
    "lag --json": ("lag", "--json"),
    "run --once": ("run", "--once"),
    "verify": ("verify",),
    "translate-offsets": ("translate-offsets", *TRANSLATE),
}
SPARK_COMMANDS = {"run --once"}


def run_mm2py(args: list[str], verbose: bool, config: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``mm2py [-v] COMMAND CONFIG ARGS`` with SECRET_X in its environment."""
    command, *rest = args
    argv = [*(["-v"] if verbose else []), command, str(config), *rest]
    return mm2py(*argv, timeout=timeout, env={"SECRET_X": ENV_SECRET})


def leaked(output: str, secrets: dict[str, str] = SECRETS) -> dict[str, str]:
    """Secret name -> the first 6-character piece of it found in ``output``."""
    found = {}
    for name, secret in secrets.items():
        pieces = [secret[i : i + 6] for i in range(len(secret) - 5)]
        hit = next((p for p in pieces if p in output), None)
        if hit is not None:
            found[name] = hit
    return found


def assert_nothing_leaked(result: subprocess.CompletedProcess[str], secrets: dict[str, str] = SECRETS) -> None:
    found = leaked(result.stdout + result.stderr, secrets)
    assert not found, f"secrets printed: {found}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.fixture
def clusters(kafka_cluster: ClusterFactory) -> dict[str, TansuBroker]:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 2)
    produce(brokers["dc1"].bootstrap, "orders", make_records(20, partitions=2))
    return brokers


def secrets_config(tmp_path: Path, brokers: dict[str, TansuBroker], extra: str = "") -> Path:
    return write_config(
        tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = orders\n" + SECRETS_FILE + extra
    )


def command_params() -> list[object]:
    marks = {name: [pytest.mark.spark] if name in SPARK_COMMANDS else [] for name in COMMANDS}
    return [
        pytest.param(name, verbose, marks=marks[name], id=f"{'-v ' if verbose else ''}{name}")
        for name in COMMANDS
        for verbose in (False, True)
    ]


@pytest.mark.parametrize(("command", "verbose"), command_params())
def test_no_secret_is_printed_when_every_cluster_connects(
    command: str, verbose: bool, clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    """PLAINTEXT clusters: the security keys are in the file but unused, and every command succeeds."""
    config = secrets_config(tmp_path, clusters)
    result = run_mm2py(list(COMMANDS[command]), verbose, config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_nothing_leaked(result)


@pytest.mark.parametrize(("command", "verbose"), command_params())
def test_no_secret_is_printed_when_every_login_fails(
    command: str, verbose: bool, clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = secrets_config(tmp_path, clusters, LOGIN_FAILS)
    result = run_mm2py(list(COMMANDS[command]), verbose, config)
    assert result.returncode == (0 if command == "validate" else 3), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert_nothing_leaked(result)


def test_warnings_about_secret_keys_mask_the_value_but_name_the_key(
    clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    """The inline comment and the schema-registry key deserve a warning, which must still hide the value."""
    config = secrets_config(tmp_path, clusters)
    result = run_mm2py(["validate"], False, config)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any("target.ssl.key.password = [hidden]" in x and "inline comments" in x for x in lines), lines
    assert any("dc1.basic.auth.user.info = [hidden]" in x for x in lines), lines
    assert_nothing_leaked(result)


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_line_that_cannot_be_parsed_does_not_echo_its_secret(command: str, tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = dc1, target\ndc1.bootstrap.servers = 127.0.0.1:1\n"
        "target.bootstrap.servers = 127.0.0.1:2\ndc1->target.enabled = true\n"
        "dc1.ssl.key.password = Wd6rTy\\uZZZZ1UoP5a\n"
    )
    result = run_mm2py([command], False, config, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{config}:5" in result.stderr, result.stderr
    assert_nothing_leaked(result, {"unparsable password": "Wd6rTy\\uZZZZ1UoP5a"})


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_jaas_syntax_error_does_not_echo_part_of_the_password(command: str, tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = dc1, target\ndc1.bootstrap.servers = 127.0.0.1:1\n"
        "target.bootstrap.servers = 127.0.0.1:2\ndc1->target.enabled = true\n"
        "dc1.security.protocol = SASL_PLAINTEXT\ndc1.sasl.mechanism = PLAIN\n"
        f'dc1.sasl.jaas.config = {PLAIN} required username="alice" password=Pq7vZt Rm3K9w;\n'
    )
    result = run_mm2py([command], False, config, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "dc1.sasl.jaas.config = [hidden]" in result.stdout + result.stderr
    assert_nothing_leaked(result, {"password with a space": "Pq7vZt Rm3K9w"})


# -- a Spark task that fails on a client that holds a secret ---------------------------------------------

# Only the executors' target producer logs in (the driver's admin clients and the progress consumer stay on
# PLAINTEXT), so the first client that fails is inside a Spark task; short timeouts bound the run.
TASK_LOGIN_FAILS = """\
dc1->target.enabled = true
topics = orders
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
mm2py.retry.timeout.seconds = 1
target.producer.security.protocol = SASL_PLAINTEXT
target.producer.sasl.mechanism = PLAIN
target.producer.delivery.timeout.ms = 1000
target.producer.sasl.jaas.config = {plain} required username="{user}" password="{password}";
"""


def task_login_config(tmp_path: Path, brokers: dict[str, TansuBroker], user: str, password: str) -> Path:
    return write_config(
        tmp_path / "mm2.properties", brokers, TASK_LOGIN_FAILS.format(plain=PLAIN, user=user, password=password)
    )


@pytest.mark.spark
@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "-v"])
def test_a_spark_task_failing_to_log_in_prints_no_secret(
    verbose: bool, clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    config = task_login_config(tmp_path, clusters, "Tz8yXc1VbN6m", "Qa3sWd5EfR7t")
    result = run_mm2py(["run", "--once"], verbose, config)
    assert result.returncode == 3, result.stdout + result.stderr
    errors = [x for x in result.stderr.splitlines() if x.startswith("mm2py: error: ")]
    # The target producer's login fails where it is first used: the driver recording the starting positions of
    # a first run (mm2-offsets.dc1.internal), or a copy task (naming topic and partition).
    assert len(errors) == 1, result.stderr
    assert "topic=orders partition=" in errors[0] or "mm2-offsets.dc1.internal on target" in errors[0], errors
    assert_nothing_leaked(result, {"task PLAIN password": "Qa3sWd5EfR7t"})


@pytest.mark.spark
def test_a_secret_that_appears_in_a_task_client_error_is_masked(
    clusters: dict[str, TansuBroker], tmp_path: Path
) -> None:
    """librdkafka never echoes a PLAIN password, so this password *is* text the failing client prints:
    whatever carries a task's client errors to the user would then carry the secret, and must mask it."""
    secret = "Unsupported SASL mechanism"
    config = task_login_config(tmp_path, clusters, "mirror", secret)
    result = run_mm2py(["run", "--once"], False, config)
    assert result.returncode == 3, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert secret not in output, [x for x in output.splitlines() if secret in x][:3]

"""Bad input for every command: the documented exit code, one stderr line naming the cause, no traceback.

Exit codes (mm2py.errors): 2 for a config or usage error, 3 for a runtime failure. Config errors must name
``file:line``, the key and the value as written; Kafka failures must name the cluster alias. ``validate`` is
the exception to "one line on stderr": its report (every problem, one per line) is its output, on stdout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mm2py.mirror.progress import progress_of as mirror_progress_of
from mm2py.mirror.progress import progress_topic
from tests.harness.flows_helpers import copied
from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBroker,
    create_topic,
    delete_topic,
    free_port,
    make_records,
    produce,
    read_all,
)
from tests.harness.mm2py_cli import SMALL_CLUSTER, mm2py, mm2py_argv, write_config
from tests.harness.polling import poll_until

pytestmark = pytest.mark.integration

EXIT_USAGE, EXIT_RUNTIME = 2, 3
# Named within 30 s (the README's exit-code table); each command gets a little more to start its interpreter.
UNREACHABLE_BOUND_S = 30.0
TRANSLATE = ("--group", "g1", "--source", "dc1", "--target", "target")
# Every command that reads a config file and then talks to Kafka, with the arguments it needs.
COMMANDS: dict[str, tuple[str, ...]] = {
    "plan": (),
    "lag": (),
    "run --once": ("--once",),
    "verify": (),
    "translate-offsets": TRANSLATE,
}


def invoke(command: str, config: Path, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    name = command.split()[0]
    return mm2py(name, str(config), *COMMANDS[command], *extra, timeout=timeout)


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "Exception in task" not in output, output


def the_error_line(result: subprocess.CompletedProcess[str], exit_code: int) -> str:
    """The exit code is ``exit_code`` and stderr is exactly one ``mm2py: error:`` line; returns that line."""
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    assert_no_traceback(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{result.stderr}"
    assert lines[0].startswith("mm2py: error: "), lines[0]
    return lines[0]


def last_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``mm2py: error:`` line of a run whose stderr also carries Spark's own output."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("mm2py: error: ")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.rstrip().endswith(errors[0]), "the error line must be the last thing printed"
    return errors[0]


def nowhere(aliases: tuple[str, ...] = ("dc1", "target")) -> dict[str, str]:
    """Loopback addresses nobody listens on, one per alias."""
    return {alias: f"127.0.0.1:{free_port()}" for alias in aliases}


def config_file(path: Path, servers: dict[str, str], body: str = "", clusters: str = "dc1, target") -> Path:
    lines = [f"clusters = {clusters}", *(f"{a}.bootstrap.servers = {s}" for a, s in servers.items())]
    path.write_text("\n".join(lines) + "\n" + SMALL_CLUSTER + "dc1->target.enabled = true\n" + body)
    return path


def line_of(path: Path, text: str) -> int:
    """1-based number of the first line of ``path`` that starts with ``text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text))


# -- config errors: exit 2, file:line key = value ------------------------------------------------------


def write_case(case: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """A broken file for ``case`` and the fragments the error line must contain."""
    path = tmp_path / "mm2.properties"
    servers = nowhere()
    if case == "missing file":
        return path, [f"{path}: file not found"]
    if case == "empty file":
        path.write_text("# nothing but a comment\n\n")
        return path, [f"{path}: contains no properties"]
    if case == "binary file":
        path.write_bytes(b"clusters = dc1, target\n\x00\x01\x02\xff\xfedc1.bootstrap.servers = x\n")
        return path, [f"{path}: is a binary file"]
    if case == "unknown alias in a flow":
        config_file(path, servers, "dc1->tagret.enabled = true\n")
        line = line_of(path, "dc1->tagret.enabled")
        return path, [
            f"{path}:{line} dc1->tagret.enabled = true",
            "'tagret'",
            "not in clusters",
            "did you mean target?",
        ]
    if case == "missing bootstrap.servers":
        config_file(path, {"dc1": servers["dc1"]})
        line = line_of(path, "dc1->target.enabled")
        return path, [f"{path}:{line} target.bootstrap.servers", "is missing", "dc1->target"]
    if case == "bad regex":
        config_file(path, servers, "topics = orders, pay(ments\n")
        line = line_of(path, "topics =")
        return path, [f"{path}:{line} topics = orders, pay(ments", "not a valid regular expression"]
    if case == "bad number":
        config_file(path, servers, "emit.checkpoints.interval.seconds = 1m\n")
        line = line_of(path, "emit.checkpoints")
        return path, [f"{path}:{line} emit.checkpoints.interval.seconds = 1m", "not a whole number"]
    raise AssertionError(case)


CONFIG_CASES = [
    "missing file",
    "empty file",
    "binary file",
    "unknown alias in a flow",
    "missing bootstrap.servers",
    "bad regex",
    "bad number",
]
FILE_CASES = CONFIG_CASES[:3]  # the file cannot be read at all, so even validate stops at the first line


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", CONFIG_CASES)
def test_config_error_exits_2_with_one_line_naming_file_line_key_and_value(
    case: str, command: str, tmp_path: Path
) -> None:
    path, fragments = write_case(case, tmp_path)
    line = the_error_line(invoke(command, path, timeout=60), EXIT_USAGE)
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_validate_reports_the_same_cause_and_exits_2(case: str, tmp_path: Path) -> None:
    path, fragments = write_case(case, tmp_path)
    result = mm2py("validate", str(path), timeout=60)
    if case in FILE_CASES:
        line = the_error_line(result, EXIT_USAGE)
    else:
        assert result.returncode == EXIT_USAGE, (result.stdout, result.stderr)
        assert_no_traceback(result)
        assert re.search(r": 1 error\(s\)", result.stdout), result.stdout
        line = next((x for x in result.stdout.splitlines() if x.startswith("error: ")), "")
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}\n{result.stdout}"


@pytest.mark.parametrize("command", ["plan", "lag", "run --once", "verify"])
def test_flows_naming_a_flow_that_is_not_enabled_is_a_usage_error(command: str, tmp_path: Path) -> None:
    path = config_file(tmp_path / "mm2.properties", nowhere())
    line = the_error_line(invoke(command, path, "--flows", "target->dc1", timeout=60), EXIT_USAGE)
    assert "target->dc1 is not an enabled flow" in line and "(enabled: dc1->target)" in line, line


def test_translate_offsets_between_clusters_without_an_enabled_flow_is_a_usage_error(tmp_path: Path) -> None:
    path = config_file(tmp_path / "mm2.properties", nowhere())
    result = mm2py("translate-offsets", str(path), "--group", "g1", "--source", "target", "--target", "dc1", timeout=60)
    line = the_error_line(result, EXIT_USAGE)
    assert "target->dc1 is not an enabled flow" in line, line


def test_command_line_usage_errors_exit_2_without_a_traceback(tmp_path: Path) -> None:
    """Click prints its own usage block here (several lines); it must still be exit 2 and no traceback."""
    path = config_file(tmp_path / "mm2.properties", nowhere())
    for args in (["plan"], ["plan", str(path), "--no-such-option"], ["translate-offsets", str(path)]):
        result = mm2py(*args, timeout=60)
        assert result.returncode == EXIT_USAGE, (args, result.stderr)
        assert_no_traceback(result)


# -- unreachable and unauthenticated clusters: exit 3 within 30 s, the alias named ---------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_unreachable_source_cluster_is_named_within_30_s(
    command: str, kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    # The target answers: with both clusters down either may fairly be named first (a run writes the target's
    # heartbeats before it plans), and this test is about the source.
    target = kafka_cluster("target")["target"]
    path = config_file(tmp_path / "mm2.properties", {**nowhere(("dc1",)), "target": target.bootstrap})
    started = time.monotonic()
    result = invoke(command, path, timeout=120)
    elapsed = time.monotonic() - started
    line = the_error_line(result, EXIT_RUNTIME)
    assert elapsed < UNREACHABLE_BOUND_S, f"{elapsed:.1f} s: {line}"
    assert " on dc1 failed: no broker answered" in line, line


@pytest.mark.parametrize("command", ["plan", "lag", "run --once"])
def test_unreachable_target_cluster_is_named_within_30_s(
    command: str, kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    dc1 = kafka_cluster("dc1")["dc1"]
    create_topic(dc1.bootstrap, "orders", 2)
    servers = {"dc1": dc1.bootstrap, "target": nowhere(("target",))["target"]}
    path = config_file(tmp_path / "mm2.properties", servers)
    started = time.monotonic()
    result = invoke(command, path, timeout=120)
    elapsed = time.monotonic() - started
    line = the_error_line(result, EXIT_RUNTIME)
    assert elapsed < UNREACHABLE_BOUND_S, f"{elapsed:.1f} s: {line}"
    assert " on target failed: no broker answered" in line, line


@pytest.mark.parametrize("command", ["plan", "lag", "run --once", "verify"])
def test_authentication_failure_exits_3_naming_the_cluster(
    command: str, kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """The closest reproducible authentication failure: tansu has no SASL configured (docs/test-broker.md, *SASL* —
    no mechanism can succeed against it, and no other Kafka-protocol broker is available here), so a
    SASL_PLAINTEXT/PLAIN client fails its SASL handshake exactly where a wrong password would fail its
    login: before any request, inside librdkafka, surfacing as a transport/authentication error."""
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "orders", 2)
    path = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\n"
            "dc1.security.protocol = SASL_PLAINTEXT\n"
            "dc1.sasl.mechanism = PLAIN\n"
            "dc1.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="mirror" password="not-accepted-here";\n'
        ),
    )
    started = time.monotonic()
    result = invoke(command, path, timeout=120)
    elapsed = time.monotonic() - started
    line = the_error_line(result, EXIT_RUNTIME)
    assert elapsed < UNREACHABLE_BOUND_S, f"{elapsed:.1f} s: {line}"
    assert " on dc1 failed: authentication failed" in line, line
    assert "not-accepted-here" not in result.stdout + result.stderr


# -- failures while copying (Spark) ----------------------------------------------------------------------


def progress_of(target: TansuBroker, source: str = "dc1") -> dict[tuple[str, int], int]:
    """Last replicated offset per (topic, partition), read back from mm2-offsets.<source>.internal (the loss
    records kept beside the progress, under keys of their own, are not progress)."""
    return mirror_progress_of(((r.key, r.value) for r in read_all(target.bootstrap, progress_topic(source))), source)


TWO_MB = 2 * 1024 * 1024


@pytest.fixture
def big_record(kafka_cluster: ClusterFactory, tmp_path: Path) -> tuple[dict[str, TansuBroker], Path]:
    """Partition 0 of ``big`` holds a small record, a 2 MB record (offset 1) and another small record."""
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "big", 1)
    now = int(time.time() * 1000)
    produce(
        brokers["dc1"].bootstrap,
        "big",
        [  # the harness producer allows 64 MB records
            Record(b"k0", b"before", [], now, 0),
            Record(b"k1", b"x" * TWO_MB, [], now + 1, 0),
            Record(b"k2", b"after", [], now + 2, 0),
        ],
    )
    path = write_config(tmp_path / "mm2.properties", brokers, "dc1->target.enabled = true\ntopics = big\n")
    return brokers, path


@pytest.mark.spark
def test_record_larger_than_the_target_producer_accepts_stops_the_run_before_it(
    big_record: tuple[dict[str, TansuBroker], Path],
) -> None:
    brokers, path = big_record
    result = mm2py("run", str(path), "--once")
    assert result.returncode == EXIT_RUNTIME, result.stderr
    line = last_error_line(result)
    assert re.search(r"topic=big partition=0\b", line) and "offset 1 " in line, line
    assert "too large" in line, line
    assert progress_of(brokers["target"]).get(("big", 0), -1) < 1, "progress moved past the record not copied"

    with path.open("a") as file:
        file.write("target.producer.message.max.bytes = 5000000\n")
    checked = mm2py("validate", str(path))
    assert checked.returncode == 0 and " 0 error(s)" in checked.stdout, checked.stdout + checked.stderr
    result = mm2py("run", str(path), "--once")
    assert result.returncode == 0, result.stderr
    copied = [r.value for r in read_all(brokers["target"].bootstrap, "dc1.big")]
    assert copied.count(b"x" * TWO_MB) == 1 and copied[-1] == b"after", [len(v or b"") for v in copied]
    assert progress_of(brokers["target"])[("big", 0)] == 2


@pytest.mark.spark
@pytest.mark.parametrize("path", ["batch", "record"])
def test_record_too_large_is_one_clean_line_naming_its_size_the_limit_and_kafkas_error_name_on_each_path(
    big_record: tuple[dict[str, TansuBroker], Path], path: str
) -> None:
    _brokers, config = big_record
    with config.open("a") as file:
        file.write(f"mm2py.copy.mode = {path}\n")
    line = the_error_line(mm2py("run", str(config), "--once"), EXIT_RUNTIME)
    assert "message.max.bytes" in line and "1000000" in line and str(TWO_MB) in line, line
    assert line.endswith(" [MESSAGE_TOO_LARGE]"), line  # one name for the fault, whichever path met it
    assert "[permanent]" not in line, line


@pytest.mark.spark
def test_source_topic_deleted_during_a_continuous_run_is_reported(
    kafka_cluster: ClusterFactory, tmp_path: Path
) -> None:
    brokers = kafka_cluster("dc1", "target")
    create_topic(brokers["dc1"].bootstrap, "doomed", 2)
    create_topic(brokers["dc1"].bootstrap, "kept", 1)
    produce(brokers["dc1"].bootstrap, "doomed", make_records(100, partitions=2, seed=1))
    path = write_config(
        tmp_path / "mm2.properties",
        brokers,
        (
            "dc1->target.enabled = true\ntopics = doomed, kept\n"
            "dc1->target.refresh.topics.interval.seconds = 2\ndc1.consumer.poll.timeout.ms = 200\n"
        ),
    )
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*mm2py_argv(), "run", str(path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        poll_until(lambda: copied(brokers["target"], "dc1.doomed") >= 100, 120, "the first copy", process=proc, log=log)
        before = len(log.read_text())
        delete_topic(brokers["dc1"].bootstrap, "doomed")
        poll_until(
            lambda: proc.poll() is not None or _names_topic(log.read_text()[before:], "doomed"),
            60,
            "a warning naming the deleted topic, or an exit",
            interval=0.5,
        )
        after = log.read_text()[before:]
        if proc.poll() is not None:
            errors = [x for x in after.splitlines() if x.startswith("mm2py: error: ")]
            assert proc.returncode != 0 and len(errors) == 1 and "doomed" in errors[0], after
            assert "Traceback" not in after, after
        else:
            assert _names_topic(after, "doomed"), f"still running after 60 s, silent about 'doomed':\n{after}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _names_topic(text: str, topic: str) -> bool:
    """A WARNING (or ERROR) log line, or the error line, that names ``topic``."""
    loud = (" WARNING ", " ERROR ", "mm2py: error:")
    return any(topic in line and any(mark in line for mark in loud) for line in text.splitlines())


def test_validate_warns_about_a_misspelt_cluster_level_security_key_without_printing_it(tmp_path: Path) -> None:
    path = config_file(
        tmp_path / "mm2.properties",
        nowhere(),
        (
            "dc1.security.protocol = SSL\n"
            "dc1.ssl.keystore.location = /etc/kafka/dc1.p12\n"
            "dc1.ssl.keystore.pasword = Ue9iOp4AsD1g\n"
        ),
    )
    result = mm2py("validate", str(path), timeout=60)
    assert "Ue9iOp" not in result.stdout + result.stderr
    line = next((x for x in result.stdout.splitlines() if "dc1.ssl.keystore.pasword" in x), "")
    where = f"{path}:{line_of(path, 'dc1.ssl.keystore.pasword')}"
    assert f"{where} dc1.ssl.keystore.pasword = [hidden]" in line, result.stdout
    assert "ssl.keystore.password" in line.split("[hidden]", 1)[1], line

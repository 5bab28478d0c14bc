"""One-flow ``mm2py`` runs against a secured real-Kafka cluster, on a copy path the test chooses.

Why its own module: every login test needs the same three things — a properties file whose two cluster aliases
are two listeners of one broker, ``mm2py.copy.mode`` set so that the path is the one the test names (``batch``
is a config error when the flow cannot use it, so a silent fall-back to the record path fails the test), and a
check that the run's summary line names that path and that no secret of the cluster reached the output.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.harness.kafka_harness import make_records, produce, read_all
from tests.harness.mm2py_cli import ONE_NODE_CLUSTER, mm2py
from tests.harness.real_kafka import KafkaCluster

COPY_PATHS = ("batch", "record")


def cluster_lines(alias: str, bootstrap: str, java: Mapping[str, str]) -> str:
    return "".join(f"{alias}.{key} = {value}\n" for key, value in {"bootstrap.servers": bootstrap, **java}.items())


def write_flow(path: Path, topic: str, source: str, target: str, copy_path: str | None = None) -> Path:
    mode = f"mm2py.copy.mode = {copy_path}\n" if copy_path else ""
    path.write_text(
        f"clusters = src, tgt\n{source}{target}src->tgt.enabled = true\ntopics = {topic}\n{mode}{ONE_NODE_CLUSTER}"
    )
    return path


def secrets_of(cluster: KafkaCluster) -> list[str]:
    security = cluster.security
    return [*security.passwords.values(), security._store_password, security._key_password]


def assert_no_secret(result: subprocess.CompletedProcess[str], cluster: KafkaCluster, *more: str) -> None:
    output = result.stdout + result.stderr
    for secret in (*secrets_of(cluster), *more):
        assert secret not in output


def path_that_ran(result: subprocess.CompletedProcess[str]) -> str:
    """The copy path named by the run's summary line (``flow=src->tgt copied=... path=batch``)."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("flow=src->tgt ") and " path=" in line]
    assert len(lines) == 1, result.stdout
    return lines[0].split(" path=", 1)[1].split()[0]


@dataclass(frozen=True)
class Refusal:
    """A failed run: its exit code, its one ``mm2py: error:`` line and how long it took."""

    result: subprocess.CompletedProcess[str]
    seconds: float

    @property
    def error_line(self) -> str:
        errors = [line for line in self.result.stderr.splitlines() if line.startswith("mm2py: error: ")]
        assert len(errors) == 1, self.result.stdout + self.result.stderr
        return errors[0]


def copy_once(
    tmp_path: Path, cluster: KafkaCluster, topic: str, source: str, target: str, copy_path: str
) -> subprocess.CompletedProcess[str]:
    """Records into ``topic`` over PLAINTEXT, ``mm2py run --once`` on ``copy_path``; ``src.<topic>`` must then
    hold them all, and the summary must name that path."""
    sent = make_records(120, partitions=2, seed=5)
    produce(cluster.bootstrap, topic, sent)
    config = write_flow(tmp_path / "mm2.properties", topic, source, target, copy_path)

    result = mm2py("run", str(config), "--once")

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert path_that_ran(result) == copy_path
    assert_no_secret(result, cluster)
    copied = read_all(cluster.bootstrap, f"src.{topic}")
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted((r.partition, r.key, r.value) for r in sent)
    return result


def refused_run(tmp_path: Path, cluster: KafkaCluster, topic: str, source: str, target: str, copy_path: str) -> Refusal:
    """``mm2py run --once`` on ``copy_path`` that is expected to fail: the result and its wall time."""
    produce(cluster.bootstrap, topic, make_records(20, partitions=1, seed=7))
    config = write_flow(tmp_path / "mm2.properties", topic, source, target, copy_path)
    started = time.monotonic()
    result = mm2py("run", str(config), "--once", timeout=120)
    return Refusal(result, time.monotonic() - started)

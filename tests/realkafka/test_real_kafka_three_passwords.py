"""No secret in any line of a run whose three flows log in with three different passwords, on a real secured
Kafka: the driver's and the executors' lines, at debug level.

Why on a real broker: an executor learns the secrets of each flow it runs (a reused Python worker may run all
three), and only a broker that checks the passwords makes every client actually use its own. The three sources
are three aliases of the authorizer cluster, each logging in as a user of its own with a password of its own;
the target is the plain shared cluster. The run has a process of its own (``--master``), so that the Spark
workers' lines reach its stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation as Op

from tests.harness import acl_principals as acl
from tests.harness.kafka_harness import make_records, produce, read_all
from tests.harness.mm2py_cli import ONE_NODE_CLUSTER, mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.secured_flows import secrets_of

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

SOURCES = ("dc1", "dc2", "dc3")
RECORDS = 60


def test_three_flows_with_three_passwords_copy_everything_and_print_none_of_them(
    real_kafka_acl: KafkaCluster, real_kafka: KafkaCluster, unique_topic: Callable[..., str], tmp_path: Path
) -> None:
    everything = [*acl.topic("*", Op.ALL), *acl.group("*", Op.ALL), *acl.cluster(Op.ALL)]
    topics = {dc: real_kafka_acl.create_topic(unique_topic(f"orders-{dc}"), partitions=2) for dc in SOURCES}
    sent = {dc: make_records(RECORDS, partitions=2, seed=i) for i, dc in enumerate(SOURCES)}
    for dc in SOURCES:
        produce(real_kafka_acl.bootstrap, topics[dc], sent[dc])
    with ExitStack() as users:
        principals = {dc: users.enter_context(acl.principal_with(real_kafka_acl, everything)) for dc in SOURCES}
        passwords = [p.password for p in principals.values()]
        assert len(set(passwords)) == len(SOURCES)
        lines = [f"clusters = {', '.join(SOURCES)}, tgt\n", f"tgt.bootstrap.servers = {real_kafka.bootstrap}\n"]
        for dc in SOURCES:
            settings = {"bootstrap.servers": real_kafka_acl.bootstrap_for("SASL_SSL"), **principals[dc].java_settings()}
            lines += [f"{dc}.{key} = {value}\n" for key, value in settings.items()]
            lines += [f"{dc}->tgt.enabled = true\n", f"{dc}->tgt.topics = {topics[dc]}\n"]
        config = tmp_path / "mm2.properties"
        config.write_text("".join(lines) + ONE_NODE_CLUSTER)

        result = mm2py("-v", "run", str(config), "--once", "--master", "local[2]")

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    for dc in SOURCES:
        copied = read_all(real_kafka.bootstrap, f"{dc}.{topics[dc]}")
        assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
            (r.partition, r.key, r.value) for r in sent[dc]
        ), dc
    # The lines came from every part of the run: the driver (-v: debug) and the Spark tasks of each flow.
    assert all(f"flow={dc}->tgt" in output for dc in SOURCES), output[-4000:]
    print(f"{len(output.splitlines())} lines checked for {len(passwords)} flow passwords")  # the figures, with -s
    for secret in (*passwords, *secrets_of(real_kafka_acl)):
        assert secret not in output

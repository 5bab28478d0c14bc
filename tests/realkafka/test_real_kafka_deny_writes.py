"""``cutover --deny-writes`` on real Kafka with StandardAuthorizer: A refuses an application's writes once the
flow is cut over, a refused cut-over leaves A's ACLs as they were, and failback deletes exactly what the cut-over
added, so the application writes to A again.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AclOperation

from tests.harness import acl_principals as acl
from tests.harness.kafka_harness import end_offsets, make_records, produce
from tests.harness.mm2py_cli import mm2py
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import unique_alias, write_real_config
from tests.harness.recording_consumer import RecordingConsumer

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 2
RECORDS = 2_000
DENIAL = {"pattern_type": "LITERAL", "principal": "User:*", "host": "*", "operation": "WRITE", "permission": "DENY"}


def _write(producer: Producer, topic: str, value: bytes) -> KafkaError | None:
    """One record written by the application; its delivery error, or None once A acknowledged it."""
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report within 30 s"
    return outcome[0]


def test_deny_writes_stops_the_applications_writes_on_a_until_failback_deletes_exactly_its_acls(
    real_kafka_acl: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    a, b = real_kafka_acl, real_kafka_target
    topic = a.create_topic(unique_topic("orders"), partitions=PARTITIONS)
    src, tgt = unique_alias("src"), unique_alias("tgt")
    body = f"{src}->{tgt}.enabled = true\n{tgt}->{src}.enabled = true\ntopics = {topic}\n"
    config = write_real_config(tmp_path / "mm2.properties", {src: a.bootstrap, tgt: b.bootstrap}, body)
    flow, group = f"{src}->{tgt}", f"billing-{topic}"
    produce(a.bootstrap, topic, make_records(RECORDS, partitions=PARTITIONS, seed=41))
    with acl.principal_with(a, acl.topic(topic, AclOperation.WRITE, AclOperation.DESCRIBE)) as app:
        before = acl.topic_bindings(a, topic)
        assert before == {(app.name, "WRITE"), (app.name, "DESCRIBE")}
        producer = Producer({**app.client_settings(), "message.timeout.ms": 15_000, "linger.ms": 0})
        assert _write(producer, topic, b"before the cut-over") is None

        def cutover(*extra: str) -> subprocess.CompletedProcess[str]:
            return mm2py(
                "cutover", str(config), "--flow", flow, "--groups", re.escape(group), "--quiet-seconds", "1",
                "--deny-writes", "--json", *extra,
            )  # fmt: skip

        drill = cutover("--dry-run")
        assert drill.returncode == 0, drill.stderr
        assert json.loads(drill.stdout)["denied_writes"] == [{"cluster": src, "topic": topic, **DENIAL}]
        assert acl.topic_bindings(a, topic) == before  # a dry run adds nothing

        # A member of the group on A: refused after the denial was added, and the denial deleted again.
        member = RecordingConsumer(src, a.bootstrap, group, topic, "billing-on-a")
        member.consume(until_ends=end_offsets(a.bootstrap, topic))
        try:
            refused = cutover()
        finally:
            member.close()
        assert refused.returncode == 1 and f"group {group} has 1 member(s) on {src}" in refused.stderr, refused.stderr
        assert acl.topic_bindings(a, topic) == before
        assert _write(producer, topic, b"after the refused cut-over") is None

        switched = cutover()
        assert switched.returncode == 0, switched.stderr
        report = json.loads(switched.stdout)
        assert report["denied_writes"] == [{"cluster": src, "topic": topic, **DENIAL}]
        assert report["marks"][0]["denied_writes"] == [{"topic": topic, **DENIAL}]
        assert acl.topic_bindings(a, topic) == before | {("User:*", "WRITE")}
        refusal = _write(producer, topic, b"after the cut-over")
        assert refusal is not None and refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refusal

        back = mm2py("failback", str(config), "--flow", flow, "--json")
        assert back.returncode == 0, back.stderr
        assert json.loads(back.stdout)["write_denials_deleted"] == 1
        # DeleteAcls answers once the controller has it; the broker's authorizer learns it a moment later.
        poll_until(lambda: acl.topic_bindings(a, topic) == before, 30, "the denial gone from the broker")
        # The applications come back to A with new producers (librdkafka keeps a topic's authorization failure
        # until its next metadata refresh, minutes later).
        returned = Producer({**app.client_settings(), "message.timeout.ms": 15_000, "linger.ms": 0})
        assert _write(returned, topic, b"after the failback") is None

"""Kerberos (GSSAPI) as MM2 users configure it, against a real Kafka broker and a real MIT KDC.

The broker's SASL_PLAINTEXT listener takes GSSAPI only (``kafka/localhost@EXAMPLE.COM`` from a keytab); the
client is ``mm2@EXAMPLE.COM`` with its own keytab, configured by the JAAS ``Krb5LoginModule`` line an MM2 user
already has. MirrorMaker 2 itself copies with that file, which proves the KDC, the broker and the settings; mm2py
refuses it in one line, because the librdkafka of confluent-kafka's wheels has no GSSAPI and mm2py's admin calls
use librdkafka on both copy paths (docs/security.md, *Kerberos (GSSAPI)*).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from tests.harness.kafka_harness import make_records, produce, read_all
from tests.harness.kerberos import KerberosRealm
from tests.harness.mirror_maker import MirrorMaker, prompt_herder, properties_text
from tests.harness.mm2py_cli import ONE_NODE_CLUSTER, mm2py
from tests.harness.real_kafka import JVM_FLAGS, KafkaCluster, KafkaRuntime

pytestmark = pytest.mark.realkafka

REFUSAL_WITHIN_S = 30.0


def cluster_lines(alias: str, bootstrap: str, java: Mapping[str, str]) -> str:
    return "".join(f"{alias}.{key} = {value}\n" for key, value in {"bootstrap.servers": bootstrap, **java}.items())


def kerberos_flow(path: Path, cluster: KafkaCluster, realm: KerberosRealm, topic: str, *, on: str) -> Path:
    """A flow src->tgt between two listeners of ``cluster``; the one named by ``on`` logs in with Kerberos."""
    kerberos = (cluster.bootstrap_for("SASL_PLAINTEXT"), realm.java_client_settings())
    plain: tuple[str, dict[str, str]] = (cluster.bootstrap, {})
    source, target = (kerberos, plain) if on == "src" else (plain, kerberos)
    path.write_text(
        "clusters = src, tgt\n"
        + cluster_lines("src", *source)
        + cluster_lines("tgt", *target)
        + f"src->tgt.enabled = true\ntopics = {topic}\n{ONE_NODE_CLUSTER}"
        # MirrorMaker 2's own Connect topics on a one-node target (mm2py ignores these keys).
        + "config.storage.replication.factor = 1\nstatus.storage.replication.factor = 1\n"
    )
    return path


def topics_on(cluster: KafkaCluster) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return set(admin.list_topics(timeout=15).topics)


@pytest.mark.parametrize("on", ["src", "tgt"])
def test_run_with_kerberos_is_refused_in_one_line_naming_the_library_and_creates_nothing(
    real_kafka_kerberos: KafkaCluster,
    kerberos_realm: KerberosRealm,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    on: str,
) -> None:
    topic = real_kafka_kerberos.create_topic(unique_topic("krb"), 1)
    produce(real_kafka_kerberos.bootstrap, topic, make_records(20, partitions=1, seed=3))
    config = kerberos_flow(tmp_path / "mm2.properties", real_kafka_kerberos, kerberos_realm, topic, on=on)
    before = topics_on(real_kafka_kerberos)

    started = time.monotonic()
    result = mm2py("run", str(config), "--once", env=kerberos_realm.kdc.env)
    took = time.monotonic() - started

    assert result.returncode == 2, result.stderr[-3000:]
    assert took < REFUSAL_WITHIN_S
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    # The file and line, the key and value, why, and what works instead.
    assert f"{config}:" in line and f"{on}.sasl.mechanism = GSSAPI" in line
    assert f"librdkafka {confluent_kafka.libversion()[0]} was built without it (no cyrus-sasl)" in line
    assert "on either copy path" in line and "allowed: PLAIN, SCRAM-SHA-256" in line
    assert kerberos_realm.client_keytab.read_bytes().hex() not in line  # nothing of the key material
    assert topics_on(real_kafka_kerberos) == before  # no remote or internal topic was created
    print(f"refused with Kerberos on {on} in {took:.2f} s: {line}")


def test_mirror_maker_2_copies_every_record_with_the_same_kerberos_file(
    real_kafka_kerberos: KafkaCluster,
    kerberos_realm: KerberosRealm,
    kafka_runtime: KafkaRuntime,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """The file mm2py refuses is right: MM2 logs in as mm2@EXAMPLE.COM from the keytab and copies it all."""
    topic = real_kafka_kerberos.create_topic(unique_topic("krb-mm2"), 2)
    sent = make_records(200, partitions=2, seed=11)
    produce(real_kafka_kerberos.bootstrap, topic, sent)
    config = kerberos_flow(tmp_path / "mm2.properties", real_kafka_kerberos, kerberos_realm, topic, on="src")
    config.write_text(config.read_text() + properties_text(prompt_herder("tgt")))
    flags = (*JVM_FLAGS, *kerberos_realm.jvm_options())

    started = time.monotonic()
    with MirrorMaker(kafka_runtime, config, tmp_path / "mm2", clusters=["tgt"], jvm_flags=flags) as mirror_maker:
        ends = {(topic, p): sum(1 for r in sent if r.partition == p) for p in range(2)}
        mirror_maker.await_progress(real_kafka_kerberos.bootstrap, "src", ends)
    took = time.monotonic() - started

    copied = read_all(real_kafka_kerberos.bootstrap, f"src.{topic}")
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted((r.partition, r.key, r.value) for r in sent)
    # The KDC issued mm2@EXAMPLE.COM a service ticket for the broker: the login really was Kerberos.
    issued = [line for line in kerberos_realm.kdc.log_tail(1_000_000).splitlines() if "TGS_REQ" in line]
    assert any(f"{kerberos_realm.client} for {kerberos_realm.kdc.service_principal()}" in line for line in issued)
    print(f"MirrorMaker 2 with Kerberos on src: {len(copied)} of {len(sent)} records in {took:.1f} s")

"""Which copy path a flow takes (``mm2py.copy.mode``), and how a job's ranges become Spark tasks."""

from __future__ import annotations

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.problems import ProblemSink
from mm2py.config.properties import parse_properties
from mm2py.control.copy_path import choose_copy_path
from mm2py.engine.spark import group_ranges
from mm2py.errors import ConfigError
from mm2py.executor.contract import PartitionRange


def flow(extra: str = "") -> FlowConfig:
    text = (
        "clusters = a, b\na.bootstrap.servers = localhost:1\nb.bootstrap.servers = localhost:2\n"
        "a->b.enabled = true\n" + extra
    )
    mm = MirrorMakerConfig(parse_properties(text, "mm2.properties"), {})
    return build_flow_config(mm, Flow("a", "b"))


def test_auto_is_the_default_and_forwards_batches() -> None:
    assert flow().copy_mode == "auto"
    assert choose_copy_path(flow()).describe() == "batch"


def test_exactly_once_forwards_batches_inside_transactions() -> None:
    assert choose_copy_path(flow("b.exactly.once.source.support = enabled\n")).describe() == "batch"
    both = choose_copy_path(flow("b.exactly.once.source.support = enabled\nb.producer.compression.type = lz4\n"))
    assert both.path == "record"  # re-compressing is per-record work, exactly-once or not


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("mm2py.provenance.header.enabled = true\n", "provenance header"),
        ("b.producer.compression.type = zstd\n", "compression.type=zstd"),
        # Key stores reach both clients as PEM now; a TLS curve list is something the batch path's client cannot set.
        ("a.consumer.ssl.curves.list = P-256\na.consumer.security.protocol = SSL\n", "cannot connect to a"),
        ("mm2py.copy.mode = record\n", "mm2py.copy.mode=record"),
        # The batch path is an idempotent producer only; the record path honours the key.
        ("b.producer.enable.idempotence = false\n", "enable.idempotence=false"),
        ("b.producer.enable.idempotence = FALSE\n", "enable.idempotence=false"),
    ],
)
def test_auto_takes_the_record_path_when_the_flow_needs_per_record_work(extra: str, reason: str) -> None:
    path = choose_copy_path(flow(extra))
    assert path.path == "record"
    assert reason in path.describe()
    assert path.describe().startswith("record (")


def test_batch_on_a_flow_that_needs_per_record_work_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        choose_copy_path(flow("mm2py.copy.mode = batch\nmm2py.provenance.header.enabled = true\n"))
    assert caught.value.key == "mm2py.copy.mode"
    assert "provenance" in str(caught.value)
    assert choose_copy_path(flow("mm2py.copy.mode = batch\n")).describe() == "batch"
    assert choose_copy_path(flow("b.producer.enable.idempotence = true\n")).describe() == "batch"


PINNED = "a.security.protocol = SSL\na.ssl.enabled.protocols = TLSv1.3\n"


def test_a_tls13_pin_keeps_a_flow_on_the_batch_path_and_java_cipher_names_do_not_move_it() -> None:
    assert choose_copy_path(flow(PINNED)).describe() == "batch"
    ciphers = "a.security.protocol = SSL\na.ssl.cipher.suites = TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
    assert choose_copy_path(flow(ciphers)).describe() == "batch"


@pytest.mark.parametrize("extra", ["mm2py.copy.mode = record\n", "b.producer.compression.type = zstd\n"])
def test_a_tls_version_pin_on_a_flow_that_needs_the_record_path_is_a_config_error_naming_librdkafka(
    extra: str,
) -> None:
    with pytest.raises(ConfigError) as caught:
        choose_copy_path(flow(PINNED + extra))
    assert caught.value.key == "a.ssl.enabled.protocols"
    assert "librdkafka" in str(caught.value) and "TLSv1.3" in str(caught.value)


def ranges(sizes: dict[int, int]) -> list[PartitionRange]:
    return [PartitionRange("t", p, "t", 0, n) for p, n in sizes.items()]


def test_tasks_follow_the_parallelism_not_the_partition_count() -> None:
    groups = group_ranges(ranges({p: 100 for p in range(800)}), 2)
    assert len(groups) == 2
    assert sorted(len(g) for g in groups) == [400, 400]
    assert sorted(r.partition for g in groups for r in g) == list(range(800))


def test_groups_balance_records_and_keep_a_partitions_ranges_together() -> None:
    job = [*ranges({0: 1000, 1: 10, 2: 10, 3: 970}), PartitionRange("t", 1, "t", 10, 20)]
    groups = group_ranges(job, 2)
    loads = sorted(sum(r.end - r.start for r in g) for g in groups)
    assert loads == [1000, 1000]
    holders = [i for i, g in enumerate(groups) if any(r.partition == 1 for r in g)]
    assert len(holders) == 1
    assert [r.start for r in groups[holders[0]] if r.partition == 1] == [0, 10]
    assert len(group_ranges(ranges({0: 5}), 8)) == 1  # never more tasks than partitions


MSK_SOURCE = (
    "a.security.protocol = SASL_SSL\na.sasl.mechanism = AWS_MSK_IAM\n"
    "a.sasl.jaas.config = software.amazon.msk.auth.iam.IAMLoginModule required;\n"
    "a.sasl.client.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler\n"
)


def msk_flow(extra: str = "") -> FlowConfig:
    """A flow from an AWS_MSK_IAM source; its driver refusal is collected (tests/unit/test_msk_iam_login.py)."""
    text = (
        "clusters = a, b\na.bootstrap.servers = localhost:1\nb.bootstrap.servers = localhost:2\n"
        "a->b.enabled = true\n" + MSK_SOURCE + extra
    )
    mm = MirrorMakerConfig(parse_properties(text, "mm2.properties"), {})
    return build_flow_config(mm, Flow("a", "b"), ProblemSink(collect=True))


def test_an_aws_msk_iam_cluster_takes_the_batch_path() -> None:
    assert choose_copy_path(msk_flow()).describe() == "batch"


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("mm2py.copy.mode = record\n", "mm2py.copy.mode"),
        ("mm2py.provenance.header.enabled = true\n", "mm2py.provenance.header.enabled"),
    ],
)
def test_what_would_send_an_aws_msk_iam_flow_to_the_record_path_is_refused_naming_it(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        choose_copy_path(msk_flow(extra))
    message = str(refused.value)
    assert (refused.value.key, refused.value.exit_code) == (key, 2)
    assert "a logs in with AWS_MSK_IAM, which the record path (librdkafka) cannot" in message
    assert "\n" not in message

"""The real-broker harness itself: brokers, exact produce/read, end offsets, teardown, stalls."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from tests.harness.kafka_harness import (
    ClusterFactory,
    Record,
    TansuBinaryMissing,
    TansuBroker,
    client_config,
    consumer_config,
    create_topic,
    delete_topic,
    end_offsets,
    find_tansu_binary,
    list_topics,
    make_records,
    produce,
    read_all,
)

pytestmark = pytest.mark.integration

TESTS_DIR = Path(__file__).resolve().parents[1]
BASE_TS = 1_700_000_000_000


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _process_state(pid: int) -> str:
    # /proc/PID/stat: "pid (comm) state ..."; comm may contain spaces, so split after the last ')'.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _answers_metadata(bootstrap: str, timeout: float) -> bool:
    try:
        AdminClient(client_config(bootstrap)).list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def _latest_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """ListOffsets LATEST, the way the product asks for it."""
    consumer = Consumer(consumer_config(bootstrap))
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def _with_offsets(records: list[Record]) -> list[Record]:
    """The records as a reader should see them: offsets 0.. per partition, sorted by (partition, offset)."""
    next_offset: Counter[int] = Counter()
    placed = []
    for record in records:
        placed.append(
            Record(
                record.key,
                record.value,
                record.headers,
                record.timestamp,
                record.partition,
                next_offset[record.partition],
            )
        )
        next_offset[record.partition] += 1
    return sorted(placed, key=lambda r: (r.partition, r.offset))


def test_four_brokers_start_and_are_independent(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    brokers = kafka_cluster("dc1", "dc2", "dc3", "target")
    topic = unique_topic()

    create_topic(brokers["dc1"].bootstrap, topic, partitions=2)

    assert len({b.port for b in brokers.values()}) == 4
    for name, broker in brokers.items():
        metadata = AdminClient(client_config(broker.bootstrap)).list_topics(timeout=10)
        assert metadata.cluster_id == name
        assert (topic in list_topics(broker.bootstrap)) == (name == "dc1")


def test_produce_then_read_all_round_trips_every_record_field(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    bootstrap = kafka_cluster("dc1")["dc1"].bootstrap
    topic = unique_topic()
    create_topic(bootstrap, topic, partitions=3)
    records = make_records(40, partitions=3, seed=7, tombstone_every=4, null_key_every=5, base_timestamp=BASE_TS)
    records.append(Record(b"", b"", [("empty", b""), ("none", None)], BASE_TS - 5, 2))

    produce(bootstrap, topic, records)

    assert read_all(bootstrap, topic) == _with_offsets(records)
    assert read_all(bootstrap, topic, 2) == [r for r in _with_offsets(records) if r.partition == 2]


def test_dataset_has_unique_values_nulls_and_duplicate_header_keys() -> None:
    records = make_records(20, partitions=4, seed=3, tombstone_every=5, null_key_every=4, value_size=64)

    values = [r.value for r in records if r.value is not None]
    assert len(values) == len(set(values)) == 16
    assert sum(r.key is None for r in records) == 5
    assert all(len(v) == 64 for v in values)
    assert Counter(r.partition for r in records) == {0: 5, 1: 5, 2: 5, 3: 5}
    assert [k for k, _ in records[0].headers].count("dup") == 2
    assert make_records(20, partitions=4, seed=3, base_timestamp=1) == make_records(
        20, partitions=4, seed=3, base_timestamp=1
    )


def test_end_offsets_and_latest_equal_true_end_after_several_bursts(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    bootstrap = kafka_cluster("dc1")["dc1"].bootstrap
    topic = unique_topic()
    create_topic(bootstrap, topic, partitions=4)
    expected = dict.fromkeys(range(4), 0)

    # Partition 3 stays empty in the 3-partition bursts; big bursts make multi-record batches.
    for seed, (count, spread) in enumerate([(1, 3), (10, 3), (1000, 4), (7, 1), (250, 4)]):
        burst = make_records(count, partitions=spread, seed=seed)
        produce(bootstrap, topic, burst)
        for partition, n in Counter(r.partition for r in burst).items():
            expected[partition] += n

        assert end_offsets(bootstrap, topic) == expected
        assert _latest_offsets(bootstrap, topic, 4) == expected


def test_end_offsets_is_exact_when_latest_is_stale(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    bootstrap = kafka_cluster("dc1")["dc1"].bootstrap
    topic = unique_topic()
    create_topic(bootstrap, topic, partitions=1)
    producer = Producer(client_config(bootstrap, **{"linger.ms": 200}))
    for i in range(10):  # one batch of 10, without produce()'s single-record tail
        producer.produce(topic, value=str(i).encode(), partition=0)
    assert producer.flush(10) == 0
    del producer

    assert _latest_offsets(bootstrap, topic, 1)[0] < 10, "tansu's LATEST is exact now; revisit produce()"
    assert end_offsets(bootstrap, topic) == {0: 10}


def test_stop_ends_the_process_and_is_idempotent(tansu_bin: Path, tmp_path: Path) -> None:
    broker = TansuBroker("solo", tansu_bin, log_dir=tmp_path)
    broker.start()
    try:
        pid = broker.pid
        create_topic(broker.bootstrap, "t", partitions=2)
        produce(broker.bootstrap, "t", make_records(100, partitions=2))
        assert len(read_all(broker.bootstrap, "t")) == 100
        assert end_offsets(broker.bootstrap, "t") == {0: 50, 1: 50}
        assert _alive(pid)

        started = time.monotonic()
        broker.stop()
        # tansu lingers ~5 s while clients stay connected: a quick stop proves the harness closed its clients.
        assert time.monotonic() - started < 3
        assert not _alive(pid)
        broker.stop()
        assert not broker.running
        assert "ready in" in broker.log_path.read_text()
    finally:
        broker.kill()


def test_restart_after_kill_keeps_the_port_and_loses_the_data(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    topic = unique_topic()
    create_topic(broker.bootstrap, topic, partitions=1)
    old_pid, bootstrap = broker.pid, broker.bootstrap

    broker.kill()
    broker.start()

    assert not _alive(old_pid)
    assert broker.bootstrap == bootstrap
    assert topic not in list_topics(bootstrap)


def test_fixture_stops_brokers_and_reports_their_logs_when_the_test_fails(tmp_path: Path) -> None:
    # The suite's conftest; the harness it imports (tests.harness) comes from the repository, on PYTHONPATH.
    shutil.copy(TESTS_DIR / "conftest.py", tmp_path / "conftest.py")
    pid_file = tmp_path / "pids"
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(f"""
        from pathlib import Path

        def test_body_raises(kafka_cluster):
            brokers = kafka_cluster("dc1", "target")
            Path({str(pid_file)!r}).write_text(" ".join(str(b.pid) for b in brokers.values()))
            raise RuntimeError("inner test failed on purpose")
    """)
    )

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS_DIR.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    pids = [int(p) for p in pid_file.read_text().split()]
    try:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "inner test failed on purpose" in result.stdout
        assert "tansu dc1 (127.0.0.1:" in result.stdout
        assert "tansu target (127.0.0.1:" in result.stdout
        assert "ready in" in result.stdout
        assert [pid for pid in pids if _alive(pid)] == []
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)


def test_freeze_stalls_the_broker_and_thaw_resumes_it(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    topic = unique_topic()
    create_topic(broker.bootstrap, topic, partitions=1)

    broker.freeze()
    assert _process_state(broker.pid) == "T"
    assert not _answers_metadata(broker.bootstrap, timeout=1.0)

    broker.thaw()
    assert _process_state(broker.pid) != "T"
    assert _answers_metadata(broker.bootstrap, timeout=10.0)
    produce(broker.bootstrap, topic, make_records(5, partitions=1))
    assert len(read_all(broker.bootstrap, topic)) == 5


def test_stop_ends_a_frozen_broker(tansu_bin: Path, tmp_path: Path) -> None:
    broker = TansuBroker("frozen", tansu_bin, log_dir=tmp_path)
    broker.start()
    broker.freeze()

    started = time.monotonic()
    broker.stop()

    assert time.monotonic() - started < 5
    assert not broker.running


def test_unique_topic_names_are_distinct_and_safe(unique_topic: Callable[..., str]) -> None:
    names = [unique_topic(), unique_topic(), unique_topic("orders")]

    assert len(set(names)) == 3
    assert names[2].startswith("orders-")
    assert all("." not in n and "_" not in n for n in names)


def test_missing_binary_fails_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)

    with pytest.raises(TansuBinaryMissing, match="make install"):
        find_tansu_binary()


def test_create_topic_stores_config_and_delete_topic_removes_the_data(
    kafka_cluster: ClusterFactory, unique_topic: Callable[..., str]
) -> None:
    bootstrap = kafka_cluster("dc1")["dc1"].bootstrap
    topic = unique_topic()
    create_topic(bootstrap, topic, partitions=2, config={"cleanup.policy": "compact"})
    produce(bootstrap, topic, make_records(4, partitions=2))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient(client_config(bootstrap))  # must outlive the future
    configs = admin.describe_configs([resource])[resource].result(10)
    del admin

    delete_topic(bootstrap, topic)

    assert configs["cleanup.policy"].value == "compact"
    assert topic not in list_topics(bootstrap)
    create_topic(bootstrap, topic, partitions=2)
    assert read_all(bootstrap, topic) == []

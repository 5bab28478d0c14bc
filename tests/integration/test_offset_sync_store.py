"""The OffsetSyncStore and the ProgressTail read a flow's syncs topics and its progress once and then only what was
written since (as MM2's KafkaBasedLogs do)."""

from __future__ import annotations

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.offset_sync_store import OffsetSyncStore
from mm2py.control.progress_store import ProgressTail, read_progress
from mm2py.mirror.offset_syncs import DENSE_SYNC_HEADER, DENSE_SYNC_VALUE
from mm2py.mirror.progress import progress_record, progress_topic
from mm2py.mirror.record_formats import OffsetSync
from tests.harness.kafka_harness import ClusterFactory, Record, create_topic, produce

pytestmark = [pytest.mark.integration]


def sync_records(pairs: list[tuple[int, int]], dense: bool) -> list[Record]:
    headers = [(DENSE_SYNC_HEADER, DENSE_SYNC_VALUE)] if dense else []
    return [
        Record(
            OffsetSync("orders", 0, up, down).record_key(),
            OffsetSync("orders", 0, up, down).record_value(),
            list(headers),
            1_700_000_000_000 + i,
            0,
        )
        for i, (up, down) in enumerate(pairs)
    ]


def test_store_tails_both_syncs_topics_and_translates_from_what_it_has_read(kafka_cluster: ClusterFactory) -> None:
    broker = kafka_cluster("dc1")["dc1"]
    text = (
        f"clusters = dc1, target\ndc1.bootstrap.servers = {broker.bootstrap}\n"
        "target.bootstrap.servers = 127.0.0.1:1\ndc1->target.enabled = true\n"
    )
    flow = build_flow_config(MirrorMakerConfig(parse_properties(text, "t.properties"), {}), Flow("dc1", "target"))
    store = OffsetSyncStore(flow)
    mm2_topic, dense_topic = store.topics
    create_topic(broker.bootstrap, mm2_topic, 1, {"cleanup.policy": "compact"})
    create_topic(broker.bootstrap, dense_topic, 1, {"cleanup.policy": "delete"})
    produce(broker.bootstrap, mm2_topic, sync_records([(0, 0), (99, 99)], dense=False))
    produce(broker.bootstrap, dense_topic, sync_records([(0, 0), (99, 99)], dense=True))

    maps = store.refresh()
    assert store.records_read == 4
    assert maps[("orders", 0)].translate(50, 99).method == "exact"

    produce(broker.bootstrap, dense_topic, sync_records([(100, 150), (199, 249)], dense=True))
    store.read_new()  # what a continuous run does between its checkpoints
    assert store.records_read == 6  # only the two new syncs were read
    maps = store.refresh()
    assert store.records_read == 6
    assert maps[("orders", 0)].translate(120, 199).offset == 170
    store.refresh()
    assert store.records_read == 6


def test_progress_tail_reads_only_what_was_written_since_and_answers_as_a_whole_read(
    kafka_cluster: ClusterFactory,
) -> None:
    broker = kafka_cluster("target")["target"]
    settings = {"bootstrap.servers": broker.bootstrap}
    topic = progress_topic("dc1")
    create_topic(broker.bootstrap, topic, 3, {"cleanup.policy": "compact"})

    def written(offsets: dict[tuple[str, int], int | None], partition: int) -> None:
        records = []
        for (t, p), last in offsets.items():
            record = progress_record("dc1", t, p, 0 if last is None else last)
            records.append(Record(record.key, None if last is None else record.value, [], 1_700_000_000_000, partition))
        produce(broker.bootstrap, topic, records)

    tail = ProgressTail("target", settings, "dc1")
    assert tail.refresh() == {}
    written({("orders", 0): 9, ("orders", 1): 4, ("other", 0): 7}, 0)
    written({("orders", 2): 1}, 2)
    assert (
        tail.refresh()
        == read_progress("target", settings, "dc1")
        == {
            ("orders", 0): 9,
            ("orders", 1): 4,
            ("other", 0): 7,
            ("orders", 2): 1,
        }
    )
    assert tail.tail.records_read == 4
    written({("orders", 0): 19, ("other", 0): None}, 0)  # a tombstone: that partition's progress was reset
    tail.read_new()  # between checkpoints: the next refresh answers from what was read here
    assert tail.tail.records_read == 6
    assert (
        tail.refresh()
        == read_progress("target", settings, "dc1")
        == {
            ("orders", 0): 19,
            ("orders", 1): 4,
            ("orders", 2): 1,
        }
    )
    assert tail.tail.records_read == 6  # only the two new records were read
    assert tail.refresh() == {("orders", 0): 19, ("orders", 1): 4, ("orders", 2): 1}
    assert tail.tail.records_read == 6

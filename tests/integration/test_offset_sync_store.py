"""The OffsetSyncStore reads a flow's syncs topics once and then only what was written since (as MM2's does)."""

from __future__ import annotations

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.offset_sync_store import OffsetSyncStore
from mm2py.mirror.offset_syncs import DENSE_SYNC_HEADER, DENSE_SYNC_VALUE
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
    maps = store.refresh()
    assert store.records_read == 6  # only the two new syncs were read
    assert maps[("orders", 0)].translate(120, 199).offset == 170
    store.refresh()
    assert store.records_read == 6

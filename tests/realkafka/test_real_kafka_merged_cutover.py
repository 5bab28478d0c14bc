"""Three sources merged into one topic on T (IdentityReplicationPolicy), cut over together on real Kafka:
``mm2py cutover --flow A->T,C->T,D->T``. A group that consumed the topic on each source, at a different place on
each, resumes on T where it skips nothing of any source, and reads again exactly the records the report counts
for each source (from their dense offset syncs), counted record by record by consumers that record every
record they process. Where the group has no committed offset on a source's partition (it read other partitions
there) it has read none of that source's records there, and must not start on T past the first of them.

Sources: the session's Kafka 4.3.1 node, a Kafka 4.4.0 node and the 4.3.1 node with an authorizer (mm2py and
the harness reach it as a super user); T is the session's shared target. Only uniquely named topics and groups
are written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.kafka_harness import end_offsets, make_records, produce
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import IDENTITY, unique_alias, write_real_config
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
COPIED, LATER = 3_000, 1_000  # per source: copied by `run --once` first, then written before the cut-over
PROCESSED = {"a": COPIED + LATER, "c": 1_500, "d": 2_500}  # what the group processed on each source


def test_three_sources_merged_into_one_topic_cut_over_together_skip_nothing_and_re_read_what_the_report_counts(
    real_kafka: KafkaCluster,
    real_kafka_versions: Callable[[str], KafkaCluster],
    real_kafka_acl: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    clusters = {"a": real_kafka, "c": real_kafka_versions("4.4.0"), "d": real_kafka_acl}
    t = real_kafka_target
    topic = unique_topic("orders")
    aliases = {name: unique_alias(name) for name in clusters}
    tgt = unique_alias("t")
    records = {}
    for seed, (name, cluster) in enumerate(clusters.items(), start=51):
        cluster.create_topic(topic, partitions=PARTITIONS)
        records[name] = make_records(COPIED + LATER, partitions=PARTITIONS, seed=seed)
        produce(cluster.bootstrap, topic, records[name][:COPIED])
    body = "".join(f"{alias}->{tgt}.enabled = true\n" for alias in aliases.values())
    body += f"topics = {topic}\nreplication.policy.class = {IDENTITY}\nemit.heartbeats.enabled = false\n"
    bootstraps = {aliases[n]: c.bootstrap for n, c in clusters.items()} | {tgt: t.bootstrap}
    config = write_real_config(tmp_path / "mm2.properties", bootstraps, body)
    first = mm2py("run", str(config), "--once")
    assert first.returncode == 0, first.stderr

    group = f"billing-{topic}"
    on_source: dict[str, RecordingConsumer] = {}
    for name, cluster in clusters.items():
        produce(cluster.bootstrap, topic, records[name][COPIED:])  # B lacks these: the cut-over copies them
        consumer = RecordingConsumer(aliases[name], cluster.bootstrap, group, topic, f"billing-on-{name}")
        consumer.consume(until_records=PROCESSED[name])
        consumer.close()
        on_source[name] = consumer

    flows = ",".join(f"{alias}->{tgt}" for alias in aliases.values())
    switched = mm2py(
        "cutover", str(config), "--flow", flows, "--groups", re.escape(group), "--quiet-seconds", "1", "--json"
    )
    assert switched.returncode == 0, switched.stderr
    report = json.loads(switched.stdout)
    assert sorted((c["source"], c["holds_all"], c["source_end_offsets"]) for c in report["topics"]) == sorted(
        (alias, True, COPIED + LATER) for alias in aliases.values()
    )
    assert all(m["method"] == "exact" and m["skipped"] == 0 for m in report["groups"]), report["groups"]
    assert len(report["marks"]) == 3 and report["committed"] == {group: PARTITIONS}
    # On each partition every source's row names the same committed offset: the smallest of their translations.
    committed = {(m["partition"], m["target_offset"]) for m in report["groups"]}
    assert len(committed) == PARTITIONS, committed
    read_again = {alias: 0 for alias in aliases.values()}
    for m in report["groups"]:
        read_again[m["source"]] += m["read_again"]

    on_t = RecordingConsumer(tgt, t.bootstrap, group, topic, "billing-on-t")
    try:
        on_t.consume(until_ends=end_offsets(t.bootstrap, topic))
    finally:
        on_t.close()
    figures: dict[str, tuple[int, int, int, int]] = {}
    for name, alias in aliases.items():
        ids = [r.value or b"" for r in records[name]]
        mine = set(ids)
        on_t_of_source = [p for p in on_t.processed if p.record_id in mine]
        twice, skipped = once_per_group(on_source[name].processed + on_t_of_source, ids)
        figures[alias] = (len(on_source[name].processed), len(on_t_of_source), twice, skipped)
    record_property("processed_on_source_on_t_twice_skipped", figures)
    print(f"FIGURES merged cut-over: per source (on source, on T, twice, skipped) {figures}; report {read_again}")
    for alias in aliases.values():
        assert figures[alias][3] == 0, figures  # nothing of any source skipped
        assert figures[alias][2] == read_again[alias], (alias, figures, read_again)  # re-read exactly as reported
    assert len(on_t.processed) == sum(f[1] for f in figures.values())  # nothing on T that no source wrote

"""``mm2py cutover`` takes the flow from a continuous ``mm2py run`` that holds it, on real Kafka: no process is
stopped by hand. A cut-over refused by a check gives the flow back (the run copies on), one that passes leaves
the run standing by and then ends the flow in it; every record reaches B once, in order, and each group
processes every record once across A and B.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import end_offsets, make_records, produce, read_all, records_in
from tests.harness.mm2py_cli import mm2py
from tests.harness.real_kafka import KafkaCluster
from tests.harness.real_kafka_mm2 import one_flow_config
from tests.harness.recording_consumer import RecordingConsumer, once_per_group

pytestmark = [pytest.mark.realkafka, pytest.mark.spark]

PARTITIONS = 4
FIRST, SECOND = 6_000, 4_000  # copied by the run before the refused cut-over, and after it (given back)
BEHIND = 2_500  # records the lagging group processed on A


def test_a_cut_over_takes_the_flow_from_a_running_run_which_resumes_when_refused_and_stands_down_when_cut_over(
    real_kafka: KafkaCluster,
    real_kafka_target: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    a, b = real_kafka, real_kafka_target
    topic = a.create_topic(unique_topic("orders"), partitions=PARTITIONS)
    config, src, tgt = one_flow_config(tmp_path / "mm2.properties", a.bootstrap, b.bootstrap, topic)
    flow, remote = f"{src}->{tgt}", f"{src}.{topic}"
    ahead, behind = f"ahead-{topic}", f"behind-{topic}"
    groups = f"{re.escape(ahead)}|{re.escape(behind)}"
    records = make_records(FIRST + SECOND, partitions=PARTITIONS, seed=37)
    produce(a.bootstrap, topic, records[:FIRST])

    with MirrorRun(config, tmp_path / "run.log") as run:
        run.wait_for(lambda: records_in(b.bootstrap, remote) == FIRST, 180, "the run to copy the first records")
        ahead_a = RecordingConsumer(src, a.bootstrap, ahead, topic, "ahead-app-on-a")
        ahead_a.consume(until_ends=end_offsets(a.bootstrap, topic))

        # A member still in `ahead` on A: the run hands the flow over, the check refuses, the flow goes back.
        refused = mm2py("cutover", str(config), "--flow", flow, "--groups", groups, "--quiet-seconds", "1")
        assert refused.returncode == 1, refused.stderr
        assert f"group {ahead} has 1 member(s) on {src}" in refused.stderr, refused.stderr
        run.wait_for(lambda: "gave the flow back; taking the lease again" in run.log_text(), 60, "the flow back")
        produce(a.bootstrap, topic, records[FIRST:])
        run.wait_for(lambda: records_in(b.bootstrap, remote) == FIRST + SECOND, 120, "the run to copy on")
        ahead_a.consume(until_ends=end_offsets(a.bootstrap, topic))
        ahead_a.close()
        behind_a = RecordingConsumer(src, a.bootstrap, behind, topic, "behind-app-on-a")
        behind_a.consume(until_records=BEHIND)
        behind_a.close()

        started = time.monotonic()
        switched = mm2py("cutover", str(config), "--flow", flow, "--groups", groups, "--quiet-seconds", "1", "--json")
        took = time.monotonic() - started
        assert switched.returncode == 0, switched.stderr
        report = json.loads(switched.stdout)
        (handover,) = report["handovers"]
        assert re.fullmatch(rf".+:\d+ \(since .+\) handed {re.escape(flow)} over in [\d.]+ s and stands by", handover)
        assert [(t["holds_all"], t["source_end_offsets"]) for t in report["topics"]] == [(True, FIRST + SECOND)]
        assert all((m["method"], m["read_again"], m["skipped"]) == ("exact", 0, 0) for m in report["groups"])
        # The flow was the run's only one: with it cut over, the run has nothing left and ends by itself.
        assert run.proc.wait(60) == 0, run.log_text()
    log = run.log_text()
    assert f"flow={flow}: `mm2py cutover`" in log and "asks for the flow; handing it over" in log, log
    assert f"flow={flow} was cut over at" in log and "this run copies nothing more for it" in log, log
    assert "Traceback" not in log, log

    # Every record on B once, in order per partition, whichever of the run and the cut-over copied it.
    def by_partition(bootstrap: str, name: str) -> dict[int, list[bytes | None]]:
        rows = sorted(read_all(bootstrap, name), key=lambda r: (r.partition, r.offset))
        return {p: [r.value for r in rows if r.partition == p] for p in range(PARTITIONS)}

    assert by_partition(b.bootstrap, remote) == by_partition(a.bootstrap, topic)

    # Each group, now on B, reads to the end: every record once across A and B.
    ids = [r.value or b"" for r in records]
    b_ends = end_offsets(b.bootstrap, remote)
    figures: dict[str, tuple[int, int, int, int]] = {}
    for group, on_a in ((ahead, ahead_a), (behind, behind_a)):
        on_b = RecordingConsumer(tgt, b.bootstrap, group, remote, f"{group}-app-on-b")
        try:
            on_b.consume(until_ends=b_ends)
        finally:
            on_b.close()
        figures[group] = (
            len(on_a.processed),
            len(on_b.processed),
            *once_per_group(on_a.processed + on_b.processed, ids),
        )
    record_property("processed_on_a_on_b_twice_skipped", figures)
    print(f"FIGURES cutover with hand-over {took:.1f} s; per group (on A, on B, twice, skipped): {figures}")
    assert figures[ahead] == (FIRST + SECOND, 0, 0, 0), figures
    assert figures[behind] == (BEHIND, FIRST + SECOND - BEHIND, 0, 0), figures

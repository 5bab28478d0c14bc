"""The steps the cut-over drill's scenarios share (bench/cutover_drill.py, bench/cutover_merged.py): an mm2py
command run as an operator runs it, waiting on a flow's lease, a topic's values per partition, and a group reading
a target topic to its end. In a module of their own so that each scenario's module stays readable on its own.
"""

from __future__ import annotations

import subprocess
import time

from mm2py.control.lease import lease_group
from mm2py.librdkafka.admin import ClusterAdmin
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import read_all
from tests.harness.mm2py_cli import mm2py_argv
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster
from tests.harness.recording_consumer import Processed, RecordingConsumer


def command(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``mm2py ARGV`` in a process of its own (as an operator runs it), and its wall time."""
    started = time.monotonic()
    done = subprocess.run(mm2py_argv(*argv), capture_output=True, text=True, timeout=600, check=False)
    return done, round(time.monotonic() - started, 1)


def await_lease(run: MirrorRun, target: KafkaCluster, src: str, tgt: str, held: bool) -> None:
    """Until a run holds the flow's lease (a member in its lease group on the target), or none does."""
    members = ClusterAdmin(tgt, {"bootstrap.servers": target.bootstrap}).describe_group
    what = "the run to hold the flow's lease" if held else "the killed run's lease to lapse"
    poll_until(lambda: bool(members(lease_group(src, tgt)).members) == held, 120, what, log=run.log)


def values_per_partition(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every record's value (the drill's record ids), per partition in offset order."""
    by_partition: dict[int, list[bytes]] = {}
    for r in read_all(bootstrap, topic, timeout=300):
        by_partition.setdefault(r.partition, []).append(r.value or b"")
    return by_partition


def read_on_target(
    tgt: str, target: KafkaCluster, group: str, topic: str, ends: dict[int, int], client_id: str
) -> list[Processed]:
    """The group's consumer on the target, up to ``ends`` (nothing competes with it any more: it runs in the
    drill's process)."""
    member = RecordingConsumer(tgt, target.bootstrap, group, topic, client_id)
    try:
        member.consume(until_ends=ends)
    finally:
        member.close()
    return member.processed

"""mm2py against real Kafka clusters: properties files naming them, unique cluster aliases, MM2's internal topics.

Why aliases are unique per test: the session-scoped real clusters outlive a test, and MM2 names internal
topics after aliases (``mm2-offsets.<source>.internal``, ``<source>.checkpoints.internal``,
``mm2-offset-syncs.<other>.internal``), so a fixed alias would make tests read each other's progress.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

from mm2py.control.progress_store import read_replication_state
from mm2py.mirror.record_formats import Checkpoint
from tests.harness.kafka_harness import Record, read_all
from tests.harness.mm2py_cli import ONE_NODE_CLUSTER

# Like tests/integration/mm2py_cli.SMALL_CLUSTER, for one-node real clusters (RF 1 everywhere). The lease
# 6 s is Kafka's group.min.session.timeout.ms: a real broker refuses a shorter lease session.
REAL_SMALL_CLUSTER = ONE_NODE_CLUSTER + "mm2py.lease.session.timeout.ms = 6000\n"
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def unique_alias(prefix: str) -> str:
    """A cluster alias no other test uses: letters and digits only (aliases become parts of topic names)."""
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def write_real_config(
    path: Path, bootstraps: Mapping[str, str], body: str, cluster_settings: str = REAL_SMALL_CLUSTER
) -> Path:
    """An MM2 properties file: ``clusters``, one ``<alias>.bootstrap.servers`` per cluster, settings, ``body``."""
    lines = [f"clusters = {', '.join(bootstraps)}"]
    lines += [f"{alias}.bootstrap.servers = {bootstrap}" for alias, bootstrap in bootstraps.items()]
    path.write_text("\n".join(lines) + "\n" + cluster_settings + body)
    return path


def one_flow_config(
    path: Path,
    source: str,
    target: str,
    topic: str,
    extra: str = "",
    *,
    exactly_once: bool = False,
    cluster_settings: str = REAL_SMALL_CLUSTER,
) -> tuple[Path, str, str]:
    """One flow ``src->tgt`` under fresh aliases copying ``topic`` (bootstraps given), exactly-once if asked:
    (the file, the source alias, the target alias)."""
    src, tgt = unique_alias("src"), unique_alias("tgt")
    body = f"{src}->{tgt}.enabled = true\ntopics = {topic}\n"
    if exactly_once:
        body += f"{tgt}.exactly.once.source.support = enabled\n"
    config = write_real_config(path, {src: source, tgt: target}, body + extra, cluster_settings)
    return config, src, tgt


def latest_checkpoints(records: list[Record]) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint per (group, topic, partition) of a read of ``<source>.checkpoints.internal``;
    records that are not checkpoints (seal records of a compaction) are skipped, as MM2's readers skip them."""
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for r in records:
        try:
            cp = Checkpoint.from_record(r.key, r.value)
        except ValueError:
            continue
        latest[(cp.consumer_group_id, cp.topic, cp.partition)] = cp
    return latest


def kept_ends(target_bootstrap: str, source_alias: str, topic: str) -> dict[int, int]:
    """The source end offsets a run has kept on the target per partition of ``topic`` (its loss records'
    ``end``: its last listing of the source beyond what it had copied), as ``failover`` reads them."""
    state = read_replication_state("target", {"bootstrap.servers": target_bootstrap}, source_alias)
    return {p: s.end for (t, p), s in state.losses.items() if t == topic}


def replicated_to(target_bootstrap: str, source_alias: str, topic: str) -> dict[int, int]:
    """The first offset of each partition of ``topic`` a run has not yet recorded as copied (its progress + 1)."""
    state = read_replication_state("target", {"bootstrap.servers": target_bootstrap}, source_alias)
    return {p: last + 1 for (t, p), last in state.progress.items() if t == topic}


def checkpointed(target_bootstrap: str, source_alias: str, group: str, remote: str) -> dict[int, int]:
    """The upstream offset of ``group``'s latest checkpoint per partition of ``remote``, as MM2's reader picks it."""
    records = read_all(target_bootstrap, f"{source_alias}.checkpoints.internal")
    return {p: cp.upstream_offset for (g, t, p), cp in latest_checkpoints(records).items() if (g, t) == (group, remote)}

"""mm2py's own configuration keys, all under ``mm2py.``: the copy engine, Spark, leases, metrics.

MM2 ignores these keys, so a file written for mm2py still runs on MirrorMaker 2 (and the other way round);
``mm2py validate`` knows them with their types and defaults like MM2's own.
"""

from __future__ import annotations

from mm2py.config.key_types import INT, LG, TS, B, KeyDef, S, k

MM2PY_KEYS: dict[str, KeyDef] = {
    d.name: d
    for d in (
        k("mm2py.spark.master", S, "local[*]", "Spark master URL for run", "M"),
        k("mm2py.spark.deploy-mode", S, "client", "Spark deploy mode", "M", choices=("client", "cluster")),
        k(
            "mm2py.range.max.records",
            INT,
            "500000",
            "the most records of one partition that one range (what a copy task moves of it in one round) holds",
            "M",
            minimum=1,
        ),
        k(
            "mm2py.continuous.tasks",
            S,
            "follow",
            "continuous mode on the batch path: follow = copy tasks follow their partitions until the run stops or "
            "the flow's assignment changes, the periodic work running beside them; rounds = one Spark job per "
            "round, the periodic work between them",
            "M",
            choices=("follow", "rounds"),
        ),
        k(
            "mm2py.continuous.fetch.min.interval.ms",
            INT,
            "20",
            "the least time between two fetches from one source broker by a following task (mm2py.continuous.tasks "
            "= follow, batch path): records that arrive meanwhile come in one answer, so a flow whose records "
            "arrive a few at a time fetches less often, for at most this much more latency; 0: fetch again as "
            "soon as an answer is taken, as Kafka's consumer does (cheaper for a flow over a few partitions, whose "
            "answers already carry whole producer batches)",
            "M",
            minimum=0,
        ),
        k(
            "mm2py.retry.timeout.seconds",
            INT,
            "300",
            "how long a run retries failing batches (broker stalls, task failures) before it gives up",
            "M",
            minimum=0,
        ),
        k(
            "mm2py.lease.enabled",
            B,
            "true",
            "a run holds a lease on each flow (a consumer-group membership on the target), so one run copies it",
            "M",
        ),
        k(
            "mm2py.lease.session.timeout.ms",
            INT,
            "10000",
            "how long a dead lease holder keeps its flow before a standby takes over (the target broker must allow "
            "it: group.min.session.timeout.ms, 6000 by default)",
            "M",
            minimum=1000,
        ),
        k(
            "mm2py.offset-syncs.dense.retention.ms",
            LG,
            "604800000",
            "how long mm2py's dense offset syncs (its own topic, cleanup.policy=delete) are kept",
            "M",
            minimum=-1,
        ),
        k(
            "mm2py.offset-syncs.dense.enabled",
            B,
            "true",
            "also sync the first and last record of every run, for exact offset translation",
            "M",
        ),
        k(
            "mm2py.provenance.header.enabled",
            B,
            "false",
            "stamp each copied record with its origin (source cluster, topic, partition, offset)",
            "M",
        ),
        k(
            "mm2py.copy.mode",
            S,
            "auto",
            "how records are copied: batch forwards whole record batches, record re-produces each record, auto "
            "takes batch unless the flow needs per-record work",
            "M",
            choices=("auto", "batch", "record"),
        ),
        k(
            "mm2py.metrics.port",
            INT,
            "0",
            "port of the Prometheus /metrics endpoint that run serves while it runs (0: no endpoint)",
            "M",
            minimum=0,
        ),
        k("mm2py.metrics.host", S, "0.0.0.0", "address the /metrics endpoint listens on", "M"),
        k(
            "mm2py.source.loss",
            S,
            "warn",
            "what a run does when records left the source before they were replicated (retention, DeleteRecords, "
            "a re-created topic): warn counts them (lost=N, mm2py lag, mm2py_records_lost_total) and goes on; "
            "fail stops the flow (exit 3) before anything after the gap is copied",
            "M",
            choices=("warn", "fail"),
        ),
        k(
            "mm2py.throughput.max.bytes.per.second",
            LG,
            "0",
            "the most a flow copies per second, in bytes of the record batches it writes (keys and values on the "
            "record path), shared by its partitions and tasks in proportion to their partitions; 0: no "
            "limit",
            "M",
            minimum=0,
        ),
        k(
            "mm2py.start.timestamp",
            TS,
            None,
            "where a partition without progress starts: at the first record at or after this time (ISO 8601, "
            "or epoch milliseconds), instead of auto.offset.reset; the start is recorded as progress at once",
            "M",
        ),
    )
}
# mm2py keys that also work per flow (``A->B.mm2py.source.loss``), the flow-level value winning: they decide how
# one flow behaves, where the others tune the run as a whole.
FLOW_MM2PY_KEYS = frozenset({"mm2py.source.loss", "mm2py.start.timestamp", "mm2py.throughput.max.bytes.per.second"})
SPARK_CONF_PREFIX = "mm2py.spark.conf."
# mm2py's own keys under an earlier name, read as the new one with a warning: "batch" names Kafka's record
# batches only.
MM2PY_RENAMED_KEYS = {"mm2py.batch.max.records": "mm2py.range.max.records"}

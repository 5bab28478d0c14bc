"""Keys a MirrorMaker 2 file may hold that mm2py accepts but does not act on, and what it does instead.

Why accept them at all: a file MM2 runs with must be valid here, so a flow can move between MM2 and mm2py;
``mm2py validate`` names each such key with what mm2py does in its place, rather than failing or staying silent.
"""

from __future__ import annotations

# MM2 keys mm2py accepts (so a file MM2 runs with is valid here) but does not act on, and what it does instead.
NOT_ACTED_ON: dict[str, str] = {
    "tasks.max.enforce": "a continuous flow never runs more than tasks.max copy tasks",
    "transforms": "mm2py copies records unchanged; Connect transforms (SMTs) are not run",
    "predicates": "mm2py runs no Connect transforms, so their predicates do nothing",
    "key.converter": "mm2py copies keys as bytes, as MM2's ByteArrayConverter does",
    "value.converter": "mm2py copies values as bytes, as MM2's ByteArrayConverter does",
    "header.converter": "mm2py copies headers as bytes",
    "refresh.groups.enabled": "mm2py lists the source's groups at every checkpoint (emit.checkpoints.interval.seconds)",
    "refresh.groups.interval.seconds": "mm2py lists the source's groups at every checkpoint "
    "(emit.checkpoints.interval.seconds)",
    "errors.tolerance": "mm2py never skips a record: a failure is retried for mm2py.retry.timeout.seconds, "
    "then the run stops",
    "errors.retry.timeout": "mm2py retries failures for mm2py.retry.timeout.seconds",
    "errors.retry.delay.max.ms": "mm2py backs off up to 30 s between retries",
    "errors.log.enable": "mm2py logs every failure it retries",
    "errors.log.include.messages": "mm2py never logs record contents",
    "config.action.reload": "mm2py reads the file once per run; restart it to apply changes",
    "metric.reporters": "mm2py serves Prometheus metrics (run --metrics-port, mm2py.metrics.port)",
    "forwarding.admin.class": "mm2py uses its own admin client",
    "exactly.once.support": "mm2py's exactly-once is switched by <target>.exactly.once.source.support",
    "transaction.boundary": "mm2py commits each copy task's transaction about every second and when the task "
    "ends (MM2's default, poll, commits every poll's worth)",
    "offset.flush.timeout.ms": "mm2py waits up to 300 s for its progress records to be acknowledged; one that "
    "is not fails the copy task, and Spark runs it again",
    "dedicated.mode.enable.internal.rest": "mm2py nodes coordinate through a lease on the target, "
    "no REST (mm2py.lease.*)",
    "listeners": "mm2py has no REST server",
    # mm2py's own key of earlier releases: tasks followed for this long, then a new Spark job started.
    "mm2py.continuous.follow.ms": "copy tasks follow their partitions until the run stops "
    "(mm2py.continuous.tasks = follow); mm2py.continuous.tasks = rounds copies in rounds of jobs",
    "config.storage.topic": "mm2py keeps no Connect configs topic",
    "config.storage.replication.factor": "mm2py keeps no Connect configs topic",
    "status.storage.topic": "mm2py keeps no Connect status topic",
    "status.storage.replication.factor": "mm2py keeps no Connect status topic",
    "status.storage.partitions": "mm2py keeps no Connect status topic",
}


# Kafka Connect worker settings: MM2 hands them to its herders' workers (top level, or `<target>.` for the herders
# into that target), so they are valid in an MM2 file; mm2py runs no Connect worker.
CONNECT_WORKER_KEYS = frozenset(
    (
        "plugin.discovery",
        "plugin.path",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "rebalance.timeout.ms",
        "worker.sync.timeout.ms",
        "worker.unsync.backoff.ms",
        "scheduled.rebalance.max.delay.ms",
        "connect.protocol",
        "connector.client.config.override.policy",
        "key.converter.schemas.enable",
        "value.converter.schemas.enable",
        "offset.storage.file.filename",
        "consumer.override.policy",
    )
)


def not_acted_on(name: str) -> str | None:
    """What mm2py does instead of what ``name`` asks for; None for a key mm2py acts on."""
    base = name.split(".", 1)[0] if name.startswith(("transforms.", "predicates.")) else name
    return NOT_ACTED_ON.get(base)

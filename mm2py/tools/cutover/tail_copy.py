"""Keeping the source's divergent tail on the target: ``mm2py failback`` copies it into a side topic, partition
for partition, then checks each side partition's end offset and last record.

Why here and not in a Spark task: the tail is bounded (what the source took after the cut-over, usually a few
seconds of writes), it is copied once, and failback must run where no Spark is set up. The rule that matters
still holds: a record's bytes go from one consumer of the source to one producer of the target in this one
process, and nothing else is planned or copied here.

The copy is idempotent: before its first record, the side partitions' ends are recorded with the cut-over they
belong to (control/failback_record.py). After that start, a side partition holds the tail's first records in
order (one idempotent producer, no transactions), so its end offset says how many are kept already. A failback
that stopped half way (a cluster lost, a crash) and runs again skips that many and writes the rest; one that had
finished writes nothing; a later cut-over's tail starts after the earlier one's. Driver side only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from mm2py.config.flow import FlowConfig
from mm2py.control.cutover_mark import CutoverMark
from mm2py.control.failback_record import FailbackRecord, read_failback_record, write_failback_record
from mm2py.errors import CheckFailed, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.clients import new_producer
from mm2py.librdkafka.partition_reader import PartitionReader
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.tools.cutover.tail import TailCopy, TailRange, side_starts

log = logging.getLogger(__name__)

_READ_TIMEOUT_S = 120.0


def ensure_side_topics(
    flow: FlowConfig, target: ClusterAdmin, tails: Iterable[TailRange], partitions: Mapping[str, int]
) -> None:
    """Create each side topic with its source topic's partition count (``partitions``), so that source partition
    p lands in side partition p; one that exists with fewer partitions is refused, naming it."""
    wanted = {t.side_topic: partitions[t.topic] for t in tails}
    existing = target.list_topics()
    for name, count in sorted(wanted.items()):
        if name in existing and existing[name].partitions < count:
            raise CheckFailed(
                f"side topic {name} on {flow.target} has {existing[name].partitions} partition(s), fewer than "
                f"the {count} of its source topic: name another with --tail-topic"
            )
    new = [
        NewTopic(name, count, flow.replication_factor) for name, count in sorted(wanted.items()) if name not in existing
    ]
    for name, error in target.create_topics(new).items():
        if error is not None:
            raise KafkaOperationError(flow.target, f"creating side topic {name}", error.cause, code=error.code)
        log.info("flow=%s created side topic %s on %s", flow.name, name, flow.target)
    if new:
        _await_leaders(target, [(t.topic, p) for t in new for p in range(t.num_partitions)])


def _await_leaders(target: ClusterAdmin, partitions: list[TopicPartition], timeout_s: float = 30.0) -> None:
    """A topic just created answers "not leader" until its leaders are known to every broker: poll its end
    offsets until each partition answers (the copy must not start half placed), naming it after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            target.list_offsets(partitions, "latest")
            return
        except KafkaOperationError:
            if time.monotonic() > deadline:
                raise
        threading.Event().wait(0.2)


def preserve_tail(
    flow: FlowConfig, target: ClusterAdmin, mark: CutoverMark, tails: list[TailRange], partitions: Mapping[str, int]
) -> list[TailCopy]:
    """Keep the tails of ``mark``'s cut-over in their side topics (``partitions``: source topic -> partition count):
    create them, record where this tail begins in each (unless a failback of this cut-over recorded it), copy."""
    pending = [t for t in tails if t.count > 0]
    if not pending:
        return []
    ensure_side_topics(flow, target, pending, partitions)
    ends = target.list_offsets([(t.side_topic, t.partition) for t in pending], "latest")
    starts, new = side_starts(read_failback_record(flow, target), mark, ends)
    if new:
        record = FailbackRecord(flow.name, mark.at_ms, tuple((t, p, o) for (t, p), o in sorted(starts.items())))
        write_failback_record(flow, target, record)
    return copy_tail(flow, target, pending, starts)


def copy_tail(
    flow: FlowConfig, target: ClusterAdmin, tails: list[TailRange], starts: Mapping[TopicPartition, int]
) -> list[TailCopy]:
    """Copy every tail into its side topic (key, value, headers, timestamp; partition for partition, in order)
    from its side partition's start (``starts``), skipping what an earlier failback kept; then verify."""
    pending = [t for t in tails if t.count > 0]
    if not pending:
        return []
    ends = target.list_offsets([(t.side_topic, t.partition) for t in pending], "latest")
    kept = {side: end - starts[side] for side, end in ends.items()}
    for (name, partition), n in sorted(kept.items()):
        if n < 0:
            raise CheckFailed(
                f"side topic {name}-{partition} on {flow.target} ends at {ends[(name, partition)]}, before the "
                f"start recorded for this tail ({starts[(name, partition)]}): it was re-created or truncated"
            )
    producer = new_producer({**flow.target_producer.settings(), "enable.idempotence": "true", "acks": "all"})
    failures: list[KafkaError] = []
    records: dict[TopicPartition, int] = {}
    copied: dict[TopicPartition, int] = {}
    last: dict[TopicPartition, Any] = {}
    for msg in _read_tails(flow, pending):
        tp = (msg.topic() or "", msg.partition() or 0)
        side = _side(pending, tp)
        index = records.get(tp, 0)
        records[tp] = index + 1
        last[tp] = msg
        if index < kept[(side.side_topic, side.partition)]:
            continue  # kept by an earlier failback
        producer.produce(
            side.side_topic,
            msg.value(),
            msg.key(),
            side.partition,
            headers=msg.headers() or None,
            timestamp=msg.timestamp()[1],
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
        copied[tp] = copied.get(tp, 0) + 1
        producer.poll(0)
    if producer.flush(60) > 0 or failures:
        cause = failures[0].str() if failures else "not acknowledged within 60 s"
        raise KafkaOperationError(flow.target, "copying the divergent tail into its side topic", cause)
    return _verify(flow, target, pending, (starts, kept), records, copied, last)


def _side(tails: list[TailRange], tp: TopicPartition) -> TailRange:
    return next(t for t in tails if (t.topic, t.partition) == tp)


def _read_tails(flow: FlowConfig, tails: list[TailRange]) -> Iterable[Any]:
    """The tail's committed records, in offset order per partition; a partition stops at the tail's end, so
    records written to the source after failback listed it are left there (and reported by the next run)."""
    settings = {
        **flow.source_consumer.settings(),
        "group.id": f"mm2py-failback-{flow.target}",
        "isolation.level": "read_committed",
    }
    ends = {(t.topic, t.partition): t.to_offset for t in tails}
    starts = {(t.topic, t.partition): t.from_offset for t in tails}
    with PartitionReader(
        flow.source, settings, starts, purpose="reading the divergent tail", timeout_s=_READ_TIMEOUT_S
    ) as reader:
        for msg in reader.records():
            tp = (msg.topic() or "", msg.partition() or 0)
            if msg.offset() >= ends[tp]:
                reader.stop(*tp)
                continue
            yield msg
            if msg.offset() + 1 >= ends[tp]:
                reader.stop(*tp)


def _verify(
    flow: FlowConfig,
    target: ClusterAdmin,
    tails: list[TailRange],
    starts_kept: tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int]],
    records: Mapping[TopicPartition, int],
    copied: Mapping[TopicPartition, int],
    last: Mapping[TopicPartition, Any],
) -> list[TailCopy]:
    """Per partition: the side partition must end at the tail's record count, and its last record must be the
    tail's last (key, value, headers, timestamp). A mismatch is refused, naming the side partition."""
    starts, kept = starts_kept
    sides = [(t.side_topic, t.partition) for t in tails]
    ends = target.list_offsets(sides, "latest")
    lasts = {tp: end - 1 for tp, end in ends.items() if end > starts[tp]}
    written: dict[tuple[str, int], Any] = {}
    if lasts:
        settings = {**flow.target_consumer.settings(), "group.id": f"mm2py-failback-{flow.source}"}
        with PartitionReader(flow.target, settings, lasts, purpose="verifying the side topic") as reader:
            for msg in reader.records():
                written[(msg.topic() or "", msg.partition() or 0)] = msg
    result = []
    for t in tails:
        tp, side = (t.topic, t.partition), (t.side_topic, t.partition)
        copy = TailCopy(
            t.topic,
            t.partition,
            t.side_topic,
            records.get(tp, 0),
            kept[side],
            copied.get(tp, 0),
            starts[side],
            ends[side],
            _same(last.get(tp), written.get(side)),
        )
        if not copy.verified:
            raise CheckFailed(
                f"side topic {t.side_topic}-{t.partition} on {flow.target} does not hold the tail of "
                f"{t.topic}-{t.partition}: it holds {copy.side_end - copy.side_start} record(s) of it from offset "
                f"{copy.side_start}, the tail has {copy.records}"
                + ("" if copy.last_matches else ", and its last record differs from the tail's last")
            )
        result.append(copy)
    return result


def _same(source: Any, side: Any) -> bool:
    if source is None or side is None:
        return source is None and side is None
    return bool(
        source.key() == side.key()
        and source.value() == side.value()
        and (source.headers() or []) == (side.headers() or [])
        and source.timestamp()[1] == side.timestamp()[1]
    )

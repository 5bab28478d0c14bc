"""A batch copy task's own records besides the copied ones: its progress and its offset syncs, written through the
batch path's client (:mod:`mm2py.wire`) like the records, so a task speaks one client to each cluster.

- Progress goes to the target, to the partition Connect's producer chooses for its key (Java's murmur2, which
  librdkafka's ``murmur2_random`` matches for a keyed record): at-least-once through a sender of its own over the
  task's connection and producer id; exactly-once inside the task's transactions
  (:mod:`mm2py.executor.transactional_copy`, which takes its partitions from :class:`ProgressLayout` too).
- Offset syncs go to partition 0 of the syncs topics, as MM2's ``OffsetSyncWriter`` sends them: on the target with
  the progress (or in the transactions); on the source (MM2's default ``offset-syncs.topic.location``) through a
  sender of their own, with the producer settings MM2 gives its offset-syncs producer, connected at their first
  write.

:meth:`ControlWrites.syncs` and :meth:`ControlWrites.progress` are steps (:data:`~mm2py.executor.batch_producer.Steps`)
that end once what they were given is acknowledged, or raise: the caller serves them, waiting or a turn at a time
between the copy loop's own steps, and orders the syncs before the progress that covers them
(:class:`mm2py.executor.batch_results.ProgressRecorder`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafka.partitioner.default import murmur2  # type: ignore[import-untyped]

from mm2py.client_settings import ClientSettings
from mm2py.errors import ReplicationError
from mm2py.executor.batch_producer import Steps, acquiring_producer_ids, sender_settings
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.mirror.progress import progress_record
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.batches import RecordBatch
from mm2py.wire.cluster import Cluster, ProducerIds
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.metadata import partition_count
from mm2py.wire.partition_queue import PartitionQueue, ProducerBatch
from mm2py.wire.sender import Sender

Headers = list[tuple[str, str | bytes | None]] | None
ControlRecord = tuple[bytes, bytes, Headers]  # key, value, headers
# Progress and sync records are well under 200 bytes: a batch of this many stays far below message.max.bytes.
RECORDS_PER_BATCH = 500


def control_batches(records: Sequence[ControlRecord]) -> list[ProducerBatch]:
    """``records`` as batches to send, in order, at most RECORDS_PER_BATCH records each."""
    now = int(time.time() * 1000)
    batches = []
    for first in range(0, len(records), RECORDS_PER_BATCH):
        chunk = records[first : first + RECORDS_PER_BATCH]
        encoded = encode_batch(
            [
                Record(
                    i, now, key, value, tuple((h, v.encode() if isinstance(v, str) else v) for h, v in headers or ())
                )
                for i, (key, value, headers) in enumerate(chunk)
            ]
        )
        batches.append(ProducerBatch(RecordBatch(memoryview(encoded)), []))
    return batches


class ProgressLayout:
    """Where a task's progress and offset syncs go on the target: the progress topic's partition for each range,
    and partition 0 of the syncs topics when they are on the target."""

    def __init__(self, spec: CopySpec, target: Cluster, ranges: Iterable[PartitionRange], timeout_s: float) -> None:
        self.spec = spec
        self.ranges = list(ranges)
        self.partitions = partition_count(target, spec.progress_topic, timeout_s)
        self._keys: dict[TopicPartition, TopicPartition] = {}

    def progress_key(self, rng: PartitionRange) -> TopicPartition:
        """The progress topic's partition for ``rng``: the Java producer's default partitioner on the key, as
        Connect's offset writer chooses it (worked out once per source partition)."""
        source = (rng.topic, rng.partition)
        found = self._keys.get(source)
        if found is None:
            key = progress_record(self.spec.source, rng.topic, rng.partition, 0).key
            found = self._keys[source] = (self.spec.progress_topic, int((murmur2(key) & 0x7FFFFFFF) % self.partitions))
        return found

    def queues(self) -> dict[TopicPartition, PartitionQueue]:
        """A queue for every target partition the task's progress and syncs may go to."""
        keys = {self.progress_key(rng) for rng in self.ranges}
        if self.spec.syncs_on_target:
            keys.update(syncs_keys(self.spec))
        return {(t, p): PartitionQueue(t, p, f"topic={t} partition={p}") for t, p in sorted(keys)}


def syncs_keys(spec: CopySpec) -> list[TopicPartition]:
    """Partition 0 of MM2's syncs topic and of mm2py's dense one (when on)."""
    topics = [spec.syncs_topic, spec.dense_syncs_topic]
    return [(topic, 0) for topic in topics if topic is not None]


class SourceSyncs:
    """The offset syncs' producer on the source: a connection, an idempotent producer id and a sender of their
    own, set up at the first write (a task whose ranges need no sync never connects). ``connect`` opens the
    source (a :class:`~mm2py.wire.connection.KafkaConnection`, or a fake cluster in the unit tests)."""

    def __init__(self, spec: CopySpec, connect: Callable[[], Cluster] | None = None) -> None:
        self.spec = spec
        self.connect = connect or self._connect
        self.connection: Cluster | None = None
        self.sender: Sender | None = None

    def _syncs_producer(self) -> ClientSettings:
        settings = self.spec.syncs_producer_connection
        if settings is None:
            raise ReplicationError(f"flow={self.spec.flow}: offset syncs are disabled, yet a sync was to be written")
        return settings

    def _connect(self) -> Cluster:
        return KafkaConnection.connected(self.spec.source, self._syncs_producer(), self.spec.stall_timeout_s)

    def open(self) -> Steps[Sender]:
        if self.sender is None:
            spec = self.spec
            connection = self.connect()
            try:
                producer = yield from acquiring_producer_ids(spec, connection)
            except BaseException:
                connection.close()  # the next write tries again with a new connection
                raise
            queues = [PartitionQueue(t, p, f"topic={t} partition={p}") for t, p in syncs_keys(spec)]
            settings = sender_settings(spec, self._syncs_producer(), spec.source)
            self.connection, self.sender = connection, Sender(connection, queues, settings, producer)
        return self.sender

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = self.sender = None


class ControlWrites:
    """Writes progress and offset syncs, each write a run of steps that ends once it is acknowledged (the task's
    thread only).

    At-least-once, the target's share goes through a sender of its own over the task's connection, holding only
    the progress and sync partitions: serving it sends no copied record, so a recording at the end of a task
    that failed counts exactly what was acknowledged before it, and the copy loop's sender goes on resending
    its own batches while a recording waits. A write that fails (a partition stopped: not acknowledged within
    ``delivery.timeout.ms``, say) drops its sender, and the next write starts a new one under a new producer id,
    as the record path replaces a producer that failed a delivery. Exactly-once has no target share here (its
    transactions carry it): ``target`` is None."""

    def __init__(
        self,
        spec: CopySpec,
        layout: ProgressLayout,
        source_syncs: SourceSyncs,
        target: Cluster | None = None,
        producer: ProducerIds | None = None,
    ) -> None:
        self.spec = spec
        self.layout = layout
        self.source_syncs = source_syncs
        self.target = target
        self.producer = producer  # the task's own, for the first sender; None: ask for a new one
        self.sender: Sender | None = None

    def progress(self, records: Mapping[PartitionRange, ControlRecord], where: str) -> Steps[None]:
        by_key: dict[TopicPartition, list[ControlRecord]] = {}
        for rng, record in records.items():
            by_key.setdefault(self.layout.progress_key(rng), []).append(record)
        yield from self._write_target(by_key, f"{where} (progress)")

    def syncs(self, records: Mapping[TopicPartition, Sequence[ControlRecord]], where: str) -> Steps[None]:
        if self.spec.syncs_on_target:
            yield from self._write_target(records, f"{where} (offset syncs)")
            return
        try:
            sender = yield from self.source_syncs.open()
            yield from _write(sender, self.spec, self.spec.source, records, f"{where} (offset syncs)")
        except ReplicationError:
            self.source_syncs.close()
            raise

    def _write_target(self, records: Mapping[TopicPartition, Sequence[ControlRecord]], where: str) -> Steps[None]:
        assert self.target is not None, "exactly-once writes progress and syncs on the target in its transactions"
        try:
            if self.sender is None:
                producer = self.producer or (yield from acquiring_producer_ids(self.spec, self.target))
                settings = sender_settings(self.spec, self.spec.producer_connection, self.spec.target)
                self.sender = Sender(self.target, self.layout.queues().values(), settings, producer)
            yield from _write(self.sender, self.spec, self.spec.target, records, where)
        except ReplicationError:
            self.sender = self.producer = None
            raise


def _write(
    sender: Sender, spec: CopySpec, cluster: str, records: Mapping[TopicPartition, Sequence[ControlRecord]], where: str
) -> Steps[None]:
    """Send ``records`` and serve ``sender`` (which holds no copied record) until they are acknowledged; a
    partition that stops, or ``flush_timeout_s`` passing, raises."""
    for key, items in records.items():
        sender.add(key, control_batches(items))
    queues = [sender.queues[key] for key in records]
    deadline = time.monotonic() + spec.flush_timeout_s
    while True:
        stopped = next((q for q in queues if q.failure is not None), None)
        if stopped is not None and stopped.failure is not None:
            raise ReplicationError(
                f"{where}: producing to {stopped.topic}-{stopped.partition} on {cluster} failed: {stopped.failure}",
                code=stopped.failure.name,
                retriable=stopped.failure.retriable,
            )
        if not any(q.busy for q in queues):
            return
        if time.monotonic() > deadline:
            raise ReplicationError(f"{where}: {cluster} did not acknowledge within {spec.flush_timeout_s:.0f} s")
        yield sender.step

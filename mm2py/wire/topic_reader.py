"""Reading a whole topic to its end with the batch path's client: what a retried batch copy task reads its
predecessor's progress with, so the batch path needs no second client for it.

Every partition is fetched from offset 0 until the fetch position reaches the end its own Fetch answer reports
(the high watermark, or the last stable offset under read_committed): the end Connect's ``KafkaBasedLog`` reads
to, which it asks ListOffsets for and the Fetch answers say here. Records come as a consumer delivers them
(control batches and, under read_committed, aborted transactions left out: :mod:`mm2py.wire.read_committed`), in
offset order per partition. Leader moves, lost brokers and retries are the fetcher's (:mod:`mm2py.wire.fetcher`).

A partition whose first records were deleted (DeleteRecords: mm2py never deletes from its internal topics, nor
does MirrorMaker 2) answers OFFSET_OUT_OF_RANGE at offset 0, and the read fails naming it.
"""

from __future__ import annotations

import time

from mm2py.errors import ReplicationError
from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import split_batches
from mm2py.wire.cluster import Cluster
from mm2py.wire.fetcher import Fetcher, FetcherSettings, FetchPartition
from mm2py.wire.metadata import partition_count
from mm2py.wire.read_committed import data_batches

NO_END = 2**62  # the fetcher stops at a partition's end; here the end is learnt from the answers


def read_topic(
    cluster: Cluster, topic: str, *, read_committed: bool, timeout_s: float, purpose: str
) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` on ``cluster`` as (key, value), partition by partition in offset order."""
    deadline = time.monotonic() + timeout_s
    partitions = [FetchPartition(topic, p, 0, NO_END) for p in range(partition_count(cluster, topic, timeout_s))]
    fetcher = Fetcher(cluster, partitions, FetcherSettings(read_committed, stall_timeout_s=timeout_s))
    records: dict[int, list[tuple[bytes | None, bytes | None]]] = {p.partition: [] for p in partitions}
    try:
        while fetcher.any_active():
            if time.monotonic() > deadline:
                raise ReplicationError(
                    f"{purpose}: {topic} on {cluster.alias} not read to its end within {timeout_s:.0f} s"
                )
            for state, part in fetcher.step():
                record_set = split_batches(part.records or b"")
                if not record_set.batches and record_set.truncated_size > state.fetch_bytes:
                    state.fetch_bytes = record_set.truncated_size  # a batch larger than the fetch allowed
                aborted = part.aborted_transactions if read_committed else None
                for batch in data_batches(record_set.batches, aborted):
                    records[state.partition].extend(
                        (r.key, r.value) for r in decode_records(batch) if r.offset >= state.position
                    )
                if record_set.batches:
                    state.position = max(state.position, record_set.batches[-1].next_offset)
                if state.caught_up:
                    state.done = True
            stopped = next((p for p in partitions if p.failure is not None), None)
            if stopped is not None:
                raise ReplicationError(
                    f"{purpose}: reading {topic}-{stopped.partition} on {cluster.alias} failed: {stopped.failure}",
                    code=stopped.failure.name if stopped.failure else None,
                )
    finally:
        fetcher.close()  # the broker's fetch sessions
    return [record for p in partitions for record in records[p.partition]]

"""From a fetched record set to the batches a producer may send: what is forwarded as it came, what is rebuilt.

Most batches go out as they came (:mod:`mm2py.wire.batches`); the ones a broker would refuse, or that reach
outside the range being copied, are rebuilt record by record (:mod:`mm2py.wire.batch_codec`):

- a batch that starts before the fetch position or reaches the range's end keeps only the records inside it, so a
  range copies exactly its offsets, as the record path does;
- a compacted batch (offsets with holes), a LogAppendTime batch and one with the cleaner's delete horizon are
  rebuilt, because a broker refuses them from a producer (``LogValidator``);
- a batch above the target producer's ``message.max.bytes`` is split to fit, as a librdkafka producer would
  re-batch its records; a single record above it stops the partition before that record, never skipping it;
- control batches, and under read_committed the batches of aborted transactions, are dropped
  (:mod:`mm2py.wire.read_committed`).
"""

from __future__ import annotations

from mm2py.wire.batch_codec import RecordTooLarge, needs_rebuild, rebuild, split_to_limit
from mm2py.wire.batches import RecordBatch, RecordBatchError, split_batches
from mm2py.wire.cluster import Buffer
from mm2py.wire.errors import CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, WireError
from mm2py.wire.fetcher import FetchPartition
from mm2py.wire.partition_queue import ProducerBatch
from mm2py.wire.read_committed import data_batches


class ForwardingError(Exception):
    """The partition cannot be copied past its position: a malformed batch, or a record too large to send."""

    def __init__(self, error: WireError) -> None:
        self.error = error
        super().__init__(str(error))


def batches_to_send(
    state: FetchPartition,
    records: Buffer,
    aborted: list[tuple[int, int]] | None,
    max_batch_bytes: int,
    target: str,
) -> list[ProducerBatch] | None:
    """The batches to send for one partition's fetched ``records``, up to the batch holding its range's end,
    moving ``state.position`` past them; None when the data holds nothing at or after the position (then a
    batch larger than the fetch allowed is asked for whole next time). ``aborted`` is the response's aborted
    transactions under read_committed, None under read_uncommitted. Raises ForwardingError."""
    try:
        split = split_batches(records)
    except RecordBatchError as exc:
        raise ForwardingError(WireError(CORRUPT_MESSAGE, str(exc))) from None
    batches = [b for b in split.batches if b.base_offset < state.end and b.next_offset > state.position]
    if not batches:
        if split.truncated_at is not None and split.truncated_size > state.fetch_bytes:
            state.fetch_bytes = split.truncated_size  # one batch is larger than we asked for
        return None
    outgoing: list[ProducerBatch] = []
    try:
        for batch in data_batches(batches, aborted):
            if batch.size > max_batch_bytes:
                outgoing += _split(state, batch, max_batch_bytes, target)
            elif needs_rebuild(batch, state.position, state.end):
                rebuilt, upstream = rebuild(batch, state.position, state.end)
                if rebuilt is not None:
                    outgoing.append(ProducerBatch(RecordBatch(memoryview(rebuilt)), upstream))
            else:
                outgoing.append(ProducerBatch(batch, batch.upstream_offsets()))
    except RecordBatchError as exc:  # a batch that cannot be read (or would decompress past the limit)
        raise ForwardingError(WireError(CORRUPT_MESSAGE, str(exc))) from None
    state.position = min(batches[-1].next_offset, state.end)
    state.done = state.position >= state.end
    return outgoing


def _split(state: FetchPartition, batch: RecordBatch, limit: int, target: str) -> list[ProducerBatch]:
    try:
        parts = split_to_limit(batch, state.position, state.end, limit)
    except RecordTooLarge as exc:
        record = exc.record
        raise ForwardingError(
            WireError(
                MESSAGE_TOO_LARGE,
                f"the record at offset {record.offset} is too large for the target producer: "
                f"{len(record.value or b'')}-byte value, {len(record.key or b'')}-byte key, {exc.size} bytes as "
                f"a batch, message.max.bytes = {exc.limit}; raise {target}.producer.message.max.bytes (and the "
                "topic's max.message.bytes)",
            )
        ) from None
    return [ProducerBatch(RecordBatch(memoryview(raw)), upstream) for raw, upstream in parts]

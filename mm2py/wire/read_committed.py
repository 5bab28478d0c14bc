"""Which fetched batches a consumer would deliver: control batches (transaction markers) dropped, and under
read_committed the batches of aborted transactions dropped too.

The Java consumer's rule (``CompletedFetch`` / ``FetchCollector`` in Kafka's clients: ``abortedProducerIds`` and
``isBatchAborted``), applied per Fetch response to whole batches. It reads the marker kind out of a control
batch's one record, so it needs both the batch view (:mod:`mm2py.wire.batches`) and the record codec
(:mod:`mm2py.wire.batch_codec`); living apart from both keeps those two free of each other.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum

from mm2py.wire.batch_codec import decode_records
from mm2py.wire.batches import RecordBatch, RecordBatchError


class ControlType(IntEnum):
    """The type in a control record's key: the transaction marker kinds."""

    ABORT = 0
    COMMIT = 1


def control_type(batch: RecordBatch) -> ControlType | None:
    """The marker kind of a control batch (its one record's key: version int16, type int16), else None."""
    if not batch.is_control or batch.record_count < 1:
        return None
    key = decode_records(batch)[0].key
    if key is None or len(key) < 4:
        raise RecordBatchError(f"control batch at offset {batch.base_offset} has no valid control key")
    kind = struct.unpack_from(">h", key, 2)[0]
    return ControlType(kind) if kind in (0, 1) else None


def data_batches(
    batches: Iterable[RecordBatch],
    aborted_transactions: Sequence[tuple[int, int]] | None,
) -> Iterator[RecordBatch]:
    """The batches a consumer would deliver records from: control batches dropped, and with read_committed
    (``aborted_transactions`` given, even if empty) the batches of aborted transactions dropped too.

    This is the Java consumer's rule, per Fetch response: ``aborted_transactions`` lists (producer id, first
    offset) of each aborted transaction the fetched range overlaps. A transactional batch is aborted when its
    producer has an aborted transaction that began at or before the batch's last offset and whose abort
    marker has not yet been passed; reaching that producer's abort marker ends the aborted transaction.
    """
    if aborted_transactions is None:
        yield from (batch for batch in batches if not batch.is_control)
        return
    pending = sorted(aborted_transactions, key=lambda txn: txn[1])
    aborted_producers: set[int] = set()
    index = 0
    for batch in batches:
        if batch.has_producer_id:
            while index < len(pending) and pending[index][1] <= batch.last_offset:
                aborted_producers.add(pending[index][0])
                index += 1
            if batch.is_control:
                if control_type(batch) is ControlType.ABORT:
                    aborted_producers.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborted_producers:
                continue
        if not batch.is_control:
            yield batch

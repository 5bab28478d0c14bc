"""What a failed Produce of one batch leads to: a table from the error (and where the batch stands in its
partition's sequence) to one action, which the sender then carries out (:meth:`mm2py.wire.sender.Sender._failed`).

Why a table: the order of the rules decides the outcome (a sequence error is retriable and stale metadata too, but
must bump the epoch first), and Kafka's producer keeps the same decision in named steps apart from carrying it out
(``Sender.completeBatch`` -> ``canRetry``, ``TransactionManager.canRetry`` and ``handleFailedBatch``). Each rule
below names its source; the module docstring of :mod:`mm2py.wire.sender` says why each holds for forwarded batches.
"""

from __future__ import annotations

import enum

from mm2py.wire.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH,
    MESSAGE_TOO_LARGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_PRODUCER_ID,
    WireError,
)
from mm2py.wire.partition_queue import ProducerBatch


class Action(enum.Enum):
    ACKNOWLEDGE = "acknowledge"  # written before; the broker no longer knows where
    STOP_TOO_LARGE = "stop: too large"  # the partition stops, naming the batch's size and what to raise
    STOP = "stop"  # the partition stops with the error (its range is copied again later from what was acked)
    BUMP_EPOCH_AND_RESEND = "bump the epoch, renumber, resend"
    REFRESH_METADATA_AND_RESEND = "refresh metadata, resend"
    RESEND = "resend"  # as it is: same producer id, epoch and sequence


# Decided by the error alone, before any rule about sequences.
_BY_KIND = {
    # Sender.completeBatch: a DUPLICATE_SEQUENCE_NUMBER answer completes the batch as written.
    DUPLICATE_SEQUENCE_NUMBER: Action.ACKNOWLEDGE,
    # Java would split the batch (splitAndReenqueue); a forwarded batch is kept whole, so it cannot go.
    MESSAGE_TOO_LARGE: Action.STOP_TOO_LARGE,
    RECORD_LIST_TOO_LARGE: Action.STOP_TOO_LARGE,
}


def failure_action(error: WireError, *, next_sequence: bool, current_producer: bool, transactional: bool) -> Action:
    """The action for a batch that failed with ``error``.

    ``next_sequence``: the batch is the one after the partition's last acknowledged sequence; ``current_producer``:
    it was sent under the producer id and epoch the partition has now (not yet renumbered); ``transactional``:
    the batches go inside a transaction."""
    kind = error.kind
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    # The broker lost our sequence state (KIP-360, TransactionManager.canRetry): a gap at the next sequence, or no
    # (or another) state for our producer id and epoch.
    lost_state = (kind is OUT_OF_ORDER_SEQUENCE_NUMBER and next_sequence) or (
        kind is UNKNOWN_PRODUCER_ID or kind is INVALID_PRODUCER_EPOCH
    )
    if lost_state:
        if transactional:
            # Inside a transaction nothing may be renumbered: the error is abortable
            # (TransactionManager.maybeTransitionToErrorState), and the transaction's owner aborts it.
            return Action.STOP
        # Once per epoch: a batch already renumbered (or sent under an older epoch) is resent as it is.
        return Action.BUMP_EPOCH_AND_RESEND if current_producer else Action.RESEND
    if kind is OUT_OF_ORDER_SEQUENCE_NUMBER:
        return Action.RESEND  # for a later batch: only the echo of an earlier failure
    if not error.retriable:
        return Action.STOP
    # An InvalidMetadataException (NOT_LEADER_OR_FOLLOWER, a lost connection, ...): Metadata.requestUpdate.
    return Action.REFRESH_METADATA_AND_RESEND if error.invalid_metadata else Action.RESEND


def too_large(target: str, topic: str, batch: ProducerBatch, error: WireError) -> WireError:
    """Why a partition stops on a batch the target refused as too large, in terms a user can act on. Java's
    producer would split the batch and send the halves (``Sender.completeBatch`` -> ``splitAndReenqueue``); a
    forwarded batch is the source's, kept whole, so the target topic must take it (or the record path re-batch
    its records)."""
    size, upstream = batch.batch.size, batch.upstream
    offsets = f"source offsets {upstream[0]}..{upstream[-1]}" if upstream else "no records"
    return WireError(
        error.kind,
        f"{target} refused a record batch of {size} bytes ({batch.record_count} records, {offsets}) as too "
        f"large ({error.detail or error.name}); raise the max.message.bytes of topic {topic} on {target} (or "
        f"the brokers' message.max.bytes) to at least {size}, or set mm2py.copy.mode=record to re-batch the "
        "records",
    )

"""The sender's failure table (``mm2py.wire.produce_failures``), row by row: what a failed Produce of one batch
leads to, for each kind of answer and where the batch stands in its partition's sequence. The sender's tests
against the fake cluster (``test_sender.py``) show each action carried out."""

from __future__ import annotations

import pytest

from mm2py.wire.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH,
    MESSAGE_TOO_LARGE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    RECORD_LIST_TOO_LARGE,
    REQUEST_TIMED_OUT,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_PRODUCER_ID,
    ErrorKind,
    WireError,
)
from mm2py.wire.produce_failures import Action, failure_action

A = Action
# kind, the batch follows the last acknowledged sequence, sent under the current producer epoch, transactional
ROWS: list[tuple[ErrorKind, bool, bool, bool, Action]] = [
    (DUPLICATE_SEQUENCE_NUMBER, False, True, False, A.ACKNOWLEDGE),
    (DUPLICATE_SEQUENCE_NUMBER, True, True, True, A.ACKNOWLEDGE),
    (MESSAGE_TOO_LARGE, True, True, False, A.STOP_TOO_LARGE),
    (RECORD_LIST_TOO_LARGE, True, True, True, A.STOP_TOO_LARGE),
    # A gap at the next sequence: the broker lost our state; bump the epoch once, renumber, resend.
    (OUT_OF_ORDER_SEQUENCE_NUMBER, True, True, False, A.BUMP_EPOCH_AND_RESEND),
    (OUT_OF_ORDER_SEQUENCE_NUMBER, True, False, False, A.RESEND),  # already renumbered
    (OUT_OF_ORDER_SEQUENCE_NUMBER, False, True, False, A.RESEND),  # a later batch: the echo of the gap
    (OUT_OF_ORDER_SEQUENCE_NUMBER, True, True, True, A.STOP),  # abortable inside a transaction
    (OUT_OF_ORDER_SEQUENCE_NUMBER, False, True, True, A.RESEND),
    (UNKNOWN_PRODUCER_ID, False, True, False, A.BUMP_EPOCH_AND_RESEND),
    (UNKNOWN_PRODUCER_ID, False, False, False, A.RESEND),
    (INVALID_PRODUCER_EPOCH, False, True, False, A.BUMP_EPOCH_AND_RESEND),
    (INVALID_PRODUCER_EPOCH, False, True, True, A.STOP),
    (NOT_LEADER_OR_FOLLOWER, True, True, False, A.REFRESH_METADATA_AND_RESEND),
    (NOT_LEADER_OR_FOLLOWER, True, True, True, A.REFRESH_METADATA_AND_RESEND),
    (NOT_ENOUGH_REPLICAS, True, True, False, A.RESEND),
    (REQUEST_TIMED_OUT, True, True, False, A.RESEND),
    (TOPIC_AUTHORIZATION_FAILED, True, True, False, A.STOP),
]


@pytest.mark.parametrize(("kind", "next_sequence", "current", "transactional", "action"), ROWS)
def test_each_answer_leads_to_its_action(
    kind: ErrorKind, next_sequence: bool, current: bool, transactional: bool, action: Action
) -> None:
    got = failure_action(
        WireError(kind), next_sequence=next_sequence, current_producer=current, transactional=transactional
    )
    assert got is action


def test_every_action_is_reached_by_some_row() -> None:
    assert {row[-1] for row in ROWS} == set(Action)

"""The client side of an incremental fetch session (KIP-227), rule by rule as Java's FetchSessionHandler keeps
it: what each request sends and forgets, and how each kind of answer moves the session on."""

from __future__ import annotations

import random

import pytest

from mm2py.wire.cluster import FetchAnswer, FetchedPartition, FetchPosition
from mm2py.wire.errors import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    NETWORK_EXCEPTION,
    WireError,
)
from mm2py.wire.fetch_session import FINAL_EPOCH, INITIAL, FetchMetadata, FetchSession, next_epoch


def at(partition: int, offset: int, epoch: int = 0) -> FetchPosition:
    return FetchPosition("orders", partition, offset, 1024, epoch)


def answer(*partitions: int, session_id: int = 7, throttle_time_ms: int = 0) -> FetchAnswer:
    parts = [FetchedPartition("orders", p, None, 10, 10, 0, None, b"") for p in partitions]
    return FetchAnswer(parts, session_id, throttle_time_ms)


def opened(*partitions: int) -> FetchSession:
    """A session the broker opened (id 7) from a full request for ``partitions`` at offset 0."""
    session = FetchSession(1)
    session.build(at(p, 0) for p in partitions)
    assert session.handle_answer(answer(*partitions))
    assert session.next_metadata == FetchMetadata(7, 1)
    return session


def keys(positions: list[FetchPosition]) -> list[int]:
    return [p.partition for p in positions]


def test_the_first_request_is_full_and_asks_for_a_session() -> None:
    data = FetchSession(1).build([at(0, 5), at(1, 9)])
    assert data.metadata == INITIAL and data.metadata.full
    assert keys(data.to_send) == [0, 1] and data.to_forget == []


def test_an_incremental_request_sends_added_then_altered_partitions_and_forgets_the_rest() -> None:
    session = opened(0, 1, 2, 3)
    data = session.build([at(0, 0), at(1, 4), at(2, 0, epoch=3), at(5, 0)])  # 1 moved, 2 a new epoch, 5 new; 3 gone
    assert data.metadata == FetchMetadata(7, 1) and not data.metadata.full
    assert keys(data.to_send) == [5, 1, 2]
    assert data.to_forget == [("orders", 3)]
    assert list(session.partitions) == [("orders", p) for p in (0, 1, 2, 5)]
    assert session.handle_answer(answer(1, 5))  # only partitions with something new
    assert session.next_metadata == FetchMetadata(7, 2)
    quiet = session.build([at(0, 0), at(1, 4), at(2, 0, epoch=3), at(5, 0)])
    assert quiet.to_send == [] and quiet.to_forget == []  # a quiet round trip names no partition


def test_a_full_answer_without_a_session_id_leaves_every_request_full() -> None:
    session = FetchSession(1)
    session.build([at(0, 0)])
    assert session.handle_answer(answer(0, session_id=0))  # the broker's cache had no room
    assert session.next_metadata == INITIAL
    assert keys(session.build([at(0, 3)]).to_send) == [0]


@pytest.mark.parametrize(
    ("answered", "usable"),
    [((0,), False), ((0, 1, 2), False), ((0, 1), True)],
    ids=["leaves-one-out", "names-an-extra-one", "exact"],
)
def test_a_full_answer_must_name_exactly_the_session_partitions(answered: tuple[int, ...], usable: bool) -> None:
    session = FetchSession(1)
    session.build([at(0, 0), at(1, 0)])
    assert session.handle_answer(answer(*answered)) is usable
    assert session.next_metadata == (FetchMetadata(7, 1) if usable else INITIAL)


def test_an_incremental_answer_naming_a_partition_outside_the_session_is_not_used() -> None:
    session = opened(0, 1)
    session.build([at(0, 0), at(1, 0)])
    assert not session.handle_answer(answer(2))
    assert session.next_metadata == FetchMetadata(7, 0)  # close it and open a new one, in a full request
    assert keys(session.build([at(0, 0), at(1, 0)]).to_send) == [0, 1]


def test_the_broker_closing_the_session_in_an_incremental_answer_starts_over() -> None:
    session = opened(0)
    session.build([at(0, 1)])
    assert session.handle_answer(answer(0, session_id=0))
    assert session.next_metadata == INITIAL


def test_a_throttled_empty_full_answer_is_not_used() -> None:
    session = FetchSession(1)
    session.build([at(0, 0)])
    assert not session.handle_answer(answer(throttle_time_ms=100))  # KIP-219
    assert session.next_metadata == INITIAL


@pytest.mark.parametrize(
    ("error", "after"),
    [
        (FETCH_SESSION_ID_NOT_FOUND, INITIAL),  # the broker lost it: nothing to close
        (INVALID_FETCH_SESSION_EPOCH, FetchMetadata(7, 0)),
        (NETWORK_EXCEPTION, FetchMetadata(7, 0)),  # a lost connection: close it and open a new one
    ],
)
def test_an_error_makes_the_next_request_full(error: type, after: FetchMetadata) -> None:
    session = opened(0, 1)
    session.build([at(0, 0), at(1, 0)])
    if error is NETWORK_EXCEPTION:
        session.handle_error(WireError(error))
    else:
        assert not session.handle_answer(FetchAnswer([], 0, 0, WireError(error)))
    assert session.next_metadata == after
    assert keys(session.build([at(0, 0), at(1, 0)]).to_send) == [0, 1]


def test_the_epoch_after_the_largest_int32_is_one_and_the_final_epoch_stays_final() -> None:
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_closing_sends_the_final_epoch_with_no_partitions_and_only_for_an_open_session() -> None:
    assert FetchSession(1).closing() is None
    session = opened(0, 1)
    data = session.closing()
    assert data is not None
    assert data.metadata == FetchMetadata(7, FINAL_EPOCH) and data.to_send == [] and data.to_forget == []


def test_building_from_the_changes_alone_asks_for_what_building_from_every_partition_asks_for() -> None:
    rng = random.Random(7)
    whole, delta = opened(*range(12)), opened(*range(12))
    wanted = {p: at(p, 0) for p in range(12)}
    for _ in range(200):
        changed, removed = [], []
        for p in rng.sample(range(16), 4):
            if p in wanted and rng.random() < 0.3:
                del wanted[p]
                removed.append(("orders", p))
            else:
                wanted[p] = at(p, (wanted[p].offset if p in wanted else 0) + rng.choice((0, 0, 5)))
                changed.append(wanted[p])
        a = whole.build(list(wanted.values()))
        b = delta.build_changes(changed, removed)
        assert (sorted(keys(a.to_send)), sorted(a.to_forget), a.metadata) == (
            sorted(keys(b.to_send)),
            sorted(b.to_forget),
            b.metadata,
        )  # the order within a request is the broker's no concern
        assert whole.partitions == delta.partitions
        for session in (whole, delta):
            assert session.handle_answer(answer())


def test_building_from_the_changes_alone_is_refused_for_a_full_request() -> None:
    with pytest.raises(ValueError, match="full fetch request"):
        FetchSession(1).build_changes([at(0, 0)], [])

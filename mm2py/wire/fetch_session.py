"""Incremental fetch sessions (KIP-227): after the first Fetch to a broker, only the partitions whose fetch
position changed are sent, and the broker answers only for partitions with something new.

Why: a copy task follows hundreds of partitions on one broker, most of them quiet. Without a session every Fetch
lists every partition and every answer lists them all again, so encoding and decoding requests costs CPU in
proportion to the partitions followed, ten times a second, whether records flow or not. With a session a quiet
round trip carries no partition at all.

The rules are Kafka's Java clients' (``clients/FetchSessionHandler.java`` and
``common/requests/FetchMetadata.java``), one session per broker as ``consumer/internals/AbstractFetch`` keeps
them:

- the first request to a broker is full (session id 0, epoch 0) and asks the broker to open a session; a full
  answer with a session id opens it, one without (the broker's session cache is full, or a Fetch version before
  7) leaves every request full;
- an incremental request (the session id, the next epoch) carries the partitions added or whose position,
  size limit or leader epoch changed, and forgets those no longer fetched from this broker (done, failed, led
  elsewhere, waiting out a backoff); the partitions left out are implied, at the position last sent;
- an answer naming a partition the session does not hold, or a full answer that leaves one out, is not used:
  the next request is full again (the partitions are fetched again from the same positions, so nothing is lost);
- FETCH_SESSION_ID_NOT_FOUND (the broker restarted or evicted the session) starts over with a new session; any
  other error, in the answer or on the way (a lost connection, a timeout), closes the session and opens a new
  one with the next request;
- when the fetcher ends, a last request with the final epoch closes the session so that it does not hold one of
  the broker's cache slots (``max.incremental.fetch.session.cache.slots``) until it is evicted.

Topic ids (Fetch 13 and later) are not used: the batch path fetches by topic name (Fetch 12 at most).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import FetchAnswer, FetchPosition
from mm2py.wire.errors import FETCH_SESSION_ID_NOT_FOUND, WireError

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full request that opens a session (closing the one named, if any)
FINAL_EPOCH = -1  # a full request outside any session (closing the one named, if any)
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: the epoch after ``epoch``; after the largest int32 comes 1 (0 opens a session)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(frozen=True)
class FetchMetadata:
    """The session id and epoch a Fetch request carries."""

    session_id: int
    epoch: int

    @property
    def full(self) -> bool:
        """A full request lists every partition and is answered for every partition."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def close_existing(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def close_existing_attempt_new(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    def __str__(self) -> str:
        epoch = {INITIAL_EPOCH: "INITIAL", FINAL_EPOCH: "FINAL"}.get(self.epoch, str(self.epoch))
        return f"(session {self.session_id or 'none'}, epoch {epoch})"


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)


@dataclass(frozen=True)
class FetchRequestData:
    """One Fetch request to build: what to send, what to forget, and the session's id and epoch."""

    to_send: list[FetchPosition]
    to_forget: list[TopicPartition]
    metadata: FetchMetadata


class FetchSession:
    """The client side of the fetch session with one broker (Java's FetchSessionHandler)."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.next_metadata = INITIAL
        self.partitions: dict[TopicPartition, FetchPosition] = {}  # what the broker holds, in session order

    @property
    def session_id(self) -> int:
        return self.next_metadata.session_id

    def build(self, wanted: Iterable[FetchPosition]) -> FetchRequestData:
        """The next request for ``wanted`` (every partition to fetch from this broker now, in fetch order)."""
        following = {(p.topic, p.partition): p for p in wanted}
        if self.next_metadata.full:
            self.partitions = following
            return FetchRequestData(list(following.values()), [], self.next_metadata)
        removed: list[TopicPartition] = []
        altered: dict[TopicPartition, FetchPosition] = {}
        for key, previous in list(self.partitions.items()):
            position = following.pop(key, None)
            if position is None:
                del self.partitions[key]
                removed.append(key)
            elif position is not previous and position != previous:
                self.partitions[key] = position
                altered[key] = position
        self.partitions.update(following)  # the added partitions join the session at its end
        to_send = [*following.values(), *altered.values()]  # Java's order: added, then altered
        return FetchRequestData(to_send, removed, self.next_metadata)

    def build_changes(self, changed: Iterable[FetchPosition], removed: Iterable[TopicPartition]) -> FetchRequestData:
        """:meth:`build` for a caller that knows what changed since its last request: the partitions wanted are
        the session's, less ``removed``, with ``changed`` put in (new ones added), so an incremental request costs
        what changed rather than what the session holds. Only for an incremental request (a full one lists
        every partition: :meth:`build`)."""
        if self.next_metadata.full:
            raise ValueError(f"a full fetch request to node {self.node} needs every partition")
        gone = [key for key in removed if self.partitions.pop(key, None) is not None]
        added: list[FetchPosition] = []
        altered: list[FetchPosition] = []
        for position in changed:
            key = (position.topic, position.partition)
            previous = self.partitions.get(key)
            if previous is None:
                added.append(position)
            elif position is previous or position == previous:
                continue
            else:
                altered.append(position)
            self.partitions[key] = position
        return FetchRequestData([*added, *altered], gone, self.next_metadata)

    def handle_answer(self, answer: FetchAnswer) -> bool:
        """Move the session on by ``answer``; False if the answer cannot be used (its partitions are fetched
        again, from the same positions, by the next request)."""
        if answer.error is not None:
            self.handle_error(answer.error)
            return False
        answered = {(p.topic, p.partition) for p in answer.partitions}
        extra = answered - self.partitions.keys()
        if self.next_metadata.full:
            if not answered and answer.throttle_time_ms > 0:
                self.next_metadata = INITIAL  # KIP-219: a throttled client gets an empty full answer
                return False
            omitted = self.partitions.keys() - answered
            if extra or omitted:
                log.info("node %s sent a full fetch answer %s", self.node, _problem(extra, omitted))
                self.next_metadata = INITIAL
                return False
            self.next_metadata = (
                INITIAL
                if answer.session_id == INVALID_SESSION_ID
                else FetchMetadata(answer.session_id, next_epoch(INITIAL_EPOCH))
            )
            return True
        if extra:
            log.info("node %s sent an incremental fetch answer %s", self.node, _problem(extra, set()))
            self.next_metadata = self.next_metadata.close_existing_attempt_new()
            return False
        if answer.session_id == INVALID_SESSION_ID:
            self.next_metadata = INITIAL  # the broker closed the session
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def handle_error(self, error: WireError) -> None:
        """A Fetch failed (an error for the whole answer, a lost connection, a timeout): the next request is
        full and opens a new session, closing the old one unless the broker no longer knows it."""
        log.info("fetch %s at node %s failed: %s", self.next_metadata, self.node, error)
        if error.kind is FETCH_SESSION_ID_NOT_FOUND:
            self.next_metadata = INITIAL
        else:
            self.next_metadata = self.next_metadata.close_existing_attempt_new()

    def closing(self) -> FetchRequestData | None:
        """The request that closes the session (Java's ``notifyClose`` then an empty build), or None if there is
        no session to close."""
        if self.session_id == INVALID_SESSION_ID:
            return None
        self.next_metadata = self.next_metadata.close_existing()
        return self.build(())


def _problem(extra: Sequence[TopicPartition] | set[TopicPartition], omitted: set[TopicPartition]) -> str:
    parts = []
    if extra:
        parts.append(f"naming partitions outside the session: {sorted(extra)}")
    if omitted:
        parts.append(f"leaving out partitions of the session: {sorted(omitted)}")
    return "; ".join(parts)

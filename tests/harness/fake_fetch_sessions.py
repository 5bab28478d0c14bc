"""The broker's side of incremental fetch sessions (KIP-227) for the fake cluster, as Kafka's broker keeps them
(``core/src/main/scala/kafka/server/FetchSession.scala``: ``FetchManager.newContext``, ``FetchSession.update``,
``CachedPartition.maybeUpdateResponseData``, ``IncrementalFetchContext``):

- a full request (epoch 0 or -1) closes the session it names; epoch 0 opens a new one if the cache has a free
  slot (the answer carries its id), epoch -1 never does;
- an incremental request for an unknown session is answered FETCH_SESSION_ID_NOT_FOUND, one with another epoch
  than the session expects INVALID_FETCH_SESSION_EPOCH; otherwise the request's partitions are added or
  updated, the forgotten ones removed (a session left empty is closed and the request served without one), and
  the answer names only partitions with records, an error, or a changed high watermark or log start offset;
  those with records move to the end of the session, so the next answer that fills up starts with the others
  (KIP-74 kept by the broker: a full request does not reorder, so its first partition is served twice).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import FetchAnswer, FetchedPartition, FetchPosition
from mm2py.wire.errors import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, WireError
from mm2py.wire.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

Read = Callable[[FetchPosition], FetchedPartition]


@dataclass
class _Cached:
    position: FetchPosition
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, part: FetchedPartition) -> bool:
        respond = bool(part.records) or part.error is not None
        respond |= part.high_watermark != self.high_watermark or part.log_start_offset != self.log_start_offset
        self.high_watermark = -1 if part.error is not None else part.high_watermark  # re-sent once it clears
        self.log_start_offset = part.log_start_offset
        return respond


@dataclass
class _Session:
    id: int
    epoch: int  # what the next request must carry
    partitions: dict[TopicPartition, _Cached]


class BrokerFetchSessions:
    """One broker's fetch session cache."""

    def __init__(self, slots: int = 1000) -> None:
        self.slots = slots
        self.sessions: dict[int, _Session] = {}
        self._ids = itertools.count(1)

    def clear(self) -> None:
        """The broker restarted: its sessions are gone."""
        self.sessions.clear()

    def handle(
        self,
        session_id: int,
        epoch: int,
        positions: Sequence[FetchPosition],
        forgotten: Sequence[TopicPartition],
        read: Read,
    ) -> FetchAnswer:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.sessions.pop(session_id, None)
            parts = [read(p) for p in positions]
            if epoch == FINAL_EPOCH or len(self.sessions) >= self.slots:
                return FetchAnswer(parts, INVALID_SESSION_ID)
            session = _Session(next(self._ids), next_epoch(INITIAL_EPOCH), {})
            for position, part in zip(positions, parts, strict=True):
                cached = session.partitions[(position.topic, position.partition)] = _Cached(position)
                cached.must_respond(part)
            self.sessions[session.id] = session
            return FetchAnswer(parts, session.id)
        found = self.sessions.get(session_id)
        if found is None:
            return FetchAnswer([], error=WireError(FETCH_SESSION_ID_NOT_FOUND))
        if found.epoch != epoch:
            return FetchAnswer([], error=WireError(INVALID_FETCH_SESSION_EPOCH))
        for key in forgotten:
            found.partitions.pop(key, None)
        for position in positions:
            key = (position.topic, position.partition)
            if key in found.partitions:
                found.partitions[key].position = position
            else:
                found.partitions[key] = _Cached(position)
        if not found.partitions:
            del self.sessions[found.id]
            return FetchAnswer([read(p) for p in positions], INVALID_SESSION_ID)
        found.epoch = next_epoch(found.epoch)
        answer = []
        for key, cached in list(found.partitions.items()):
            part = read(cached.position)
            if cached.must_respond(part):
                answer.append(part)
                if part.records:
                    found.partitions[key] = found.partitions.pop(key)  # to the end of the session
        return FetchAnswer(answer, found.id)

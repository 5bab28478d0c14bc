"""A Fetch request from the fetcher's positions, and its answer as mm2py's plain data.

Versions 4 (aborted transactions, for read_committed) to 12, the last that names topics (13 and later name them
by topic id); incremental fetch sessions (KIP-227) from 7: an older broker ignores the session fields and
answers without a session id, which leaves every request full (:mod:`mm2py.wire.fetch_session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka.protocol.consumer import FetchRequest  # type: ignore[import-untyped]

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import FetchAnswer, FetchedPartition, FetchPosition
from mm2py.wire.errors import broker_error

VERSIONS = (4, 12)


def fetch_request(
    positions: Sequence[FetchPosition],
    *,
    read_committed: bool,
    max_wait_ms: int,
    max_bytes: int,
    session: tuple[int, int],
    forgotten: Sequence[TopicPartition],
) -> Any:
    """A consumer's Fetch (replica id -1) for ``positions``, in the session ``session`` (id, epoch)."""
    by_topic: dict[str, list[Any]] = {}
    partition_type = FetchRequest.FetchTopic.FetchPartition
    for p in positions:
        by_topic.setdefault(p.topic, []).append(
            partition_type(
                partition=p.partition,
                fetch_offset=p.offset,
                partition_max_bytes=p.max_bytes,
                log_start_offset=-1,
                current_leader_epoch=p.leader_epoch,
            )
        )
    gone: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        gone.setdefault(topic, []).append(partition)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=1 if read_committed else 0,
        session_id=session[0],
        session_epoch=session[1],
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()],
        rack_id="",
        min_version=VERSIONS[0],
        max_version=VERSIONS[1],
    )


def fetched(node: int, response: Any) -> FetchAnswer:
    """The answer ``node`` gave: an error for the whole request, or an entry per partition it names."""
    session_id = getattr(response, "session_id", 0) or 0  # Fetch 7 and later
    throttle_time_ms = getattr(response, "throttle_time_ms", 0) or 0
    top = broker_error(getattr(response, "error_code", 0) or 0, f"Fetch at node {node}")
    if top is not None:
        return FetchAnswer([], session_id, throttle_time_ms, top)
    result = []
    for topic in response.responses:
        for p in topic.partitions:
            aborted = None
            if p.aborted_transactions is not None:
                aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
            result.append(
                FetchedPartition(
                    topic.topic,
                    p.partition_index,
                    broker_error(p.error_code, f"node {node}"),
                    p.high_watermark,
                    p.last_stable_offset,
                    getattr(p, "log_start_offset", -1),
                    aborted,
                    p.records or b"",
                )
            )
    return FetchAnswer(result, session_id, throttle_time_ms)

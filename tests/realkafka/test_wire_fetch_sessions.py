"""The batch path's fetcher in incremental fetch sessions (KIP-227) on a real broker: the session a full request
opens, round trips that name only the partition whose position moved, the broker's own answers to a session
out of step or unknown (the fetcher opens a new one and skips nothing), the session closed at the end, and a
following task's fetches spaced while records flow.

The rules are unit-tested against the fake cluster (tests/unit/test_fetch_session.py, test_fetcher.py); this
shows a real broker agrees with them."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Producer

from mm2py.wire.batch_codec import decode_records
from mm2py.wire.cluster import FetchAnswer, FetchPosition, Pending
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.errors import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from mm2py.wire.fetch_session import FetchMetadata
from mm2py.wire.fetcher import Fetcher, FetcherSettings, FetchPartition
from mm2py.wire.forwarding import batches_to_send
from tests.harness.kafka_harness import Record, create_topic, produce
from tests.harness.polling import answer_of
from tests.harness.real_kafka import KafkaCluster
from tests.harness.translation_helpers import client_settings

pytestmark = pytest.mark.realkafka
PARTITIONS = 8
BUSY = 3  # the one partition written to
Sent = tuple[tuple[int, int], list[FetchPosition], list[tuple[str, int]], Pending[FetchAnswer]]


def recording(connection: KafkaConnection) -> list[Sent]:
    """Every Fetch the connection sends: (session id and epoch, positions named, partitions forgotten, answer)."""
    sent: list[Sent] = []
    fetch = connection.fetch

    def recorded(node: int, positions: Any, **kwargs: Any) -> Pending[FetchAnswer]:
        pending = fetch(node, positions, **kwargs)
        sent.append((kwargs["session"], list(positions), list(kwargs.get("forgotten", ())), pending))
        return pending

    connection.fetch = recorded  # type: ignore[method-assign]
    return sent


def served_everywhere(connection: KafkaConnection, topic: str) -> None:
    """Wait until the broker leads every partition of the new topic (a Fetch outside any session answers none
    with an error), so that what the test counts is the session's doing, not a partition still being created."""
    deadline = time.monotonic() + 30
    while True:
        node = sorted(connection.brokers())[0]
        pending = connection.fetch(
            node,
            [FetchPosition(topic, p, 0, 1024) for p in range(PARTITIONS)],
            read_committed=False,
            max_wait_ms=0,
            max_bytes=1 << 20,
        )
        answer = answer_of(connection, pending, max(0.0, deadline - time.monotonic()), f"a Fetch of {topic}")
        served = isinstance(answer, FetchAnswer) and answer.error is None and len(answer.partitions) == PARTITIONS
        if served and all(p.error is None for p in answer.partitions):  # type: ignore[union-attr]
            return
        assert time.monotonic() < deadline, f"{topic} not served in 30 s: {answer}"
        connection.poll(0.1)


@contextmanager
def served_connection(cluster: KafkaCluster, topic: str) -> Iterator[KafkaConnection]:
    """A new topic of ``PARTITIONS`` partitions, and a wire connection to ``cluster`` once it serves them all."""
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    connection = KafkaConnection("src", client_settings({"bootstrap.servers": cluster.bootstrap}))
    try:
        connection.bootstrap(10)
        served_everywhere(connection, topic)
        yield connection
    finally:
        connection.close()


def partitions(positions: list[FetchPosition]) -> list[int]:
    return sorted(p.partition for p in positions)


def write(bootstrap: str, topic: str, first: int, count: int) -> None:
    now = int(time.time() * 1000)
    produce(bootstrap, topic, [Record(None, str(i).encode(), [], now, BUSY) for i in range(first, first + count)])


def fetch_until(fetcher: Fetcher, got: list[int], count: int, until: Callable[[], bool] = lambda: True) -> None:
    """Step until ``count`` records came, ``until()`` holds, and no Fetch is in flight (so a test may then
    change the session without an answer on its way)."""
    deadline = time.monotonic() + 30
    while len(got) < count or not until() or fetcher.in_flight:
        assert time.monotonic() < deadline, f"{len(got)} of {count} records fetched in 30 s"
        for state, part in fetcher.step():
            for batch in batches_to_send(state, part.records, None, 1 << 24, "target") or []:
                got.extend(int(r.value or b"") for r in decode_records(batch.batch))


def test_a_real_broker_keeps_a_fetch_session_and_its_errors_cost_nothing(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    topic = unique_topic("sessions")
    got: list[int] = []
    with served_connection(real_kafka, topic) as connection:
        sent = recording(connection)
        positions = [FetchPartition(topic, p, 0, 10**12) for p in range(PARTITIONS)]
        fetcher = Fetcher(connection, positions, FetcherSettings(False))
        write(real_kafka.bootstrap, topic, 0, 50)
        fetch_until(fetcher, got, 50)
        write(real_kafka.bootstrap, topic, 50, 50)
        fetch_until(fetcher, got, 100, until=lambda: len(sent) >= 20)

        (first, named, _gone, answer), *rest = sent
        assert first == (0, 0) and partitions(named) == list(range(PARTITIONS))  # full: opens a session
        session_id = answer.result().session_id  # type: ignore[union-attr]
        assert session_id != 0, "the broker opened no fetch session"
        assert [s for s, *_ in rest] == [(session_id, epoch) for epoch in range(1, len(rest) + 1)]
        last = {p.partition: p for p in named}
        for _s, positions, _g, _a in rest:
            for p in positions:  # a quiet partition is named again only when its leader epoch moved
                assert p.partition == BUSY or (p.offset == 0 and p.leader_epoch != last[p.partition].leader_epoch), p
                last[p.partition] = p
        assert sum(len(positions) for _s, positions, _g, _a in rest) < len(rest)  # most round trips name none
        assert BUSY in {p.partition for _s, positions, _g, _a in rest for p in positions}
        assert all(not a.result().error and {p.partition for p in a.result().partitions} <= {BUSY} for *_, a in rest)  # type: ignore[union-attr]

        node = next(iter(fetcher.sessions))
        session = fetcher.sessions[node]
        for tampered, error in ((5, INVALID_FETCH_SESSION_EPOCH), (None, FETCH_SESSION_ID_NOT_FOUND)):
            current = session.next_metadata
            session.next_metadata = (
                FetchMetadata(current.session_id, current.epoch + tampered)
                if tampered is not None
                else FetchMetadata(current.session_id % (2**31 - 1_000_003) + 1_000_003, 1)  # another int32 id
            )
            before = len(sent)
            fetch_until(fetcher, got, 0, until=lambda before=before: len(sent) >= before + 3)
            refused, reopened = sent[before], sent[before + 1]
            assert refused[3].result().error.kind is error  # type: ignore[union-attr]
            expect = (current.session_id, 0) if error is INVALID_FETCH_SESSION_EPOCH else (0, 0)
            assert (reopened[0], partitions(reopened[1])) == (expect, list(range(PARTITIONS)))
            assert reopened[3].result().session_id not in (0, current.session_id)  # type: ignore[union-attr]
        write(real_kafka.bootstrap, topic, 100, 50)
        fetch_until(fetcher, got, 150)
        assert got == list(range(150))  # every record once, in order, through both refusals

        closed = session.next_metadata
        fetcher.close()
        assert sent[-1][0] == (closed.session_id, -1) and sent[-1][3].done
        after = connection.fetch(
            node,
            [FetchPosition(topic, BUSY, 150, 1024)],
            read_committed=False,
            max_wait_ms=0,
            max_bytes=1024,
            session=(closed.session_id, closed.epoch),
            forgotten=[],
        )
        assert answer_of(connection, after, 10).error.kind is FETCH_SESSION_ID_NOT_FOUND  # type: ignore[union-attr]


def test_a_real_broker_holds_a_fetch_for_the_consumer_s_fetch_min_bytes_up_to_its_wait(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    """fetch.min.bytes and fetch.max.wait.ms reach the broker: five small records are fewer bytes than asked for,
    so it answers only when the wait is over, and then with every one of them."""
    topic = unique_topic("min-bytes")
    got: list[int] = []
    with served_connection(real_kafka, topic) as connection:
        write(real_kafka.bootstrap, topic, 0, 5)
        positions = [FetchPartition(topic, p, 0, 10**12) for p in range(PARTITIONS)]
        fetcher = Fetcher(connection, positions, FetcherSettings(False, max_wait_ms=800, min_bytes=1 << 20))
        started = time.monotonic()
        fetch_until(fetcher, got, 5)
        assert time.monotonic() - started >= 0.75  # the broker waited (its purgatory's clock ticks in ms)
        assert got == list(range(5))
        fetcher.close()


def trickle(bootstrap: str, topic: str, first: int, count: int, every_s: float) -> None:
    """Write records ``first``.. one at a time, each acknowledged, then ``every_s`` of quiet (a load that arrives a
    record at a time, not in one batch sent once the producer is connected)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(topic, value=str(i).encode(), partition=BUSY)
        assert producer.flush(30) == 0
        time.sleep(every_s)


def test_while_records_flow_a_real_broker_is_fetched_from_at_most_once_an_interval(
    real_kafka: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    """mm2py.continuous.fetch.min.interval.ms on a real broker: while a record arrives every few milliseconds,
    fetches start the interval apart and each answer brings what arrived meanwhile, every record once and in
    order; a record written while a fetch waits at the broker (fetch.max.wait.ms) ends that wait at once."""
    topic = unique_topic("spaced")
    got: list[int] = []
    with served_connection(real_kafka, topic) as connection:
        sent_at: list[float] = []
        fetch = connection.fetch

        def timed(node: int, positions: Any, **kwargs: Any) -> Pending[FetchAnswer]:
            sent_at.append(time.monotonic())
            return fetch(node, positions, **kwargs)

        connection.fetch = timed  # type: ignore[method-assign]
        positions = [FetchPartition(topic, p, 0, 10**12) for p in range(PARTITIONS)]
        fetcher = Fetcher(connection, positions, FetcherSettings(False, max_wait_ms=5_000, min_interval_s=0.1))
        writer = threading.Thread(target=trickle, args=(real_kafka.bootstrap, topic, 0, 200, 0.005))
        writer.start()
        fetch_until(fetcher, got, 200)
        writer.join()
        assert got == list(range(200))
        gaps = [b - a for a, b in itertools.pairwise(sent_at)]
        assert min(gaps) >= 0.1 - 1e-3, gaps
        assert len(sent_at) < 100  # two records an answer at the least (a round trip here is shorter than 5 ms)

        # Quiet now: the next fetch waits at the broker; a record ends that wait, not the 5 s.
        while not fetcher.in_flight or time.monotonic() - sent_at[-1] < 0.5:
            fetcher.step(0.1)
        write(real_kafka.bootstrap, topic, 200, 1)
        written = time.monotonic()
        fetch_until(fetcher, got, 201)
        assert time.monotonic() - written < 1.0
        assert got == list(range(201))
        fetcher.close()

"""ListOffsets over many partitions when some leaders are away: which failures leave one partition out and
which fail the call. A fake AdminClient hands out futures, so no broker is needed."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2py.errors import ClusterUnreachableError, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin


@dataclass
class Answer:
    offset: int


class FakeClient:
    """Answers each partition with an offset, or fails it with a Kafka error code; metadata names each
    partition's leader (``leaders``, node 1 unless given)."""

    def __init__(
        self, answers: dict[tuple[str, int], int | KafkaError], leaders: dict[tuple[str, int], int] | None = None
    ) -> None:
        self.answers = answers
        self.leaders = leaders or {}
        self.calls: list[list[tuple[str, int]]] = []

    def list_topics(self, **_kwargs: Any) -> SimpleNamespace:
        topics: dict[str, SimpleNamespace] = {}
        for topic, partition in self.answers:
            described = topics.setdefault(topic, SimpleNamespace(partitions={}))
            described.partitions[partition] = SimpleNamespace(leader=self.leaders.get((topic, partition), 1))
        return SimpleNamespace(topics=topics)

    def list_offsets(self, request: dict[Any, Any], **_kwargs: Any) -> dict[Any, Future[Answer]]:
        futures: dict[Any, Future[Answer]] = {}
        self.calls.append([(tp.topic, tp.partition) for tp in request])
        for tp in request:
            future: Future[Answer] = Future()
            answer = self.answers[(tp.topic, tp.partition)]
            if isinstance(answer, KafkaError):
                future.set_exception(KafkaException(answer))
            else:
                future.set_result(Answer(answer))
            futures[tp] = future
        return futures

    def poll(self, _timeout: float) -> int:
        return 0


def admin(answers: dict[tuple[str, int], int | KafkaError]) -> ClusterAdmin:
    cluster = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"}, timeout_s=1.0)
    cluster._client = FakeClient(answers)  # type: ignore[assignment]
    return cluster


PARTITIONS = [("orders", 0), ("orders", 1), ("heartbeats", 0)]


@pytest.mark.parametrize(
    "code",
    [KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._TIMED_OUT, KafkaError._NOENT],
)
def test_a_partition_without_a_leader_is_left_out_with_its_reason_and_the_others_are_answered(code: int) -> None:
    cluster = admin({("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): KafkaError(code)})
    offsets, away = cluster.list_offsets_of_available(PARTITIONS, "latest")
    assert offsets == {("orders", 0): 10, ("orders", 1): 20}
    assert list(away) == [("heartbeats", 0)] and away[("heartbeats", 0)]


def test_when_no_partition_answers_the_call_fails_naming_the_cluster() -> None:
    cluster = admin({tp: KafkaError(KafkaError._TIMED_OUT) for tp in PARTITIONS})
    with pytest.raises(ClusterUnreachableError, match="listing latest offsets of orders-0 on dc1 failed"):
        cluster.list_offsets_of_available(PARTITIONS, "latest")


def test_an_error_waiting_cannot_fix_fails_the_call_even_when_others_answered() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    cluster = admin({("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): denied})
    with pytest.raises(KafkaOperationError, match="listing latest offsets of heartbeats-0 on dc1 failed"):
        cluster.list_offsets_of_available(PARTITIONS, "latest")


def test_the_strict_listing_asks_a_partition_without_a_leader_again_until_its_timeout_then_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Java's AdminClient retries a partition whose leader is away (ListOffsetsHandler), each time with a new
    client, which reads the leaders afresh; only the partitions still unanswered are asked again."""
    away = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    answers: dict[tuple[str, int], int | KafkaError] = {("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): away}
    clients: list[FakeClient] = []
    monkeypatch.setattr(
        "mm2py.librdkafka.admin.AdminClient", lambda _settings: clients.append(FakeClient(answers)) or clients[-1]
    )
    cluster = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"}, timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(KafkaOperationError, match="heartbeats-0 on dc1 failed: Broker: Leader not available"):
        cluster.list_offsets(PARTITIONS, "latest")
    assert time.monotonic() - started < 1.5
    assert len(clients) >= 3  # 0.1 s, then 0.2 s, 0.4 s of backoff (jittered) within the second
    assert all(c.calls == [[("heartbeats", 0)]] for c in clients[1:]), [c.calls for c in clients]


@pytest.mark.parametrize(
    "code", [KafkaError.FENCED_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_LEADER_EPOCH]
)
def test_after_stale_metadata_the_next_listing_asks_a_new_client(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """librdkafka keeps a leader (and its epoch) that a partition has left until its 5-minute metadata refresh;
    the first client here answers as such a client does, the second as one that read the metadata afresh."""
    stale = {("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): KafkaError(code)}
    fresh = {("orders", 0): 11, ("orders", 1): 21, ("heartbeats", 0): 30}
    clients = [FakeClient(stale), FakeClient(stale), FakeClient(fresh), FakeClient(stale), FakeClient(fresh)]
    monkeypatch.setattr("mm2py.librdkafka.admin.AdminClient", lambda _settings: clients.pop(0))
    cluster = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"}, timeout_s=1.0)
    # What CopyRounds.place calls: the second client is as stale, the third answers.
    assert cluster.list_offsets(PARTITIONS, "latest") == {("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): 30}
    cluster._client = None
    offsets, away = cluster.list_offsets_of_available(PARTITIONS, "latest")  # no retry: the copy goes on without it
    assert offsets == {("orders", 0): 10, ("orders", 1): 20} and list(away) == [("heartbeats", 0)]
    assert cluster.list_offsets(PARTITIONS, "latest") == {("orders", 0): 11, ("orders", 1): 21, ("heartbeats", 0): 30}


class WholeCallClient(FakeClient):
    """As librdkafka answers ListOffsets: one call is answered as a whole, so a leader that does not answer (a
    node dead but still named in metadata) times out every partition of the call."""

    def __init__(self, answers: dict[tuple[str, int], int], leaders: dict[tuple[str, int], int], dead: int) -> None:
        super().__init__(dict(answers), leaders)
        self.dead = dead

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Answer]]:
        asked = [(tp.topic, tp.partition) for tp in request]
        timeout = KafkaError(KafkaError._TIMED_OUT)
        stuck = any(self.leaders[tp] == self.dead for tp in asked)
        saved = self.answers
        self.answers = {tp: timeout if stuck else saved[tp] for tp in asked}
        try:
            return super().list_offsets(request, **kwargs)
        finally:
            self.answers = saved


def test_a_leader_that_does_not_answer_times_out_only_its_own_partitions() -> None:
    leaders = {("orders", 0): 1, ("orders", 1): 2, ("heartbeats", 0): 3}
    client = WholeCallClient({("orders", 0): 10, ("orders", 1): 20, ("heartbeats", 0): 30}, leaders, dead=3)
    cluster = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"}, timeout_s=1.0)
    cluster._client = client  # type: ignore[assignment]
    offsets, away = cluster.list_offsets_of_available(PARTITIONS, "latest")
    assert offsets == {("orders", 0): 10, ("orders", 1): 20}
    assert list(away) == [("heartbeats", 0)]
    assert sorted(map(sorted, client.calls)) == [[("heartbeats", 0)], [("orders", 0)], [("orders", 1)]]  # per leader

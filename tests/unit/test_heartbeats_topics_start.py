"""A run's first step, the heartbeats topics: their creation is retried (a KRaft "controller" that was just
killed does not answer until it is fenced), while a target that answers nothing is named at once."""

from __future__ import annotations

from typing import Any

import pytest

from mm2py.control.admin_pool import AdminPool
from mm2py.engine.run import ensure_heartbeats_topics
from mm2py.errors import ClusterUnreachableError, KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin, TopicInfo
from tests.unit.test_engine_driver import InstantStop, flow


class FakeTarget(ClusterAdmin):
    """A target whose topic listing answers (or not) and whose first ``failures`` creations time out."""

    def __init__(
        self,
        *,
        answers: bool = True,
        failures: int = 0,
        existing: tuple[str, ...] = (),
        refusal: KafkaOperationError | None = None,
    ) -> None:
        super().__init__("target", {"bootstrap.servers": "b:1"})
        self.answers = answers
        self.failures = failures
        self.refusal = refusal  # what the cluster answers for every topic, when it refuses to create it
        self.existing = {name: TopicInfo(name, 1) for name in existing}
        self.listings = 0
        self.creations: list[list[str]] = []

    def list_topics(self) -> dict[str, TopicInfo]:
        self.listings += 1
        if not self.answers:
            raise ClusterUnreachableError("target", "listing topics", "no broker answered")
        return dict(self.existing)

    def create_topics(self, topics: list[Any]) -> dict[str, KafkaOperationError | None]:
        self.creations.append([t.topic for t in topics])
        if len(self.creations) <= self.failures:
            raise ClusterUnreachableError("target", "creating topic heartbeats", "no answer before the call's timeout")
        if self.refusal is not None:
            return {t.topic: self.refusal for t in topics}
        self.existing.update({t.topic: TopicInfo(t.topic, 1) for t in topics})
        return {t.topic: None for t in topics}


def pool_of(target: FakeTarget) -> AdminPool:
    return AdminPool(lambda _alias, _flow, _side: target)


def test_a_creation_the_named_controller_does_not_answer_is_retried_until_it_is_done() -> None:
    target, stop = FakeTarget(failures=2), InstantStop()
    ensure_heartbeats_topics([flow()], pool_of(target), stop)
    assert target.creations == [["heartbeats"]] * 3 and "heartbeats" in target.existing
    assert stop.nominal_waits == [1.0, 2.0]


def test_a_target_that_answers_nothing_is_named_at_once_without_retries() -> None:
    target, stop = FakeTarget(answers=False), InstantStop()
    with pytest.raises(ClusterUnreachableError, match="listing topics on target failed: no broker answered"):
        ensure_heartbeats_topics([flow()], pool_of(target), stop)
    assert target.listings == 1 and target.creations == [] and stop.waits == []


def test_creation_retries_end_with_the_retry_timeout() -> None:
    target, stop = FakeTarget(failures=100), InstantStop()
    with pytest.raises(ClusterUnreachableError, match="creating topic heartbeats"):
        ensure_heartbeats_topics([flow("mm2py.retry.timeout.seconds = 5\n")], pool_of(target), stop)
    assert stop.nominal_waits == [1.0, 2.0, 4.0]  # waits return at once here; the next, 8 s, would end past the 5 s


def test_an_existing_heartbeats_topic_needs_no_creation() -> None:
    target = FakeTarget(existing=("heartbeats",), failures=100)
    ensure_heartbeats_topics([flow()], pool_of(target), InstantStop())
    assert target.creations == []


def test_a_creation_the_cluster_refuses_is_named_at_once_without_retries() -> None:
    """Waiting does not change a refusal (a one-node target and MM2's default replication factor of 3)."""
    too_few = KafkaOperationError(
        "target",
        "creating topic heartbeats",
        "Replication factor: 3 larger than available brokers: 1.",
        code="INVALID_REPLICATION_FACTOR",
    )
    target, stop = FakeTarget(refusal=too_few), InstantStop()
    with pytest.raises(KafkaOperationError, match=r"heartbeats .*larger than available brokers.*replication.factor"):
        ensure_heartbeats_topics([flow()], pool_of(target), stop)
    assert target.creations == [["heartbeats"]] and stop.waits == []


def test_a_creation_an_acl_refuses_drops_that_pairs_heartbeats_with_one_line_naming_the_acl(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """MM2 logs a refused heartbeats topic and goes on; the run keeps copying, without that pair's heartbeats."""
    refused = KafkaOperationError(
        "target",
        "creating topic heartbeats",
        "Authorization failed.",
        code="TOPIC_AUTHORIZATION_FAILED",
        principal="User:mm2",
    )
    target, stop = FakeTarget(refusal=refused), InstantStop()
    said: set[tuple[str, str]] = set()
    kept = ensure_heartbeats_topics([flow()], pool_of(target), stop, refused=said)
    assert kept == [] and said == {("target", "heartbeats")} and stop.waits == []
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(lines) == 1
    assert "heartbeats skipped: target refused User:mm2" in lines[0]
    assert "grant Create, Write and Read on topic heartbeats (cluster target)" in lines[0]
    assert "emit.heartbeats.enabled = false" in lines[0]

"""Calls librdkafka sends to the node it believes is the controller are bounded by a short attempt, and a
timed-out attempt leaves a fresh client behind: a node that died a moment ago is still named controller by
KRaft brokers until it is fenced, and librdkafka would wait on it for the call's whole timeout."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin import CONTROLLER_ATTEMPT_S, MAX_CALL_TIMEOUT_S, ClusterAdmin


class RecordingClient:
    """Records each call's request_timeout; answers every resource at once, or never (``answer=False``)."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.timeouts: dict[str, float] = {}

    def _futures(self, call: str, names: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self.timeouts[call] = request_timeout
        futures: dict[Any, Future[Any]] = {}
        for name in names:
            future: Future[Any] = Future()
            if self.answer:
                future.set_result({})
            futures[name] = future
        return futures

    def describe_configs(self, resources: list[ConfigResource], request_timeout: float) -> dict[Any, Future[Any]]:
        return self._futures("describe_configs", resources, request_timeout)

    def create_topics(self, topics: list[NewTopic], request_timeout: float) -> dict[Any, Future[Any]]:
        return self._futures("create_topics", [t.topic for t in topics], request_timeout)

    def create_partitions(self, parts: list[NewPartitions], request_timeout: float) -> dict[Any, Future[Any]]:
        return self._futures("create_partitions", [p.topic for p in parts], request_timeout)

    def alter_configs(self, resources: list[ConfigResource], request_timeout: float) -> dict[Any, Future[Any]]:
        return self._futures("alter_configs", resources, request_timeout)

    def incremental_alter_configs(
        self, resources: list[ConfigResource], request_timeout: float
    ) -> dict[Any, Future[Any]]:
        return self._futures("incremental_alter_configs", resources, request_timeout)

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        """A call librdkafka sends to any node: it keeps the admin's full timeout."""
        self.timeouts["list_consumer_groups"] = request_timeout
        future: Future[Any] = Future()
        future.set_result(SimpleNamespace(valid=[]))
        return future

    def poll(self, _timeout: float) -> int:
        return 0


def test_controller_bound_calls_use_the_short_attempt_and_others_keep_the_call_timeout() -> None:
    admin = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"})
    client = RecordingClient()
    admin._client = client  # type: ignore[assignment]
    topic = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    admin.describe_topic_configs(["orders"])
    admin.create_topics([NewTopic("orders", 1, 1)])
    admin.create_partitions({"orders": 2})
    admin.alter_configs([topic])
    admin.incremental_alter_configs([topic])
    admin.list_groups()
    controller_calls = (
        "describe_configs",
        "create_topics",
        "create_partitions",
        "alter_configs",
        "incremental_alter_configs",
    )
    assert client.timeouts == {
        **dict.fromkeys(controller_calls, CONTROLLER_ATTEMPT_S),
        "list_consumer_groups": MAX_CALL_TIMEOUT_S,
    }
    assert MAX_CALL_TIMEOUT_S > CONTROLLER_ATTEMPT_S


def test_an_unanswered_describe_fails_after_the_attempt_and_the_next_call_gets_a_new_client() -> None:
    admin = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"})
    admin.controller_timeout_s = 0.05  # the attempt's length is the previous test's business
    stuck = RecordingClient(answer=False)
    admin._client = stuck  # type: ignore[assignment]
    with pytest.raises(KafkaOperationError, match="describing configs of orders"):
        admin.describe_topic_configs(["orders"])
    assert admin._client is None  # a fresh client reads metadata that names a live node


def test_a_smaller_admin_timeout_bounds_the_attempt_too() -> None:
    admin = ClusterAdmin("dc1", {"bootstrap.servers": "unused:1"}, timeout_s=2.0)
    assert admin.controller_timeout_s == 2.0

"""A principal with MM2's ACLs and no more: the optional features an ACL refuses are switched off for the run with
one line each, what the copy needs stops the flow at once, and nothing retries an authorizer's answer.

Fake admins stand in for the clusters here; tests/realkafka/test_least_privilege.py runs the same on real Kafka
with StandardAuthorizer.
"""

from __future__ import annotations

from typing import Any

import pytest

from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import Commit, sync_group_offsets
from mm2py.control.topics import internal_topics
from mm2py.engine.retry import Retrier
from mm2py.engine.run import ensure_flow_internal_topics
from mm2py.engine.stats import FlowStats
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin, TopicInfo
from mm2py.librdkafka.principals import principal_of
from mm2py.metrics.registry import RunMetrics
from tests.unit.test_engine_driver import InstantStop, flow


def refusal(operation: str, code: str = "TOPIC_AUTHORIZATION_FAILED") -> KafkaOperationError:
    return KafkaOperationError("dc1", operation, "Authorization failed.", code=code, principal="User:mm2")


class Cluster(ClusterAdmin):
    """One cluster that creates every topic except those it refuses (with an authorization answer)."""

    def __init__(self, alias: str, refuses: tuple[str, ...] = ()) -> None:
        super().__init__(alias, {"bootstrap.servers": "b:1"})
        self.refuses = refuses
        self.topics: dict[str, TopicInfo] = {}

    def list_topics(self) -> dict[str, TopicInfo]:
        return dict(self.topics)

    def create_topics(self, topics: list[Any]) -> dict[str, KafkaOperationError | None]:
        outcome: dict[str, KafkaOperationError | None] = {}
        for t in topics:
            if t.topic in self.refuses:
                outcome[t.topic] = refusal(f"creating topic {t.topic}")
            else:
                self.topics[t.topic] = TopicInfo(t.topic, 1)
                outcome[t.topic] = None
        return outcome


def pool_of(*clusters: Cluster) -> AdminPool:
    by_alias = {c.alias: c for c in clusters}
    return AdminPool(lambda alias, _flow, _side: by_alias[alias])


def test_strimzis_source_acls_refuse_the_dense_syncs_topic_and_the_flow_runs_without_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Strimzi grants Create/Write on mm2-offset-syncs.<target>.internal alone on the source: mm2py's dense syncs
    topic is refused, the flow translates with MM2's syncs, and the line says what to grant or set."""
    source, target = Cluster("dc1", refuses=("mm2py-offset-syncs.target.internal",)), Cluster("target")
    metrics = RunMetrics()
    f = ensure_flow_internal_topics(flow(), pool_of(source, target), InstantStop(), metrics, set())
    assert not f.dense_offset_syncs and f.emit_offset_syncs_enabled and f.lease_enabled
    assert "mm2-offset-syncs.target.internal" in source.topics
    assert {"mm2-offsets.dc1.internal", "heartbeats", "dc1.checkpoints.internal", "mm2py-leases.internal"} <= set(
        target.topics
    )
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert lines == [
        "flow=dc1->target: dense offset syncs skipped: dc1 refused User:mm2 (creating topic "
        "mm2py-offset-syncs.target.internal: Authorization failed.); grant Create, Write and Read on topic "
        "mm2py-offset-syncs.target.internal (cluster dc1) to enable it, or set mm2py.offset-syncs.dense.enabled = "
        "false; offsets are translated with MM2's syncs alone (exact within offset.lag.max of the copy)"
    ]
    assert metrics.health.ready()[1] == ["flow dc1->target: starting; without dense offset syncs (refused by an ACL)"]


def test_every_refused_optional_topic_switches_its_feature_off_and_is_said_once() -> None:
    target = Cluster("target", refuses=("heartbeats", "dc1.checkpoints.internal", "mm2py-leases.internal"))
    source = Cluster("dc1", refuses=("mm2-offset-syncs.target.internal",))
    said: set[tuple[str, str]] = {("target", "heartbeats")}  # named already by the heartbeats step
    f = ensure_flow_internal_topics(flow(), pool_of(source, target), InstantStop(), None, said)
    assert not (f.emit_heartbeats_enabled or f.emit_offset_syncs_enabled or f.emit_checkpoints_enabled)
    assert not f.lease_enabled
    assert said == {
        ("target", "heartbeats"),
        ("target", "dc1.checkpoints.internal"),
        ("target", "mm2py-leases.internal"),
        ("dc1", "mm2-offset-syncs.target.internal"),
    }
    # Without offset syncs there are no dense syncs to write either: nothing left that the ACLs refuse.
    assert {t.name for t in internal_topics(f)} == {"mm2-offsets.dc1.internal", "heartbeats"}


def test_a_refused_progress_topic_stops_at_once_naming_principal_operation_and_topic() -> None:
    """The copy cannot record what it copied without its progress topic: no retries, no degrading."""
    target, stop = Cluster("target", refuses=("mm2-offsets.dc1.internal",)), InstantStop()
    with pytest.raises(KafkaOperationError) as raised:
        ensure_flow_internal_topics(flow(), pool_of(Cluster("dc1"), target), stop, None, set())
    assert str(raised.value) == (
        "creating internal topic mm2-offsets.dc1.internal on target failed: Authorization failed. (principal User:mm2)"
    )
    assert stop.waits == []


def test_the_retrier_never_retries_an_authorization_refusal_but_retries_a_timeout() -> None:
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise refusal("reading configs", "CLUSTER_AUTHORIZATION_FAILED")

    stop = InstantStop()
    with pytest.raises(KafkaOperationError, match="principal User:mm2"):
        Retrier(flow(), FlowStats("dc1->target"))(refused, stop)
    assert calls == [1] and stop.waits == []
    attempts: list[int] = []

    def slow_then_fine() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise KafkaOperationError("dc1", "listing topics", "timed out", code="REQUEST_TIMED_OUT")
        return "done"

    assert Retrier(flow(), FlowStats("dc1->target"))(slow_then_fine, stop) == "done" and len(attempts) == 3


class Groups(ClusterAdmin):
    """A target whose ACLs let this principal commit for group ``allowed`` only."""

    def __init__(self) -> None:
        super().__init__("target", {"bootstrap.servers": "b:1"})
        self.committed: dict[str, dict[tuple[str, int], int]] = {}

    def group_state(self, group: str) -> str:
        if group != "allowed":
            raise refusal(f"describing group {group}", "GROUP_AUTHORIZATION_FAILED")
        return "EMPTY"

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return {}

    def alter_group_offsets(self, group: str, offsets: Any, metadata: Any) -> None:
        self.committed[group] = dict(offsets)


def test_group_offset_sync_skips_a_refused_group_and_syncs_the_others() -> None:
    target = Groups()
    wanted = {"denied": {("dc1.orders", 0): Commit(5, "")}, "allowed": {("dc1.orders", 0): Commit(7, "")}}
    outcome = sync_group_offsets(target, wanted)
    assert target.committed == {"allowed": {("dc1.orders", 0): 7}}
    assert outcome["allowed"] == "committed 1 partition(s)"
    assert outcome["denied"].startswith("refused: describing group denied on dc1 failed")
    assert outcome["denied"].endswith("grant Describe and Read on group denied and Read on its remote topics (target)")


@pytest.mark.parametrize(
    ("settings", "principal"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mm2"}, "User:mm2"),
        ({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN", "sasl.username": "a"}, "User:a"),
        ({"security.protocol": "SSL", "ssl.certificate.pem": "..."}, "the TLS client certificate's principal"),
        ({"bootstrap.servers": "b:1"}, "User:ANONYMOUS"),
    ],
)
def test_the_principal_a_refusal_names(settings: dict[str, str], principal: str) -> None:
    assert principal_of(settings) == principal

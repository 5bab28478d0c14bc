"""Topic ACL sync by MM2's rules: which source ACLs reach the target, and in what form (no broker needed)."""

from __future__ import annotations

import logging

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control.acls import sync_topic_acls, target_topic_acls
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin_acls import SecurityDisabledError, TopicAcl
from mm2py.mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy


def acl(
    topic: str,
    operation: str = "READ",
    permission: str = "ALLOW",
    pattern: str = "LITERAL",
    principal: str = "User:alice",
    host: str = "*",
) -> TopicAcl:
    return TopicAcl(topic, pattern, principal, host, operation, permission)


def everything(topic: str) -> bool:
    return True


def remote(acls: list[TopicAcl], policy: object = None, accept: object = everything) -> list[TopicAcl]:
    return target_topic_acls(acls, "src", policy or DefaultReplicationPolicy(), accept)  # type: ignore[arg-type]


# Ported from MM2's MirrorSourceConnectorTest (testAclFiltering, testAclTransformation).
def test_allow_write_is_never_replicated_but_allow_all_is() -> None:
    assert remote([acl("test_topic", "WRITE")]) == []
    assert remote([acl("test_topic", "ALL")]) != []


def test_allow_all_becomes_allow_read_on_the_remote_topic() -> None:
    assert remote([acl("test_topic", "ALL", principal="User:kafka", host="")]) == [
        acl("src.test_topic", "READ", principal="User:kafka", host="")
    ]


def test_deny_bindings_are_copied_unchanged_even_deny_all_and_deny_write() -> None:
    denies = [acl("test_topic", "ALL", "DENY"), acl("test_topic", "WRITE", "DENY", host="10.0.0.1")]
    assert remote(denies) == [
        acl("src.test_topic", "ALL", "DENY"),
        acl("src.test_topic", "WRITE", "DENY", host="10.0.0.1"),
    ]


def test_other_operations_are_copied_unchanged() -> None:
    kept = [acl("t", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER", "DELETE", "CREATE")]
    assert [a.operation for a in remote(kept)] == ["READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER", "DELETE", "CREATE"]
    assert {a.topic for a in remote(kept)} == {"src.t"}


def test_prefixed_patterns_are_never_synced() -> None:
    assert remote([acl("orders", pattern="PREFIXED"), acl("orders", "ALL", "DENY", pattern="PREFIXED")]) == []


def test_a_literal_wildcard_becomes_a_literal_acl_on_the_prefixed_name() -> None:
    assert remote([acl("*")]) == [acl("src.*")]


def test_only_topics_the_flow_replicates_keep_their_acls() -> None:
    acls = [acl("orders"), acl("payments"), acl("orders", "DESCRIBE")]
    assert remote(acls, accept=lambda topic: topic == "orders") == [acl("src.orders"), acl("src.orders", "DESCRIBE")]


def test_identity_replication_keeps_the_topic_name() -> None:
    assert remote([acl("orders", "ALL")], IdentityReplicationPolicy()) == [acl("orders", "READ")]


def test_two_source_bindings_that_become_the_same_target_binding_are_created_once() -> None:
    assert remote([acl("t", "ALL"), acl("t", "READ")]) == [acl("src.t", "READ")]


# --- the sync itself, with stand-in admins ------------------------------------------------------------------
def flow_config(extra: str = "", source: str = "src") -> FlowConfig:
    text = (
        f"clusters = {source}, tgt\n{source}.bootstrap.servers = localhost:1\ntgt.bootstrap.servers = localhost:2\n"
        f"{source}->tgt.enabled = true\ntopics = orders.*\n{extra}"
    )
    return build_flow_config(MirrorMakerConfig(parse_properties(text, "mm2.properties"), {}), Flow(source, "tgt"))


class SourceAdmin:
    principal = "User:mm2"

    def __init__(self, acls: list[TopicAcl] | None, operations: frozenset[str] | None = None) -> None:
        self.acls, self.calls = acls, 0
        self.operations = operations  # the cluster's authorized operations for this principal (None: not said)

    def cluster_operations(self) -> frozenset[str] | None:
        return self.operations

    def describe_topic_acls(self) -> list[TopicAcl]:
        self.calls += 1
        if self.acls is None:
            raise SecurityDisabledError("src", "describing topic ACLs", "the cluster has no authorizer")
        return self.acls


class TargetAdmin:
    def __init__(self, refuse: set[str] | None = None, disabled: bool = False) -> None:
        self.created: list[list[TopicAcl]] = []
        self.refuse, self.disabled = refuse or set(), disabled

    def create_topic_acls(self, acls: list[TopicAcl]) -> dict[TopicAcl, str | None]:
        if self.disabled:
            raise SecurityDisabledError("tgt", "creating ACLs", "the cluster has no authorizer")
        self.created.append(acls)
        return {a: ("Authorization failed" if a.principal in self.refuse else None) for a in acls}


def test_sync_creates_the_filtered_rewritten_acls_and_counts_them() -> None:
    source = SourceAdmin(
        [
            acl("orders-eu", "ALL"),
            acl("orders-eu", "WRITE"),
            acl("payments"),
            acl("orders-us", principal="User:bob"),
            acl("mm2-offsets.src.internal"),
        ]
    )
    target = TargetAdmin(refuse={"User:bob"})
    assert sync_topic_acls(flow_config(), source, target) == 1  # type: ignore[arg-type]
    assert target.created == [[acl("src.orders-eu", "READ"), acl("src.orders-us", principal="User:bob")]]


def test_a_source_without_authorizer_is_hinted_once_and_never_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    flow = flow_config(source="plain")  # a flow of its own: the hint is remembered per flow
    source, target = SourceAdmin(None), TargetAdmin()
    with caplog.at_level(logging.INFO, logger="mm2py.control.acls"):
        assert sync_topic_acls(flow, source, target) == 0  # type: ignore[arg-type]
        assert sync_topic_acls(flow, source, target) == 0  # type: ignore[arg-type]
    assert source.calls == 1 and target.created == []
    assert len([r for r in caplog.records if "no authorizer" in r.getMessage()]) == 1


def test_nothing_is_created_when_nothing_passes_so_create_acls_is_never_sent() -> None:
    target = TargetAdmin()
    assert sync_topic_acls(flow_config(), SourceAdmin([acl("payments")]), target) == 0  # type: ignore[arg-type]
    assert sync_topic_acls(flow_config(), SourceAdmin([]), target) == 0  # type: ignore[arg-type]
    assert target.created == []


def test_disabled_sync_asks_nobody() -> None:
    source = SourceAdmin([acl("orders")])
    disabled = flow_config("sync.topic.acls.enabled = false\n")
    assert sync_topic_acls(disabled, source, TargetAdmin()) == 0  # type: ignore[arg-type]
    assert source.calls == 0


def test_a_target_without_authorizer_is_a_warning_not_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mm2py.control.acls"):
        created = sync_topic_acls(flow_config(), SourceAdmin([acl("orders")]), TargetAdmin(disabled=True))  # type: ignore[arg-type]
    assert created == 0
    assert "target has no authorizer" in caplog.text


def test_an_unreachable_target_is_an_error_like_any_admin_call() -> None:
    class Unreachable(TargetAdmin):
        def create_topic_acls(self, acls: list[TopicAcl]) -> dict[TopicAcl, str | None]:
            raise KafkaOperationError("tgt", "creating ACLs", "no broker answered")

    with pytest.raises(KafkaOperationError):
        sync_topic_acls(flow_config(), SourceAdmin([acl("orders")]), Unreachable())  # type: ignore[arg-type]


def test_a_principal_the_source_does_not_let_describe_acls_is_refused_not_answered_with_no_acls() -> None:
    """Kafka answers DescribeAcls without Describe on the cluster with an empty list: the brokers' authorized
    operations (KIP-430) tell that from "no ACLs", so the flow says ACL sync is skipped instead of syncing none."""
    source = SourceAdmin([], operations=frozenset({"IDEMPOTENT_WRITE"}))
    with pytest.raises(KafkaOperationError) as raised:
        sync_topic_acls(flow_config(), source, TargetAdmin())  # type: ignore[arg-type]
    assert raised.value.refused and raised.value.principal == "User:mm2" and source.calls == 0
    assert sync_topic_acls(flow_config(), SourceAdmin([], frozenset({"DESCRIBE"})), TargetAdmin()) == 0  # type: ignore[arg-type]

"""``cutover --deny-writes`` (tools/cutover/deny_writes.py) against a fake admin, and the mark that records the
denials for failback. Real Kafka with StandardAuthorizer: tests/realkafka/test_real_kafka_deny_writes.py."""

from __future__ import annotations

import json

import pytest

from mm2py.control.cutover_mark import CutoverMark
from mm2py.errors import CheckFailed
from mm2py.librdkafka.admin_acls import SecurityDisabledError, TopicAcl
from mm2py.tools.cutover.deny_writes import allow_writes_again, deny_writes, write_denials


class FakeAdmin:
    """A's topic ACLs; ``refuse`` names topics whose binding the brokers refuse."""

    alias = "A"

    def __init__(self, existing: list[TopicAcl] | None = None, *, authorizer: bool = True, refuse: str = "") -> None:
        self.acls = list(existing or [])
        self.authorizer = authorizer
        self.refuse = refuse

    def describe_topic_acls(self) -> list[TopicAcl]:
        if not self.authorizer:
            raise SecurityDisabledError("A", "describing topic ACLs", "the cluster has no authorizer")
        return list(self.acls)

    def create_topic_acls(self, acls: list[TopicAcl]) -> dict[TopicAcl, str | None]:
        outcome: dict[TopicAcl, str | None] = {}
        for acl in acls:
            if acl.topic == self.refuse:
                outcome[acl] = "Broker: Invalid request"
            else:
                self.acls.append(acl)
                outcome[acl] = None
        return outcome

    def delete_topic_acls(self, acls: list[TopicAcl]) -> int:
        gone = [a for a in self.acls if a in acls]
        self.acls = [a for a in self.acls if a not in acls]
        return len(gone)


def deny(topic: str) -> TopicAcl:
    return TopicAcl(topic, "LITERAL", "User:*", "*", "WRITE", "DENY")


def test_only_the_missing_denials_are_added_and_failback_deletes_only_those() -> None:
    theirs = deny("payments")  # set up by the operator before the cut-over: never deleted by mm2py
    admin = FakeAdmin([theirs])
    added = deny_writes(admin, ["orders", "payments", "orders"], dry_run=False)  # type: ignore[arg-type]
    assert added == [deny("orders")] and set(admin.acls) == {theirs, deny("orders")}
    assert allow_writes_again(admin, added) == 1  # type: ignore[arg-type]
    assert admin.acls == [theirs]


def test_a_dry_run_names_the_denials_and_adds_none() -> None:
    admin = FakeAdmin()
    assert deny_writes(admin, ["orders"], dry_run=True) == write_denials(["orders"])  # type: ignore[arg-type]
    assert admin.acls == []


def test_a_cluster_without_an_authorizer_is_a_failed_check_naming_it() -> None:
    with pytest.raises(CheckFailed, match=r"--deny-writes: A has no authorizer, so no ACL can make it refuse writes"):
        deny_writes(FakeAdmin(authorizer=False), ["orders"], dry_run=False)  # type: ignore[arg-type]


def test_a_refused_binding_fails_the_check_and_deletes_the_ones_added_before_it() -> None:
    admin = FakeAdmin(refuse="payments")
    with pytest.raises(CheckFailed, match=r"refused DENY WRITE on topic payments for User:\*: Broker: Invalid request"):
        deny_writes(admin, ["orders", "payments"], dry_run=False)  # type: ignore[arg-type]
    assert admin.acls == []


def test_the_mark_carries_the_denials_and_a_mark_written_before_them_reads_as_none() -> None:
    mark = CutoverMark("A->B", 1, "cutover", "h:1", (), (deny("orders"),))
    assert CutoverMark.from_json(json.loads(json.dumps(mark.to_json()))) == mark
    older = {"flow": "A->B", "at": 1, "command": "cutover", "by": "h:1", "positions": []}
    assert CutoverMark.from_json(older).denied_writes == ()

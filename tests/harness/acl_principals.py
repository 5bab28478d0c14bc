"""A principal of its own per test on the real-Kafka cluster with an authorizer: a SCRAM user, its ACLs, and
its removal afterwards, so the shared cluster is left as it was found.

Why a user per test rather than ``alice``: a test that grants Strimzi's ``topic *`` rights would otherwise leave
alice able to write where other tests check that she cannot, and two tests' grants would mix.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster

_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
Grant = tuple[ResourceType, str, AclOperation]  # what, its name ("*" for any), which operation


def topic(name: str, *operations: AclOperation) -> list[Grant]:
    return [(ResourceType.TOPIC, name, op) for op in operations]


def group(name: str, *operations: AclOperation) -> list[Grant]:
    return [(ResourceType.GROUP, name, op) for op in operations]


def cluster(*operations: AclOperation) -> list[Grant]:
    return [(ResourceType.BROKER, "kafka-cluster", op) for op in operations]


@dataclass(frozen=True)
class Principal:
    """A SCRAM-SHA-512 user on one cluster; ``java_settings`` connect a Java client (or mm2py) as it."""

    kafka: KafkaCluster
    user: str
    password: str

    @property
    def name(self) -> str:
        return f"User:{self.user}"

    def java_settings(self) -> dict[str, str]:
        tls = self.kafka.security.java_client_settings("SSL")
        return {
            **tls,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{_SCRAM_MODULE} required username="{self.user}" password="{self.password}";',
        }

    def client_settings(self) -> dict[str, str]:
        return self.kafka.client_config(
            "SASL_SSL", user="admin", **{"sasl.username": self.user, "sasl.password": self.password}
        )


def _bindings(principal: str, grants: Iterable[Grant]) -> list[AclBinding]:
    return [
        AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
        for kind, name, op in grants
    ]


def _acls_of(admin: AdminClient, principal: str) -> int:
    match_all = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return len(admin.describe_acls(match_all, request_timeout=30).result(timeout=30))


def grant(principal: Principal, grants: Iterable[Grant]) -> None:
    """More ACLs for ``principal``; returns once the broker answers with them."""
    admin = AdminClient(principal.kafka.client_config())
    before = _acls_of(admin, principal.name)
    bindings = _bindings(principal.name, grants)
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)
    poll_until(lambda: _acls_of(admin, principal.name) >= before + len(bindings), 30, f"new ACLs of {principal.name}")


def revoke(kafka: KafkaCluster, principal: str) -> None:
    """Every ACL of ``principal`` (e.g. one a test made for an ACL sync to copy)."""
    admin = AdminClient(kafka.client_config())
    gone = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY
    )
    for future in admin.delete_acls([gone], request_timeout=30).values():
        future.result(timeout=30)


def topic_bindings(kafka: KafkaCluster, topic: str) -> set[tuple[str, str]]:
    """(principal, operation) of every ACL on ``topic`` (literal)."""
    admin = AdminClient(kafka.client_config())
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY
        ),
        request_timeout=30,
    ).result(timeout=30)
    return {(b.principal, b.operation.name) for b in found}


@contextmanager
def principal_with(kafka: KafkaCluster, grants: Iterable[Grant]) -> Iterator[Principal]:
    """A new user holding exactly ``grants`` (ALLOW, literal names; ``*`` is Kafka's wildcard), removed with its
    ACLs at the end. Returns once the broker lets the user log in and answers with every ACL."""
    user = f"mm2u{uuid.uuid4().hex[:8]}"
    principal = Principal(kafka, user, secrets.token_urlsafe(12))
    admin = AdminClient(kafka.client_config())
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion(user, info, principal.password.encode())
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
        future.result(timeout=30)
    bindings = _bindings(principal.name, grants)
    try:
        for future in admin.create_acls(bindings, request_timeout=30).values():
            future.result(timeout=30)
        # CreateAcls returns once the controller has them; the broker learns them (and the user) a bit later.
        poll_until(lambda: _acls_of(admin, principal.name) == len(bindings), 30, f"the ACLs of {principal.name}")
        login = AdminClient(principal.client_settings())
        poll_until(lambda: login.list_topics(timeout=5) is not None, 30, f"{principal.name} logging in")
        yield principal
    finally:
        revoke(kafka, principal.name)
        deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
        for future in admin.alter_user_scram_credentials([deletion], request_timeout=30).values():
            future.result(timeout=30)

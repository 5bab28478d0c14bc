"""Topic ACLs through the admin client (driver side): what MM2's ACL sync reads on a source and writes on a target.

Kept apart from :mod:`mm2py.librdkafka.admin` as a mixin of :class:`~mm2py.librdkafka.admin.ClusterAdmin`,
which gives it its client, timeout and error wrapping.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.error_mapping import UNREACHABLE, error_of


@dataclass(frozen=True)
class TopicAcl:
    """One ACL binding on a topic, with Kafka's own enum names (as ``kafka-acls.sh`` prints them)."""

    topic: str
    pattern_type: str  # LITERAL or PREFIXED
    principal: str  # User:alice
    host: str  # * for any
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY


def _binding_fields(acl: TopicAcl) -> tuple[Any, ...]:
    """A TopicAcl as the client's AclBinding and AclBindingFilter take it (the same seven fields, in order)."""
    return (
        ResourceType.TOPIC,
        acl.topic,
        ResourcePatternType[acl.pattern_type],
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType[acl.permission],
    )


class SecurityDisabledError(KafkaOperationError):
    """The cluster runs without an authorizer (Kafka's SECURITY_DISABLED): it has no ACLs to read or write."""


class TopicAclAdmin:
    """Topic ACL calls of :class:`~mm2py.librdkafka.admin.ClusterAdmin`."""

    alias: str
    timeout_s: float

    @property
    def client(self) -> AdminClient:
        raise NotImplementedError

    def _wrap(self, operation: str, exc: BaseException) -> KafkaOperationError:
        raise NotImplementedError

    def cluster_operations(self) -> frozenset[str] | None:
        """What this principal may do on the cluster resource, by the brokers' own answer (KIP-430's authorized
        operations, ``DESCRIBE``, ``ALTER``, ...); None when the cluster does not say.

        Why: Kafka answers DescribeAcls from a principal without Describe on the cluster with an empty list, not a
        refusal, so "no ACLs" and "not allowed to see them" look the same without asking this first.
        """
        try:
            result = self.client.describe_cluster(
                include_authorized_operations=True, request_timeout=self.timeout_s
            ).result(timeout=self.timeout_s)
            operations = getattr(result, "authorized_operations", None)
            if operations is not None:
                return frozenset(op.name for op in operations)
            # confluent-kafka gives None for "none at all" as for "not said": a topic's answer tells them apart.
            visible = sorted(self.client.list_topics(timeout=self.timeout_s).topics)[:1]
            said = self.topic_operations(visible)  # left out when the broker does not say
        except (KafkaException, FutureTimeout):
            return None
        return frozenset() if said else None

    def topic_operations(self, topics: list[str]) -> dict[str, frozenset[str]]:
        """What this principal may do on each of ``topics`` that exists and that it may see (KIP-430's authorized
        operations); a topic it may not see, or one that does not exist, is left out."""
        if not topics:
            return {}
        futures = self.client.describe_topics(
            TopicCollection(topics), include_authorized_operations=True, request_timeout=self.timeout_s
        )
        found: dict[str, frozenset[str]] = {}
        for name, future in futures.items():
            try:
                description = future.result(timeout=self.timeout_s)
            except (KafkaException, FutureTimeout):
                continue
            operations = getattr(description, "authorized_operations", None)
            if operations is not None:  # None: the broker does not say (no KIP-430): left out, as unknown
                found[name] = frozenset(op.name for op in operations)
        return found

    def describe_topic_acls(self) -> list[TopicAcl]:
        """Every ACL binding on a topic resource, of any pattern type; SecurityDisabledError without an authorizer."""
        operation = "describing topic ACLs"
        # None matches any name, principal and host (the client's hints say str, its docs and code take None).
        any_name: Any = None
        acl_filter = AclBindingFilter(
            ResourceType.TOPIC,
            any_name,
            ResourcePatternType.ANY,
            any_name,
            any_name,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        future = self.client.describe_acls(acl_filter, request_timeout=self.timeout_s)
        try:
            bindings = future.result(timeout=self.timeout_s)
        except (KafkaException, FutureTimeout) as exc:
            raise self._acl_error(operation, exc) from None
        return [
            TopicAcl(
                b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name
            )
            for b in bindings
        ]

    def create_topic_acls(self, acls: list[TopicAcl]) -> dict[TopicAcl, str | None]:
        """Create ACL bindings (creating an existing one is a no-op in Kafka); returns acl -> None or the error.

        Never call this against a broker that has no authorizer support at all: tansu aborts the client
        process on CreateAcls. Callers describe first and skip when there is nothing to create.
        """
        if not acls:
            return {}
        bindings = [AclBinding(*_binding_fields(a)) for a in acls]
        futures = self.client.create_acls(bindings, request_timeout=self.timeout_s)
        outcome: dict[TopicAcl, str | None] = {}
        for acl, binding in zip(acls, bindings, strict=True):
            try:
                futures[binding].result(timeout=self.timeout_s)
                outcome[acl] = None
            except (KafkaException, FutureTimeout) as exc:
                err = error_of(exc)
                # A refused CreateAcls (no Alter on the cluster) refuses every binding alike: one error.
                if isinstance(exc, FutureTimeout) or (
                    err is not None
                    and err.code()
                    in (*UNREACHABLE, KafkaError.SECURITY_DISABLED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)
                ):
                    raise self._acl_error(f"creating ACLs on topic {acl.topic}", exc) from None
                outcome[acl] = err.str() if err is not None else str(exc)
        return outcome

    def delete_topic_acls(self, acls: list[TopicAcl]) -> int:
        """Delete exactly these bindings (one filter each, every field given, so nothing else matches); returns
        how many bindings the brokers deleted. A binding already gone deletes nothing and is no error."""
        if not acls:
            return 0
        filters = [AclBindingFilter(*_binding_fields(a)) for a in acls]  # every field given: exactly this one
        futures = self.client.delete_acls(filters, request_timeout=self.timeout_s)
        deleted = 0
        for acl, acl_filter in zip(acls, filters, strict=True):
            try:
                deleted += len(futures[acl_filter].result(timeout=self.timeout_s))
            except (KafkaException, FutureTimeout) as exc:
                raise self._acl_error(f"deleting ACLs on topic {acl.topic}", exc) from None
        return deleted

    def _acl_error(self, operation: str, exc: BaseException) -> KafkaOperationError:
        err = error_of(exc)
        if err is not None and err.code() == KafkaError.SECURITY_DISABLED:
            return SecurityDisabledError(self.alias, operation, "the cluster has no authorizer")
        return self._wrap(operation, exc)

"""Consumer groups' state and members through the admin client (driver side): whether a group is idle (group
offset sync, ``translate-offsets --execute``) and who is in it (``cutover`` names the members that block it).

Kept apart from :mod:`mm2py.librdkafka.admin` as a mixin of :class:`~mm2py.librdkafka.admin.ClusterAdmin`,
which gives it its client, timeout and error wrapping.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.error_mapping import error_of

# The group's coordinator is moving or still loading (a cluster's first group creates __consumer_offsets, and
# Kafka 4 answers NOT_COORDINATOR meanwhile): asking again finds it.
_COORDINATOR_NOT_READY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
)


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str


@dataclass(frozen=True)
class GroupInfo:
    state: str  # as the broker names it: EMPTY, STABLE, DEAD, ...
    members: tuple[GroupMember, ...]


class GroupAdmin:
    """Consumer-group calls of :class:`~mm2py.librdkafka.admin.ClusterAdmin`."""

    alias: str
    timeout_s: float

    @property
    def client(self) -> AdminClient:
        raise NotImplementedError

    def _wrap(self, operation: str, exc: BaseException) -> KafkaOperationError:
        raise NotImplementedError

    def group_state(self, group: str) -> str:
        """The group's state as the broker names it (EMPTY, STABLE, DEAD, ...); DEAD for an unknown group."""
        return self.describe_group(group).state

    def describe_group(self, group: str) -> GroupInfo:
        """The group's state and members; DEAD and none for an unknown group."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            futures = self.client.describe_consumer_groups([group], request_timeout=self.timeout_s)
            try:
                description = futures[group].result(timeout=self.timeout_s)
            except (KafkaException, FutureTimeout) as exc:
                err = error_of(exc)
                if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return GroupInfo("DEAD", ())
                if err is None or err.code() not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                    raise self._wrap(f"describing consumer group {group}", exc) from None
                time.sleep(0.2)  # the poll interval of a retry with a deadline
                continue
            members = tuple(GroupMember(m.member_id, m.client_id, m.host) for m in description.members or [])
            return GroupInfo(str(description.state.name), members)

"""Admin access to one cluster, with bounded timeouts and errors that name the cluster and the operation.

Clients are created on first use and never pickled; only the driver uses admin clients.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic, OffsetSpec

from mm2py.backoff import client_backoff
from mm2py.errors import KafkaOperationError, error_name
from mm2py.librdkafka.admin_acls import TopicAclAdmin
from mm2py.librdkafka.admin_groups import GroupAdmin
from mm2py.librdkafka.error_mapping import (
    AUTH_ERRORS,
    UNREACHABLE,
    error_of,
    leader_away,
    reason_of,
    wrap_kafka_error,
)
from mm2py.librdkafka.principals import principal_of
from mm2py.librdkafka.tls_diagnosis import certificate_problem
from mm2py.librdkafka.tls_versions import VersionRefused, check_brokers_offer, without_pin

log = logging.getLogger(__name__)
# librdkafka's own log lines (connection refused, retries, ...) go through Python logging, so they are
# redacted and shown only with --verbose; the error that matters reaches the user as one line.
librdkafka_log = logging.getLogger("mm2py.librdkafka")

# An unreachable cluster must be named within 30 s (the README's exit codes promise it); librdkafka retries
# connections until the call's timeout, so every call is bounded by this even when admin.timeout.ms (60 s in
# MM2) is larger.
MAX_CALL_TIMEOUT_S = 15.0
# How long every broker of a cluster must have been reported down before a metadata request gives up early.
_DOWN_GRACE_S = 3.0
# librdkafka sends CreateTopics, CreatePartitions, DescribeConfigs and AlterConfigs to the node its last metadata
# answer named controller, and waits for that node until the call's timeout. A KRaft broker names a random live
# broker, and one that has just died stays "live" until the controller fences it (broker.session.timeout.ms,
# 9 s): a run started in that window waited the whole 15 s on a dead node. Java's AdminClient would send the call
# to another node at once (LeastLoadedNodeProvider). These calls take milliseconds on a healthy cluster, so an
# attempt is bounded by this; the caller retries with a fresh client, whose metadata names a node that is up.
CONTROLLER_ATTEMPT_S = 5.0


@dataclass(frozen=True)
class TopicConfigValue:
    value: str
    is_default: bool  # the broker's default, not set on the topic (MM2 copies these only with use.defaults.from)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int


class UnsupportedByBrokerError(KafkaOperationError):
    """The broker does not know the API a call needs (UNSUPPORTED_VERSION): an older broker, or one (a test
    broker, a Kafka-compatible service) that leaves it out."""


class ClusterAdmin(TopicAclAdmin, GroupAdmin):
    """A lazily created AdminClient for one cluster alias (topic ACLs: :class:`TopicAclAdmin`; consumer groups'
    state and members: :class:`GroupAdmin`)."""

    def __init__(self, alias: str, settings: Mapping[str, str], timeout_s: float = MAX_CALL_TIMEOUT_S) -> None:
        self.alias = alias
        self._settings: dict[str, Any] = dict(settings)
        self.principal = principal_of(settings)
        self.timeout_s = min(timeout_s, MAX_CALL_TIMEOUT_S)
        self.controller_timeout_s = min(self.timeout_s, CONTROLLER_ATTEMPT_S)
        self._client: AdminClient | None = None
        self._last_error: KafkaError | None = None  # the first TLS/login failure wins over later noise
        self._down_since: float | None = None

    @property
    def client(self) -> AdminClient:
        if self._client is None:
            try:  # a TLS version pin holds for librdkafka only if the brokers offer it (tls_versions)
                check_brokers_offer(self._settings)
            except VersionRefused as refused:
                raise KafkaOperationError(self.alias, "a TLS handshake", str(refused)) from None
            settings: dict[str, Any] = {
                **without_pin(self._settings),
                "logger": librdkafka_log,
                "error_cb": self._on_error,
            }
            self._client = AdminClient(settings)
        return self._client

    def _on_error(self, err: KafkaError) -> None:
        # librdkafka reports "all brokers down" once, then only the individual connection failures.
        if err.code() == KafkaError._ALL_BROKERS_DOWN and self._down_since is None:
            self._down_since = time.monotonic()
        if self._last_error is None or self._last_error.code() not in AUTH_ERRORS:
            self._last_error = err

    def _wrap(self, operation: str, exc: BaseException) -> KafkaOperationError:
        """Our error for a failed call, with the client's own reason when it has one (TLS, login)."""
        with contextlib.suppress(Exception):  # the reason is a nicety; never hide the original failure
            self.client.poll(0)  # error events are delivered only when the client is polled
        # librdkafka never looks a leader up again: it waits on a dead one, sends a stale leader epoch
        # (FENCED_LEADER_EPOCH) or answers "no leaders found" from its cache until its 5-minute refresh. A new
        # client reads the metadata afresh, as Java's AdminClient does before it retries
        # (PartitionLeaderStrategy unmaps the partition); a failed call is rare, a new client cheap.
        self._client = None
        detail = self._last_error
        unverified = detail is not None and detail.code() == KafkaError._SSL and "verify failed" in detail.str()
        if unverified and (problem := certificate_problem(self._settings)) is not None:  # librdkafka's text is vague
            return KafkaOperationError(self.alias, operation, f"TLS handshake failed: {problem}")
        return wrap_kafka_error(self.alias, operation, exc, detail, self.principal)

    def list_topics(self) -> dict[str, TopicInfo]:
        """All topics with their partition counts."""
        operation = "listing topics"
        metadata = self._metadata(operation)
        result: dict[str, TopicInfo] = {}
        for name, topic in metadata.topics.items():
            if topic.error is not None and topic.error.code() != KafkaError.NO_ERROR:
                raise KafkaOperationError(self.alias, operation, f"topic {name}: {topic.error.str()}")
            result[name] = TopicInfo(name, len(topic.partitions))
        return result

    def _metadata(self, operation: str) -> Any:
        """A Metadata answer, asked for in short slices so a cluster that is clearly down fails fast.

        librdkafka keeps retrying until the call's timeout; but once it reports every broker down for a few
        seconds (connection refused, unknown host), or a failed TLS handshake or login, waiting longer only
        delays the answer a cron job needs.
        """
        started = time.monotonic()
        deadline = started + self.timeout_s
        while True:
            try:
                metadata = self.client.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
                self._down_since = None
                return metadata
            except (KafkaException, FutureTimeout) as exc:
                with contextlib.suppress(Exception):
                    self.client.poll(0)
                now = time.monotonic()
                auth_failed = self._last_error is not None and self._last_error.code() in AUTH_ERRORS
                down = self._down_since is not None and now - max(self._down_since, started) >= _DOWN_GRACE_S
                if auth_failed or down or now >= deadline:
                    raise self._wrap(operation, exc) from None

    def describe_topic_configs(self, topics: list[str]) -> dict[str, dict[str, TopicConfigValue]]:
        """Topic configs as MM2's config sync sees them: read-only, sensitive and static-broker entries dropped."""
        if not topics:
            return {}
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        futures = self.client.describe_configs(resources, request_timeout=self.controller_timeout_s)
        result: dict[str, dict[str, TopicConfigValue]] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=self.controller_timeout_s)
            except (KafkaException, FutureTimeout) as exc:
                raise self._wrap(f"describing configs of {resource.name}", exc) from None
            result[resource.name] = {
                name: TopicConfigValue(entry.value, entry.source == ConfigSource.DEFAULT_CONFIG.value)
                for name, entry in entries.items()
                if entry.value is not None
                and not entry.is_sensitive
                and not entry.is_read_only
                and entry.source != ConfigSource.STATIC_BROKER_CONFIG.value
            }
        return result

    def create_topics(self, topics: list[NewTopic]) -> dict[str, KafkaOperationError | None]:
        """Create topics; returns topic -> None when created or already there, else why not."""
        if not topics:
            return {}
        futures = self.client.create_topics(topics, request_timeout=self.controller_timeout_s)
        return self._outcomes(futures, "creating topic", {KafkaError.TOPIC_ALREADY_EXISTS})

    def create_partitions(self, counts: Mapping[str, int]) -> dict[str, KafkaOperationError | None]:
        """Grow topics to the given partition counts; returns topic -> None or why not."""
        if not counts:
            return {}
        futures = self.client.create_partitions(
            [NewPartitions(t, n) for t, n in counts.items()], request_timeout=self.controller_timeout_s
        )
        return self._outcomes(futures, "adding partitions to", set())

    def _outcomes(
        self, futures: Mapping[str, Any], operation: str, fine: set[int]
    ) -> dict[str, KafkaOperationError | None]:
        """Per topic: None when its call succeeded (or failed with a code in ``fine``), else the error (with
        Kafka's code, so a refused authorization is told from a bad replication factor).

        A timed-out call or an unreachable cluster raises instead: the caller cannot go on without an answer.
        """
        outcome: dict[str, KafkaOperationError | None] = {}
        for name, future in futures.items():
            try:
                future.result(timeout=self.controller_timeout_s)
                outcome[name] = None
            except (KafkaException, FutureTimeout) as exc:
                err = error_of(exc)
                if isinstance(exc, FutureTimeout) or (err is not None and err.code() in UNREACHABLE):
                    raise self._wrap(f"{operation} {name}", exc) from None
                if err is not None and err.code() in fine:
                    outcome[name] = None
                else:
                    outcome[name] = wrap_kafka_error(self.alias, f"{operation} {name}", exc, None, self.principal)
        return outcome

    def alter_configs(self, resources: list[ConfigResource]) -> int:
        """Replace the whole config of each resource (the AlterConfigs API, deprecated by KIP-339 but the one
        MM2's ``use.incremental.alter.configs = never`` uses); returns how many resources were altered."""
        if not resources:
            return 0
        futures = self.client.alter_configs(resources, request_timeout=self.controller_timeout_s)
        for resource, future in futures.items():
            try:
                future.result(timeout=self.controller_timeout_s)
            except (KafkaException, FutureTimeout) as exc:
                raise self._wrap(f"altering configs of {resource.name}", exc) from None
        return len(resources)

    def incremental_alter_configs(self, resources: list[ConfigResource]) -> int:
        """Apply incremental config changes; returns how many resources were altered."""
        if not resources:
            return 0
        futures = self.client.incremental_alter_configs(resources, request_timeout=self.controller_timeout_s)
        for resource, future in futures.items():
            try:
                future.result(timeout=self.controller_timeout_s)
            except (KafkaException, FutureTimeout) as exc:
                err = error_of(exc)
                operation = f"altering configs of {resource.name} incrementally"
                if err is not None and err.code() in (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE):
                    raise UnsupportedByBrokerError(self.alias, operation, err.str()) from None
                raise self._wrap(operation, exc) from None
        return len(resources)

    def list_offsets(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool = False
    ) -> dict[tuple[str, int], int]:
        """Earliest or latest offset of each (topic, partition); latest is the LSO under read_committed
        (``which = "at <epoch ms>"``: see ``offsets_for_times``). A partition whose leader is away (an election, a
        stale leader epoch after the topic was re-created) is asked again, by a new client that reads the leaders
        afresh, with backoff until the call's timeout, as Java's AdminClient retries it (``ListOffsetsHandler``)."""
        deadline, backoff, attempts = time.monotonic() + self.timeout_s, client_backoff(self._settings), 0
        offsets, away = self._list_offsets(partitions, which, read_committed)
        while away and time.monotonic() + (pause := backoff.backoff(attempts)) < deadline:
            self._client, attempts = None, attempts + 1  # as in _wrap: a new client reads the leaders afresh
            time.sleep(pause)
            answered, away = self._list_offsets(sorted(away), which, read_committed)
            offsets.update(answered)
        for (topic, partition), exc in away.items():
            raise self._wrap(f"listing {which} offsets of {topic}-{partition}", exc) from None
        return offsets

    def offsets_for_times(self, partitions: list[tuple[str, int]], timestamp_ms: int) -> dict[tuple[str, int], int]:
        """The first offset at or after ``timestamp_ms`` of each partition (ListOffsets by timestamp, what
        ``KafkaConsumer.offsetsForTimes`` asks); -1 where no record is that late."""
        return self.list_offsets(partitions, f"at {timestamp_ms}")

    def list_offsets_of_available(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool = False
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
        """Like ``list_offsets``, but a partition whose leader is away (a killed node, an election, or no answer
        in time while other partitions answered) comes back with its reason instead of failing the call, so the
        other partitions can still be copied; the call still fails when no partition answered (then the
        cluster, not one leader, is the problem)."""
        offsets, away = self._list_offsets(partitions, which, read_committed)
        if away and not offsets:
            (topic, partition), exc = next(iter(away.items()))
            raise self._wrap(f"listing {which} offsets of {topic}-{partition}", exc) from None
        if away:
            self._client = None  # as in _wrap: the next listing looks the leaders up again
        return offsets, {tp: reason_of(exc) for tp, exc in away.items()}

    def _list_offsets(
        self, partitions: list[tuple[str, int]], which: str, read_committed: bool
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], BaseException]]:
        """The offsets that were answered, and the failure of each partition whose leader is away; any other
        failure is raised at once."""
        if not partitions:
            return {}, {}
        spec = (
            OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            if which == "earliest"
            else OffsetSpec.latest()  # type: ignore[no-untyped-call]
            if which == "latest"
            else OffsetSpec.for_timestamp(int(which.removeprefix("at ")))
        )
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        # librdkafka answers one ListOffsets call as a whole: a leader that does not answer (a node that died and
        # is not fenced yet, so metadata still names it) would time out every partition of the call. One call per
        # leader, all at once, lets the others answer at once.
        groups = self._by_leader(partitions) if len(partitions) > 1 else {}
        return self._ask_offsets(list(groups.values()) or [partitions], spec, level, which)

    def _ask_offsets(
        self, groups: list[list[tuple[str, int]]], spec: OffsetSpec, level: IsolationLevel, which: str
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], BaseException]]:
        """One ListOffsets call per group of partitions, all at once; the answers within one timeout."""
        futures = {}
        for group in groups:
            request = {TopicPartition(t, p): spec for t, p in group}
            futures.update(self.client.list_offsets(request, isolation_level=level, request_timeout=self.timeout_s))
        offsets: dict[tuple[str, int], int] = {}
        away: dict[tuple[str, int], BaseException] = {}
        deadline = time.monotonic() + self.timeout_s  # one bound for the calls, however many partitions wait
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result(timeout=max(0.0, deadline - time.monotonic())).offset
            except (KafkaException, FutureTimeout) as exc:
                if not (leader_away(exc) or _no_leader_known(exc)):
                    raise self._wrap(f"listing {which} offsets of {tp.topic}-{tp.partition}", exc) from None
                away[(tp.topic, tp.partition)] = exc
        return offsets, away

    def _by_leader(self, partitions: list[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        """``partitions`` grouped by the leader metadata names now (-1: none); empty if metadata failed."""
        try:
            metadata = self.client.list_topics(timeout=self.timeout_s)
        except KafkaException:
            return {}
        groups: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            described = metadata.topics.get(topic)
            leader = described.partitions[partition].leader if described and partition in described.partitions else -1
            groups.setdefault(leader, []).append((topic, partition))
        return groups

    def list_groups(self) -> list[str]:
        """Ids of all consumer groups of the cluster."""
        future = self.client.list_consumer_groups(request_timeout=self.timeout_s)
        try:
            result = future.result(timeout=self.timeout_s)
        except (KafkaException, FutureTimeout) as exc:
            raise self._wrap("listing consumer groups", exc) from None
        return sorted(g.group_id for g in result.valid)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets per (topic, partition); partitions without a commit are left out."""
        return {tp: offset for tp, (offset, _metadata) in self.committed(group).items()}

    def committed(self, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        """The group's committed (offset, commit metadata) per (topic, partition); missing metadata is ""."""
        futures = self.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
        )
        try:
            result = futures[group].result(timeout=self.timeout_s)
        except (KafkaException, FutureTimeout) as exc:
            raise self._wrap(f"fetching committed offsets of group {group}", exc) from None
        return {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in result.topic_partitions or []
            if tp.offset >= 0
        }

    def alter_group_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int], metadata: Mapping[tuple[str, int], str] | None = None
    ) -> None:
        """Commit ``offsets`` (with their commit ``metadata``, when given) for ``group``; the broker refuses
        this while the group has active members."""
        if not offsets:
            return
        meta = metadata or {}
        # Missing metadata is "" (what Kafka consumers normalise it to; the client takes no None here).
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o, meta.get((t, p), "")) for (t, p), o in offsets.items()]
        )
        futures = self.client.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        try:
            result = futures[group].result(timeout=self.timeout_s)
        except (KafkaException, FutureTimeout) as exc:
            raise self._wrap(f"committing offsets of group {group}", exc) from None
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise KafkaOperationError(
                self.alias,
                f"committing offsets of group {group}",
                f"{failed[0].topic}-{failed[0].partition}: {failed[0].error.str()}",
                code=error_name(failed[0].error),
                principal=self.principal,
            )


def _no_leader_known(exc: BaseException) -> bool:
    """librdkafka's ListOffsets fails a call whose partitions have no leader in metadata (its only replica
    is down) with _NOENT, "Failed to query partition leaders: No leaders found" (rdkafka_admin.c)."""
    err = error_of(exc)
    return err is not None and err.code() == KafkaError._NOENT

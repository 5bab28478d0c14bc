"""One cluster's connections for the batch path, over kafka-python: the :class:`~mm2py.wire.cluster.Cluster`
that the fetcher and the sender use on real brokers.

Why a protocol library and not confluent-kafka: librdkafka hands out records, never the record batches a Fetch
response carries, and cannot produce a batch as it is. kafka-python 3.0.12 can: its generated request classes
keep a partition's record set as plain bytes in both directions, and its network client does TLS, SASL PLAIN,
SCRAM-SHA-256/512 and OAUTHBEARER itself. Its 3.x network layer is being rewritten (a compatibility client over a
new connection manager), so the version is pinned and only this package imports it; everything crossing this
module is mm2py's own plain data, and the library's failures are :class:`~mm2py.wire.errors.WireError` s:

- a request to a broker that the last Metadata answer no longer lists (the library raises
  ``UnknownBrokerIdError``, which it counts as permanent) is a lost connection, NETWORK_EXCEPTION: the broker
  died or left, and a metadata refresh will name the new leaders;
- the library closes a connection whose request went unanswered for ``request_timeout_ms`` and fails every
  request on it (as Java's NetworkClient does): REQUEST_TIMED_OUT for the one that timed out, NETWORK_EXCEPTION
  for the rest;
- sending never waits for a connection: :meth:`KafkaConnection.ready` starts connecting and says whether a
  request would go out now.

Versions: Fetch v4 to v12 (:mod:`mm2py.wire.fetch_request`); Produce v3 (v2 record batches) to v8, the last one
before the flexible encoding; Metadata up to v9 (leader epochs from v7).
"""

from __future__ import annotations

import logging
import math
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
from kafka.future import Future  # type: ignore[import-untyped]
from kafka.net.compat import KafkaNetClient  # type: ignore[import-untyped]
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest  # type: ignore[import-untyped]
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest  # type: ignore[import-untyped]

from mm2py.client_settings import ClientSettings
from mm2py.errors import ReplicationError
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire import library_patches
from mm2py.wire.cluster import (
    ClusterMetadata,
    FetchAnswer,
    FetchPosition,
    PartitionLeader,
    ProducedPartition,
    ProducerIds,
    RecordSetPieces,
)
from mm2py.wire.connection_settings import wire_config
from mm2py.wire.errors import (
    NETWORK_EXCEPTION,
    REQUEST_TIMED_OUT,
    UNSUPPORTED_VERSION,
    WireError,
    broker_error,
    disconnected,
)
from mm2py.wire.fetch_request import FetchRequest, fetched
from mm2py.wire.login_failures import LoginFailures
from mm2py.wire.msk_iam import use_aws_msk_iam
from mm2py.wire.oauth_tokens import LibraryTokenProvider
from mm2py.wire.produce_request import ForwardingProduceRequest, produced

log = logging.getLogger(__name__)
_FIRST_BOOTSTRAP_SLICE_S = 1.0  # when bootstrap first looks for a refused login
library_patches.apply()

T = TypeVar("T")
# A multi-partition fetch response is far larger than the library's 1 MB default receive limit.
DEFAULT_MAX_RECEIVE_BYTES = 256 * 1024 * 1024
# The library pauses a connection at its in-flight limit and refuses requests meanwhile; the fetcher and the
# sender keep their own limits (one Fetch, five Produce requests per broker), plus Metadata now and then.
_LIBRARY_IN_FLIGHT_LIMIT = 16
# The library warns when one step of its event loop runs longer than this (its default: 0.1 s), a check for its own
# tight loops. On a busy worker (Spark tasks sharing two cores) a step of 0.11 s is common and nothing a user can act
# on; a step that blocks for seconds still warns.
_LIBRARY_SLOW_STEP_S = 5.0
_METADATA_MAX_VERSION = 9


def wire_error(exc: BaseException, node: int) -> WireError:
    """What a failed request means, from the library's exception (see the module docstring)."""
    if isinstance(exc, kafka_errors.RequestTimedOutError | kafka_errors.KafkaTimeoutError):
        return WireError(REQUEST_TIMED_OUT, f"node {node}: {exc}")
    if isinstance(exc, kafka_errors.UnknownBrokerIdError):
        return disconnected(node, "the cluster's metadata no longer lists this broker")
    if isinstance(exc, kafka_errors.KafkaConnectionError | kafka_errors.NodeNotReadyError | OSError):
        return disconnected(node, exc)
    if isinstance(exc, kafka_errors.IncompatibleBrokerVersion):
        return WireError(UNSUPPORTED_VERSION, f"node {node}: {exc}")
    if isinstance(exc, kafka_errors.BrokerResponseError):
        return WireError(type(exc), f"node {node}: {exc}")
    retriable = bool(getattr(exc, "retriable", False))
    return WireError(NETWORK_EXCEPTION if retriable else type(exc), f"node {node}: {type(exc).__name__}: {exc}")


class _Pending(Generic[T]):
    """A request in flight: the library's future, and how its response becomes mm2py's data."""

    def __init__(self, node: int, future: Any, decode: Callable[[Any], T | WireError]) -> None:
        self.node = node
        self._future = future
        self._decode = decode
        self.sent_at = time.monotonic()

    @property
    def done(self) -> bool:
        return bool(self._future.is_done)

    def result(self) -> T | WireError:
        if self._future.failed():
            return wire_error(self._future.exception, self.node)
        try:
            return self._decode(self._future.value)
        except (ValueError, IndexError, struct.error) as exc:
            # An answer that does not parse: what the library reports for its own decoding as a protocol error
            # on the connection, retried as a lost connection is (Fetch and Produce are decoded by mm2py).
            log.error("node %s: an answer that does not decode: %s", self.node, exc)
            return WireError(NETWORK_EXCEPTION, f"node {self.node}: an answer that does not decode: {exc}")


class KafkaConnection:
    """One cluster's connections (created on the executor; never pickled; one thread)."""

    def __init__(
        self, alias: str, settings: ClientSettings, *, max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES
    ) -> None:
        self.alias = alias
        config = wire_config(alias, settings)
        source = config.pop("sasl_oauth_token_source", None)
        if source is not None:
            config["sasl_oauth_token_provider"] = LibraryTokenProvider(source)
        if "sasl_aws_msk_iam_login" in config:
            use_aws_msk_iam(alias, config)
        self._mechanism = str(config.get("sasl_mechanism") or "SASL")
        config.setdefault("request_timeout_ms", 30_000)
        self.request_timeout_s = int(config["request_timeout_ms"]) / 1000
        self._client = KafkaNetClient(
            receive_message_max_bytes=max_receive_bytes,
            max_in_flight_requests_per_connection=_LIBRARY_IN_FLIGHT_LIMIT,
            slow_task_threshold_secs=_LIBRARY_SLOW_STEP_S,
            **config,
        )
        self._login = LoginFailures(alias, self._mechanism, self._client._manager)
        self._backoff = settings.backoff()

    @classmethod
    def connected(cls, alias: str, settings: ClientSettings, timeout_s: float) -> KafkaConnection:
        """A connection already bootstrapped (:meth:`bootstrap`); closed again if that fails."""
        connection = cls(alias, settings)
        try:
            connection.bootstrap(timeout_s)
        except BaseException:
            connection.close()
            raise
        return connection

    def close(self) -> None:
        self._client.close()

    def bootstrap(self, timeout_s: float) -> None:
        """Connect to a bootstrap broker and learn the brokers from a first Metadata answer."""
        deadline = time.monotonic() + timeout_s
        # In slices: the library retries a refused login or TLS handshake until the deadline, where Java's
        # clients give up at once. A slice's end abandons a connection still being set up, so slices double: one
        # that takes T seconds completes within a slice of at least T, at most about 2T after the first.
        slice_s = _FIRST_BOOTSTRAP_SLICE_S
        while True:
            try:
                remaining_s = max(0.0, deadline - time.monotonic())
                self._client.check_version(timeout_ms=int(min(slice_s, remaining_s) * 1000))
                break
            except kafka_errors.KafkaError as exc:
                self._login.raise_if_any()
                if time.monotonic() >= deadline:
                    raise ReplicationError(f"no broker of {self.alias} answers: {type(exc).__name__}: {exc}") from None
            slice_s *= 2
        # The first Metadata request goes to the least loaded broker, and again after the retry backoff while
        # waiting can fix the answer: a broker listed earlier may just have died, and another one answers (Java's
        # NetworkClient.DefaultMetadataUpdater: leastLoadedNode; a disconnect requests another update).
        attempts = 0
        while True:
            node = self._client.least_loaded_node(bootstrap_fallback=True)
            pending = self.metadata(node, ())
            while not pending.done and time.monotonic() < deadline:
                self.poll(min(0.1, max(0.0, deadline - time.monotonic())))
            answer = pending.result() if pending.done else WireError(REQUEST_TIMED_OUT, "first metadata request")
            if not isinstance(answer, WireError):
                return
            if not answer.retriable or time.monotonic() >= deadline:
                raise ReplicationError(f"no broker of {self.alias} answers: {answer}")
            self._login.raise_if_any()
            self.poll(min(self._backoff.backoff(attempts), max(0.0, deadline - time.monotonic())))
            attempts += 1

    def brokers(self) -> frozenset[int]:
        return frozenset(b.node_id for b in self._client.cluster.brokers() if isinstance(b.node_id, int))

    def ready(self, node: int) -> bool:
        try:
            return bool(self._client.ready(node))
        except kafka_errors.KafkaError:
            return False  # no longer listed, or its connection failed: the caller looks the leader up again

    def in_flight(self, node: int) -> int:
        return int(self._client.in_flight_request_count(node))

    def poll(self, timeout_s: float) -> None:
        """Serve the connections for up to ``timeout_s`` (less if something arrives). Rounded up to a whole
        millisecond, as the selector's own timeout is: rounded down, a wait of 0.8 ms would not wait at all, and
        one of 17.6 ms would wake its caller before the time it waits for, to spin or wait again."""
        self._client.poll(timeout_ms=math.ceil(max(0.0, timeout_s) * 1000))

    def _send(self, node: Any, request: Any, decode: Callable[[Any], T | WireError]) -> _Pending[T]:
        try:
            future = self._client.send(node, request)
        except kafka_errors.KafkaError as exc:  # e.g. UnknownBrokerIdError: raised, not returned, by the library
            future = Future().failure(exc)
        return _Pending(node, future, decode)

    # -- requests -------------------------------------------------------------------------------------------

    def metadata(self, node: int, topics: Iterable[str]) -> _Pending[ClusterMetadata]:
        topic_type = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(
            topics=[topic_type(name=t) for t in sorted(set(topics))],
            allow_auto_topic_creation=False,
            max_version=_METADATA_MAX_VERSION,
        )

        def decode(response: Any) -> ClusterMetadata:
            self._client.cluster.update_metadata(response)  # so the client can connect to every broker named
            partitions: dict[TopicPartition, PartitionLeader] = {}
            topic_errors: dict[str, WireError] = {}
            for topic in response.topics:
                error = broker_error(topic.error_code)
                if error is not None:
                    topic_errors[topic.name] = error
                    continue
                for p in topic.partitions:
                    epoch = getattr(p, "leader_epoch", -1)
                    partitions[(topic.name, p.partition_index)] = PartitionLeader(
                        p.leader_id, -1 if epoch is None else epoch, broker_error(p.error_code)
                    )
            return ClusterMetadata(frozenset(b.node_id for b in response.brokers), partitions, topic_errors)

        return self._send(node, request, decode)

    def fetch(
        self,
        node: int,
        positions: Sequence[FetchPosition],
        *,
        read_committed: bool,
        max_wait_ms: int,
        max_bytes: int,
        session: tuple[int, int] = (0, -1),
        forgotten: Sequence[TopicPartition] = (),
        min_bytes: int = 1,
    ) -> _Pending[FetchAnswer]:
        request = FetchRequest(
            positions,
            read_committed=read_committed,
            max_wait_ms=max_wait_ms,
            max_bytes=max_bytes,
            session=session,
            forgotten=forgotten,
            min_bytes=min_bytes,
        )
        return self._send(node, request, lambda response: fetched(node, response))

    def produce(
        self,
        node: int,
        record_sets: Mapping[TopicPartition, RecordSetPieces],
        *,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> _Pending[list[ProducedPartition]]:
        request = ForwardingProduceRequest(
            record_sets, acks=-1, timeout_ms=timeout_ms, transactional_id=transactional_id
        )
        return self._send(node, request, lambda response: produced(node, response))

    def init_producer_id(
        self,
        node: int,
        *,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = -1,
        expected: ProducerIds | None = None,
    ) -> _Pending[ProducerIds]:
        # The expected producer id and epoch are fields of version 3 (Kafka 2.5) and later: a broker that old would
        # drop them, which is why min_version says 3 when they are given.
        request = InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            producer_id=expected.producer_id if expected is not None else -1,
            producer_epoch=expected.epoch if expected is not None else -1,
            min_version=3 if expected is not None else 0,
            max_version=4,
        )

        def decode(response: Any) -> ProducerIds | WireError:
            error = broker_error(response.error_code, f"InitProducerId at node {node}")
            return error if error is not None else ProducerIds(response.producer_id, response.producer_epoch)

        return self._send(node, request, decode)

    # -- transactions (the Java producer's TransactionManager requests, at the versions of transaction protocol v1:
    # FindCoordinator with one key, AddPartitionsToTxn from the client up to v3, EndTxn up to v4; later versions
    # bump the epoch at every EndTxn, KIP-890, which the sender would then have to follow) --------------------

    def find_coordinator(self, node: int, transactional_id: str) -> _Pending[int]:
        request = FindCoordinatorRequest(key=transactional_id, key_type=1, max_version=3)

        def decode(response: Any) -> int | WireError:
            error = broker_error(response.error_code, f"FindCoordinator at node {node}")
            return error if error is not None else int(response.node_id)

        return self._send(node, request, decode)

    def add_partitions_to_txn(
        self, node: int, transactional_id: str, producer: ProducerIds, partitions: Sequence[TopicPartition]
    ) -> _Pending[dict[TopicPartition, WireError | None]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topic_type = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer.producer_id,
            v3_and_below_producer_epoch=producer.epoch,
            v3_and_below_topics=[topic_type(name=t, partitions=ps) for t, ps in by_topic.items()],
            max_version=3,
        )

        def decode(response: Any) -> dict[TopicPartition, WireError | None]:
            return {
                (topic.name, p.partition_index): broker_error(p.partition_error_code, f"AddPartitionsToTxn at {node}")
                for topic in response.results_by_topic_v3_and_below
                for p in topic.results_by_partition
            }

        return self._send(node, request, decode)

    def end_txn(self, node: int, transactional_id: str, producer: ProducerIds, *, commit: bool) -> _Pending[None]:
        request = EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            committed=commit,
            max_version=4,
        )
        return self._send(node, request, lambda response: broker_error(response.error_code, f"EndTxn at {node}"))

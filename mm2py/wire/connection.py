"""Raw Kafka requests for the batch copy path: metadata, multi-partition Fetch, InitProducerId, raw Produce.

Why a protocol library and not confluent-kafka: librdkafka hands out records, never the record batches a
Fetch response carries, and cannot produce a batch as it is. kafka-python 3.0.12 can: its generated
request classes keep a partition's record set as plain bytes in both directions, and its network client
does TLS, SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER itself. Its 3.x network layer is being rewritten
(a compatibility client over a new connection manager), so the version is pinned and this module (with
:mod:`mm2py.wire.produce_request`, which it uses) is the only one that imports it; everything it returns is
mm2py's own plain data. Errors come back as data (:class:`ErrorCode`: the Kafka error code, its name,
whether waiting can fix it) and the copier decides.

Versions: Fetch v4 (aborted transactions) to v12, the last one that names topics (later ones use topic ids);
Produce v3 (v2 record batches) to v8, the last one before the flexible encoding.

Threads: one :class:`WireClient` per cluster and per thread; it is not shared.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
import kafka.version  # type: ignore[import-untyped]
from kafka.future import Future  # type: ignore[import-untyped]
from kafka.net.compat import KafkaNetClient  # type: ignore[import-untyped]
from kafka.net.sasl.oauth import AbstractTokenProvider  # type: ignore[import-untyped]
from kafka.net.transport import KafkaTCPTransport  # type: ignore[import-untyped]
from kafka.protocol.consumer import FetchRequest, FetchResponse  # type: ignore[import-untyped]
from kafka.protocol.frame import KafkaBytes  # type: ignore[import-untyped]
from kafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]
from kafka.protocol.producer import InitProducerIdRequest  # type: ignore[import-untyped]

from mm2py.wire.connection_settings import TokenSource, wire_config
from mm2py.wire.produce_request import ForwardingProduceRequest, RecordSetPieces

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# A multi-partition fetch response is far larger than the library's 1 MB default receive limit.
DEFAULT_MAX_RECEIVE_BYTES = 256 * 1024 * 1024
_FETCH_VERSIONS = (4, 12)
_METADATA_MAX_VERSION = 9


# kafka-python 3.0.12 reads a plain TCP socket 4 KiB per recv() call (the chunk size is fixed), so a
# multi-megabyte Fetch response took thousands of calls, each a Python-level loop turn. Measured in one
# process copying 500k records of 1 KB: 18-22% of the copier's CPU. The transport's read is replaced by the
# same loop with a larger chunk, for exactly the pinned version (any other keeps the library's own); TLS
# transports keep theirs (a TLS record holds at most 16 KiB).
RECV_CHUNK_BYTES = 256 * 1024
_RECV_PATCHED_VERSION = "3.0.12"


def _sock_recv(self: Any) -> tuple[bytes, Exception | None]:
    """KafkaTCPTransport._sock_recv of kafka-python 3.0.12 with RECV_CHUNK_BYTES per call; errors as there."""
    received: list[bytes] = []
    error: Exception | None = None
    while True:
        try:
            data = self._sock.recv(RECV_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            break
        except BaseException as exc:
            log.exception("%s: error receiving network data, closing socket", self)
            error = kafka_errors.KafkaConnectionError(exc)
            break
        if not data:
            log.error("%s: socket disconnected", self)
            error = kafka_errors.KafkaConnectionError("socket disconnected")
            break
        received.append(data)
    return b"".join(received), error


_decode_fetch_response = FetchResponse.decode.__func__


def _decode_fetch_in_place(cls: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
    """FetchResponse.decode over a view of the received frame instead of a copy of it.

    The library hands decode its receive buffer (a bytearray) and decode takes ``read()`` of it: a slice and
    then ``bytes()`` of the slice, two copies of every fetched byte before the record sets are cut out (a third
    copy, which stays). A view of the unread rest is what decode makes of a ``bytes`` argument, and nothing
    reads or writes the buffer after decode."""
    if isinstance(data, KafkaBytes):
        data = memoryview(data)[data.tell() :]
    return _decode_fetch_response(cls, data, *args, **kwargs)


if kafka.version.__version__ == _RECV_PATCHED_VERSION:
    KafkaTCPTransport._sock_recv = _sock_recv
    FetchResponse.decode = classmethod(_decode_fetch_in_place)


@dataclass(frozen=True)
class ErrorCode:
    """A Kafka error code as data: 0 is never one of these."""

    code: int
    name: str
    retriable: bool

    def __str__(self) -> str:
        return f"{self.name} ({self.code})"


def error_for(code: int) -> ErrorCode | None:
    if code == 0:
        return None
    cls = kafka_errors.for_code(code)
    # The library marks a few errors that a new leader or a metadata refresh fixes as non-retriable.
    retriable = bool(cls.retriable) or code in (6, 3)  # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode(code, str(getattr(cls, "message", cls.__name__)), retriable)


TRANSPORT_ERROR = ErrorCode(-1, "NETWORK_EXCEPTION (no response)", True)


@dataclass(frozen=True)
class FetchPosition:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True)
class FetchedPartition:
    topic: str
    partition: int
    error: ErrorCode | None
    high_watermark: int
    last_stable_offset: int
    aborted_transactions: list[tuple[int, int]] | None  # (producer id, first offset); None: read_uncommitted
    records: bytes


@dataclass(frozen=True)
class ProducedPartition:
    topic: str
    partition: int
    error: ErrorCode | None
    base_offset: int


class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """The library's OAUTHBEARER hook, fed by mm2py's token source."""

    def __init__(self, source: TokenSource) -> None:
        super().__init__()
        self.source = source

    def token(self) -> str:
        return self.source.token()

    def extensions(self) -> dict[str, str]:
        return self.source.extensions()


class Pending:
    """A request in flight; :meth:`WireClient.wait` turns it into a result."""

    def __init__(self, future: Any, node: int, kind: str) -> None:
        self.future = future
        self.node = node
        self.kind = kind
        self.sent_at = time.monotonic()

    @property
    def done(self) -> bool:
        return bool(self.future.is_done)


class WireClient:
    """One cluster's connections (created on the executor; never pickled)."""

    def __init__(
        self, alias: str, settings: Mapping[str, str], *, max_receive_bytes: int = DEFAULT_MAX_RECEIVE_BYTES
    ) -> None:
        self.alias = alias
        config = wire_config(alias, settings)
        source = config.pop("sasl_oauth_token_source", None)
        if source is not None:
            config["sasl_oauth_token_provider"] = _TokenProvider(source)
        self.request_timeout_ms = int(config.get("request_timeout_ms", 30_000))
        self._client = KafkaNetClient(receive_message_max_bytes=max_receive_bytes, **config)
        self._leaders: dict[TopicPartition, int] = {}

    def close(self) -> None:
        self._client.close()

    def bootstrap(self, timeout_s: float) -> None:
        """Connect to a bootstrap broker and learn the brokers; raises on timeout."""
        self._client.check_version(timeout_ms=int(timeout_s * 1000))

    # -- metadata ------------------------------------------------------------------------------------------
    def refresh_leaders(self, topics: Iterable[str], timeout_s: float) -> dict[TopicPartition, ErrorCode]:
        """Learn each partition's leader; returns the partitions (or topics, as partition -1) in error."""
        topic_type = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(
            topics=[topic_type(name=t) for t in sorted(set(topics))],
            allow_auto_topic_creation=False,
            max_version=_METADATA_MAX_VERSION,
        )
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        response = self._call(node, request, timeout_s)
        self._client.cluster.update_metadata(response)  # so the client can connect to every broker named
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in response.topics:
            topic_error = error_for(topic.error_code)
            if topic_error is not None:
                errors[(topic.name, -1)] = topic_error
                continue
            for partition in topic.partitions:
                partition_error = error_for(partition.error_code)
                if partition_error is not None or partition.leader_id < 0:
                    errors[(topic.name, partition.partition_index)] = partition_error or error_for(5)  # type: ignore[assignment]
                else:
                    self._leaders[(topic.name, partition.partition_index)] = partition.leader_id
        return errors

    def leader(self, tp: TopicPartition) -> int | None:
        return self._leaders.get(tp)

    # -- requests ------------------------------------------------------------------------------------------
    def send_fetch(
        self,
        node: int,
        positions: Iterable[FetchPosition],
        *,
        read_committed: bool,
        max_wait_ms: int = 100,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> Pending:
        """One Fetch carrying every given partition (they must share ``node`` as leader)."""
        by_topic: dict[str, list[Any]] = {}
        partition_type = FetchRequest.FetchTopic.FetchPartition
        for p in positions:
            by_topic.setdefault(p.topic, []).append(
                partition_type(
                    partition=p.partition,
                    fetch_offset=p.offset,
                    partition_max_bytes=p.max_bytes,
                    log_start_offset=-1,
                    current_leader_epoch=-1,
                )
            )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=1 if read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
            min_version=_FETCH_VERSIONS[0],
            max_version=_FETCH_VERSIONS[1],
        )
        return self._send(node, request, "fetch")

    def fetch_result(self, pending: Pending, timeout_s: float) -> list[FetchedPartition] | ErrorCode:
        response = self.wait(pending, timeout_s)
        if isinstance(response, ErrorCode):
            return response
        top = error_for(getattr(response, "error_code", 0) or 0)
        if top is not None:
            return top
        result = []
        for topic in response.responses:
            for p in topic.partitions:
                aborted = None
                if p.aborted_transactions is not None:
                    aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
                result.append(
                    FetchedPartition(
                        topic.topic,
                        p.partition_index,
                        error_for(p.error_code),
                        p.high_watermark,
                        p.last_stable_offset,
                        aborted,
                        p.records or b"",
                    )
                )
        return result

    def init_producer_id(self, timeout_s: float) -> tuple[int, int] | ErrorCode:
        """A producer id and epoch for an idempotent (non-transactional) producer."""
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1, max_version=4
        )
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        try:
            response = self._call(node, request, timeout_s)
        except kafka_errors.KafkaError as exc:
            return ErrorCode(-1, f"{type(exc).__name__}: {exc}", True)
        error = error_for(response.error_code)
        return error if error is not None else (response.producer_id, response.producer_epoch)

    def send_produce(
        self, node: int, record_sets: Mapping[TopicPartition, RecordSetPieces], *, timeout_ms: int = 30_000
    ) -> Pending:
        """One Produce with acks=-1 carrying one record set per partition (all led by ``node``), each given as
        the pieces it is sent in (:mod:`mm2py.wire.produce_request`)."""
        return self._send(node, ForwardingProduceRequest(record_sets, acks=-1, timeout_ms=timeout_ms), "produce")

    def produce_result(self, pending: Pending, timeout_s: float) -> list[ProducedPartition] | ErrorCode:
        response = self.wait(pending, timeout_s)
        if isinstance(response, ErrorCode):
            return response
        return [
            ProducedPartition(topic.name, p.index, error_for(p.error_code), p.base_offset)
            for topic in response.responses
            for p in topic.partition_responses
        ]

    # -- plumbing ------------------------------------------------------------------------------------------
    def _send(self, node: int, request: Any, kind: str) -> Pending:
        try:
            self._client.await_ready(node, timeout_ms=self.request_timeout_ms)
        except kafka_errors.KafkaError as exc:
            return Pending(Future().failure(exc), node, kind)
        return Pending(self._client.send(node, request), node, kind)

    def poll(self, timeout_s: float) -> None:
        """Serve the connections (send queued bytes, read answers) for up to ``timeout_s``."""
        self._client.poll(timeout_ms=int(timeout_s * 1000))

    def wait(self, pending: Pending, timeout_s: float) -> Any:
        """The response, or an ErrorCode when the request failed in transport or timed out."""
        self._client.poll(timeout_ms=int(timeout_s * 1000), future=pending.future)
        if not pending.future.is_done:
            return ErrorCode(7, f"REQUEST_TIMED_OUT ({pending.kind} to node {pending.node})", True)
        if pending.future.failed():
            exc = pending.future.exception
            retriable = bool(getattr(exc, "retriable", True)) or isinstance(exc, kafka_errors.KafkaConnectionError)
            return ErrorCode(getattr(exc, "errno", -1) or -1, f"{type(exc).__name__}: {exc}", retriable)
        return pending.future.value

    def _call(self, node: int, request: Any, timeout_s: float) -> Any:
        if node is None:
            raise kafka_errors.NoBrokersAvailable(f"no broker of {self.alias} is reachable")
        response = self.wait(self._send(node, request, type(request).__name__), timeout_s)
        if isinstance(response, ErrorCode):
            raise kafka_errors.KafkaError(str(response))
        return response

"""The fetch side of a batch copy task (executor side): a thread that fetches every range's partition and hands
the batches to send to the task's thread, one fetch answer at a time.

Why a thread: fetching from the source and producing to the target overlap, so the copy is bounded by the slower
of the two and not by their sum. The hand-over is a queue of at most ``QUEUED_FETCHES`` answers, which bounds the
memory a task holds when the target is slower than the source.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mm2py.client_settings import COPY_FETCH_WAIT_MS, ClientSettings
from mm2py.executor.contract import CopySpec
from mm2py.executor.throttle import Throttle
from mm2py.wire.cluster import FetchedPartition
from mm2py.wire.connection import KafkaConnection
from mm2py.wire.fetcher import DEFAULT_PARTITION_BYTES, Fetcher, FetcherSettings, FetchPartition
from mm2py.wire.forwarding import ForwardingError, batches_to_send
from mm2py.wire.partition_queue import ProducerBatch
from mm2py.wire.sender import batch_timestamps

if TYPE_CHECKING:
    from mm2py.executor.batch_results import BatchRange

QUEUED_FETCHES = 2  # fetch answers waiting for the sender (each up to the fetch's max bytes): bounds memory
# A following task's partitions are quiet most of the time: its fetches wait as long as Kafka's consumers wait by
# default (fetch.max.wait.ms, 500 ms) before the broker answers with nothing. Records that arrive are answered at
# once (min_bytes 1), so the longer wait costs no latency, only fewer idle answers to decode. A task copying
# ranges waits COPY_FETCH_WAIT_MS, as the record path does. While records flow, a following task's next fetch
# waits for mm2py.continuous.fetch.min.interval.ms after the last one (docs/performance.md: at 1,000 records/s over
# 800 partitions, answers of two records each cost most of the task's CPU).
FOLLOW_FETCH_WAIT_MS = 500
Fetched = list[tuple["BatchRange", list[ProducerBatch], int]]  # one answer's batches, and the position after them


def fetcher_settings(
    consumer: ClientSettings,
    *,
    read_committed: bool,
    following: bool,
    stall_timeout_s: float,
    min_interval_s: float = 0.0,
) -> FetcherSettings:
    """The source consumer's fetch keys as the Java consumer sends them in every Fetch (``FetchConfig``:
    ``fetch.max.wait.ms``, ``fetch.min.bytes``, ``fetch.max.bytes``); a key the user left unset keeps mm2py's
    default (the wait above, one byte, 64 MB); fetches to a broker go ``min_interval_s`` apart
    (``CopySpec.fetch_min_interval_s``)."""
    backoff = consumer.backoff()  # the source consumer's retry.backoff.ms keys
    default_wait = FOLLOW_FETCH_WAIT_MS if following else COPY_FETCH_WAIT_MS
    return FetcherSettings(
        read_committed,
        max_wait_ms=default_wait if consumer.fetch_max_wait_ms is None else consumer.fetch_max_wait_ms,
        min_bytes=FetcherSettings.min_bytes if consumer.fetch_min_bytes is None else consumer.fetch_min_bytes,
        max_bytes=FetcherSettings.max_bytes if consumer.fetch_max_bytes is None else consumer.fetch_max_bytes,
        # A following task waits for a partition's leader as long as it follows: a stall is not a failure.
        stall_timeout_s=float("inf") if following else stall_timeout_s,
        retry_backoff_s=backoff.initial_s,
        retry_backoff_max_s=backoff.max_s,
        min_interval_s=min_interval_s,
    )


def partition_fetch_bytes(consumer: ClientSettings) -> int:
    """What one partition of a Fetch may carry: ``max.partition.fetch.bytes`` (``FetchConfig.fetchSize``), or
    mm2py's 4 MB; a first batch larger than that still comes whole (KIP-74), as to the Java consumer."""
    wanted = consumer.max_partition_fetch_bytes
    return DEFAULT_PARTITION_BYTES if wanted is None else wanted


class FetchThread:
    """Fetches ``ranges`` from ``spec.source`` until each is done or stopped, or ``stop`` is set; a following
    task's ranges are never done (their ends lie beyond any offset), so it fetches until stopped."""

    def __init__(
        self,
        spec: CopySpec,
        ranges: dict[tuple[str, int], BatchRange],
        *,
        read_committed: bool,
        max_batch_bytes: int,
        measure_lock: threading.Lock,
        throttle: Throttle | None = None,
    ) -> None:
        self.spec = spec
        self.ranges = ranges
        self.read_committed = read_committed
        self.max_batch_bytes = max_batch_bytes
        self.measure_lock = measure_lock  # the task's thread swaps measurers while it reports
        self.throttle = throttle or Throttle(0)  # the task's share of the flow's throughput limit
        self.inbox: queue.Queue[Fetched | BaseException | None] = queue.Queue(QUEUED_FETCHES)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mm2py-batch-fetch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout_s: float) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=timeout_s)

    def _run(self) -> None:
        source: KafkaConnection | None = None
        fetcher: Fetcher | None = None
        try:
            source = KafkaConnection(self.spec.source, self.spec.consumer_connection)
            source.bootstrap(self.spec.stall_timeout_s)
            consumer = self.spec.consumer_connection
            settings = fetcher_settings(
                consumer,
                read_committed=self.read_committed,
                following=self.spec.following,
                stall_timeout_s=self.spec.stall_timeout_s,
                min_interval_s=self.spec.fetch_min_interval_s,
            )
            for r in self.ranges.values():
                r.fetch.fetch_bytes = self.throttle.fetch_bytes(partition_fetch_bytes(consumer))
            fetcher = Fetcher(source, [r.fetch for r in self.ranges.values()], settings)
            # A step waits as long as a quiet fetch may (an answer with records ends the wait at once).
            while not self.stop.is_set() and fetcher.any_active():
                self._forward(fetcher.step(settings.max_wait_ms / 1000))
            self._put(None)
        except BaseException as exc:  # handed to the task's thread, which raises it
            self._put(exc)
        finally:
            if fetcher is not None:
                fetcher.close()  # the broker's fetch sessions, so that they do not wait for eviction
            if source is not None:
                source.close()

    def _forward(self, answered: list[tuple[FetchPartition, FetchedPartition]]) -> None:
        """Turn fetched record sets into batches for the sender: one hand-over per fetch answer, or, under a
        throughput limit, one per partition, each once the limit lets its bytes through."""
        fetched: Fetched = []
        now = time.time() * 1000
        for fetch, part in answered:
            state = self.ranges[fetch.key]
            state.source_end = fetch.source_end
            aborted = part.aborted_transactions if self.read_committed else None
            try:
                outgoing = batches_to_send(fetch, part.records, aborted, self.max_batch_bytes, self.spec.target)
            except ForwardingError as exc:
                fetch.failure = exc.error
                continue
            if outgoing is None:
                continue
            with self.measure_lock:  # MM2 measures record age when the task reads the records
                for item in outgoing:
                    count, low, high, total, last = batch_timestamps(item.batch)
                    state.queue.measurer.read(now, count, low, high, total, last, item.batch.size)
            if self.throttle.limited:
                self._hold(sum(item.batch.size for item in outgoing))
                self._put([(state, outgoing, fetch.position)])
            else:
                fetched.append((state, outgoing, fetch.position))
        if fetched:
            self._put(fetched)

    def _hold(self, nbytes: int) -> None:
        """Wait until the throughput limit lets ``nbytes`` more through (a stop ends the wait); the wait is the
        task's, split over its partitions in their measurements."""
        waited = self.throttle.hold(nbytes, sleep=self.stop.wait)
        if waited > 0:
            share = waited * 1000 / max(1, len(self.ranges))
            with self.measure_lock:
                for state in self.ranges.values():
                    state.queue.measurer.throttled_ms += share

    def _put(self, item: Fetched | BaseException | None) -> None:
        if isinstance(item, list):
            # linger.ms and the delivery timeout count from the hand-over (after any throttling), as a Java
            # producer's batch is created when MM2's task hands it the records it polled, not when the sender
            # next looks at its queue
            handed_at = time.monotonic()
            for _state, outgoing, _position in item:
                for batch in outgoing:
                    batch.created = handed_at
        while not self.stop.is_set():
            try:
                self.inbox.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def take(
        self, on_batches: Callable[[BatchRange, list[ProducerBatch], int], None], *, block: bool, wait_s: float = 0.1
    ) -> bool:
        """Hand what was fetched to ``on_batches``, waiting up to ``wait_s`` for it if ``block``; False once the
        fetcher is done (it raises what failed it)."""
        while True:
            try:
                item = self.inbox.get(block=block, timeout=wait_s if block else None)
            except queue.Empty:
                return True
            if item is None:
                return False
            if isinstance(item, BaseException):
                raise item
            for state, outgoing, position in item:
                on_batches(state, outgoing, position)
            block = False

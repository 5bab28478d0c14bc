"""One transactional.id's transactions on the target: Kafka's Java TransactionManager, for one producer.

Exactly-once on the batch path (``<target>.exactly.once.source.support = enabled``) writes a range's forwarded
batches, its progress record and (when the syncs topic is on the target) its offset syncs in one transaction:
a read_committed consumer of the target sees all of them or none. This module speaks to the transaction
coordinator; :class:`~mm2py.wire.sender.Sender` produces the batches with the transactional bit and id.

The rules, from ``clients/producer/internals/TransactionManager`` (its request handlers):

- the coordinator is found with FindCoordinator(TRANSACTION) and looked up again on NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE and on a lost connection or timed-out request (``TxnRequestHandler.onComplete``);
- InitProducerId with the transactional.id and ``transaction.timeout.ms`` fences every earlier epoch of that id,
  aborting its open transaction: a restarted task, or another host taking the flow over, can never let its
  predecessor commit after it (``InitProducerIdHandler``). Given the producer id and epoch it expects (KIP-360,
  what the Java producer sends when it bumps its own epoch), the coordinator answers PRODUCER_FENCED when
  another producer initialized the id since: the driver's check that nobody took its ids over between jobs;
- every partition a transaction writes is added first, AddPartitionsToTxn (``AddPartitionsToTxnHandler``);
  CONCURRENT_TRANSACTIONS (the previous transaction is still completing) and other retriable errors are retried
  after the retry backoff, OPERATION_NOT_ATTEMPTED too; CONCURRENT_TRANSACTIONS for the first partitions of a
  transaction after 20 ms (``ADD_PARTITIONS_RETRY_BACKOFF_MS``: the previous EndTxn is usually just finishing);
- EndTxn commits or aborts (``EndTxnHandler``); retriable errors are retried;
- INVALID_PRODUCER_EPOCH and PRODUCER_FENCED mean another producer with this id took over: fenced, final;
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE and the rest are final too.

Each call waits (polling the cluster) until it is answered or its deadline passes; a copy task calls them only
between sending batches. Transaction protocol v1: the epoch stays the same across transactions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from mm2py.backoff import RETRY_BACKOFF_S
from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.cluster import Cluster, Pending, ProducerIds
from mm2py.wire.errors import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_NOT_AVAILABLE,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    NETWORK_EXCEPTION,
    NOT_COORDINATOR,
    PRODUCER_FENCED,
    REQUEST_TIMED_OUT,
    WireError,
)

T = TypeVar("T")
_FIND_AGAIN = (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)
_LOOK_UP_AGAIN = (*_FIND_AGAIN, NETWORK_EXCEPTION, REQUEST_TIMED_OUT)
FENCED = (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED)  # another producer initialized the id since
ADD_PARTITIONS_RETRY_BACKOFF_S = 0.02  # TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS


class TransactionError(Exception):
    """A transaction step that did not succeed: ``fenced`` when another producer with the id took over."""

    def __init__(self, error: WireError, *, fenced: bool = False) -> None:
        self.error = error
        self.fenced = fenced
        super().__init__(str(error))

    @property
    def retriable(self) -> bool:
        return not self.fenced and self.error.retriable


class TransactionManager:
    """The transactions of ``transactional_id`` on ``cluster`` (the sender's cluster, from the sender's thread)."""

    def __init__(
        self,
        cluster: Cluster,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = 60_000,
        retry_backoff_s: float = RETRY_BACKOFF_S,  # constant, as Java's TransactionManager.retryBackoffMs
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_s = retry_backoff_s
        self.clock = clock
        self.coordinator: int | None = None
        self.producer: ProducerIds | None = None
        self.partitions: set[TopicPartition] = set()  # in the open transaction
        self.commits = 0
        self.aborts = 0

    @property
    def in_transaction(self) -> bool:
        return bool(self.partitions)

    def initialize(self, timeout_s: float, expected: ProducerIds | None = None) -> ProducerIds:
        """InitProducerId at the coordinator: the producer id and epoch, every predecessor fenced; with
        ``expected``, fenced itself (TransactionError, ``fenced``) if the id's epoch is no longer that one."""
        answer = self._with_coordinator(
            lambda node: self.cluster.init_producer_id(
                node,
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                expected=expected,
            ),
            "InitProducerId",
            timeout_s,
        )
        self.producer = answer
        self.partitions = set()
        return answer

    def adopt(self, producer: ProducerIds) -> None:
        """Write with an epoch another client (the driver) initialized for this id, without InitProducerId."""
        self.producer = producer
        self.partitions = set()

    def abort_open(self, producer: ProducerIds, timeout_s: float) -> None:
        """EndTxn(abort) for ``producer``'s transaction, whether this client opened it or a task that died did;
        nothing open (INVALID_TXN_STATE) is fine. Needed before an InitProducerId that expects ``producer``: the
        coordinator answers one that finds a transaction open by fencing the epoch, which it would then refuse."""
        try:
            self._with_coordinator(
                lambda node: self.cluster.end_txn(node, self.transactional_id, producer, commit=False),
                "EndTxn",
                timeout_s,
            )
        except TransactionError as exc:
            if exc.error.kind is not INVALID_TXN_STATE:
                raise
        self.partitions = set()

    def add(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """AddPartitionsToTxn for those of ``partitions`` not in the open transaction yet (it starts one)."""
        new = sorted(set(partitions) - self.partitions)
        if not new:
            return
        producer = self._producer()
        while new:
            asked = tuple(new)

            def request(
                node: int, asked: tuple[TopicPartition, ...] = asked
            ) -> Pending[dict[TopicPartition, WireError | None]]:
                return self.cluster.add_partitions_to_txn(node, self.transactional_id, producer, asked)

            answer = self._with_coordinator(request, "AddPartitionsToTxn", timeout_s)
            failed = {tp: error for tp, error in answer.items() if error is not None}
            fatal = [error for error in failed.values() if not error.retriable and error.kind not in _FIND_AGAIN]
            if fatal:
                raise TransactionError(fatal[0], fenced=fatal[0].kind in FENCED)
            first = not self.partitions
            self.partitions.update(tp for tp in new if tp not in failed)
            new = sorted(failed)
            if new:  # CONCURRENT_TRANSACTIONS, OPERATION_NOT_ATTEMPTED, ...
                concurrent = any(error.kind is CONCURRENT_TRANSACTIONS for error in failed.values())
                self._sleep(ADD_PARTITIONS_RETRY_BACKOFF_S if first and concurrent else self.retry_backoff_s)

    def commit(self, timeout_s: float) -> None:
        self._end(True, timeout_s)
        self.commits += 1

    def abort(self, timeout_s: float) -> None:
        self._end(False, timeout_s)
        self.aborts += 1

    def _end(self, commit: bool, timeout_s: float) -> None:
        if not self.partitions:
            return  # nothing was added: there is no transaction to end
        producer = self._producer()
        self._with_coordinator(
            lambda node: self.cluster.end_txn(node, self.transactional_id, producer, commit=commit),
            "EndTxn",
            timeout_s,
        )
        self.partitions = set()

    def _producer(self) -> ProducerIds:
        if self.producer is None:
            raise TransactionError(WireError(INVALID_PRODUCER_EPOCH, "the transactional producer is not initialized"))
        return self.producer

    # -- one request, found again and retried as the Java handlers do ---------------------------------------

    def _with_coordinator(self, send: Callable[[int], Pending[T]], what: str, timeout_s: float) -> T:
        deadline = self.clock() + timeout_s
        last = WireError(REQUEST_TIMED_OUT, f"{what} for {self.transactional_id} not answered within {timeout_s:.0f} s")
        while self.clock() < deadline:
            node = self.coordinator if self.coordinator is not None else self._find(deadline)
            if node is None:
                continue
            answer = self._wait(send(node), deadline)
            if not isinstance(answer, WireError):
                return answer
            last = answer
            if answer.kind in FENCED:
                raise TransactionError(answer, fenced=True)
            if not answer.retriable and answer.kind not in _FIND_AGAIN:
                raise TransactionError(answer)
            if answer.kind in _LOOK_UP_AGAIN:
                self.coordinator = None  # it moved, or its connection was lost: look it up again
            self._sleep(self.retry_backoff_s)  # CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, ...
        raise TransactionError(last)

    def _find(self, deadline: float) -> int | None:
        """FindCoordinator(TRANSACTION) from any broker; None (after the backoff) if none answered."""
        for node in sorted(self.cluster.brokers()):
            if not self.cluster.ready(node):
                continue
            answer = self._wait(self.cluster.find_coordinator(node, self.transactional_id), deadline)
            if isinstance(answer, int):
                self.coordinator = answer
                return answer
            if isinstance(answer, WireError) and not answer.retriable:
                raise TransactionError(answer)
        self._sleep(self.retry_backoff_s)
        return None

    def _wait(self, pending: Pending[T], deadline: float) -> T | WireError:
        while not pending.done:
            if self.clock() >= deadline:
                return WireError(REQUEST_TIMED_OUT, f"no answer from node {pending.node}")
            self.cluster.poll(min(0.05, max(0.0, deadline - self.clock())))
        return pending.result()

    def _sleep(self, seconds: float) -> None:
        """The retry backoff, spent serving the connections (so a virtual clock moves too)."""
        until = self.clock() + seconds
        while self.clock() < until:
            self.cluster.poll(until - self.clock())

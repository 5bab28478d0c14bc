"""The batch path's sender against a fake cluster of three brokers (tests/harness/fake_cluster.py), in virtual
time: every record arrives once and in order through each failure a cluster goes through, and each of the Java
producer's rules that it follows changes the outcome when it is left out."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable

import pytest

from mm2py.mirror.topic_partition import TopicPartition
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.batches import RecordBatch
from mm2py.wire.cluster import ProducerIds
from mm2py.wire.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH,
    MESSAGE_TOO_LARGE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    UNKNOWN_PRODUCER_ID,
    WireError,
)
from mm2py.wire.partition_queue import PartitionQueue, ProducerBatch, State
from mm2py.wire.sender import Sender, SenderSettings
from tests.harness.fake_cluster import FakeCluster, written

TOPIC = "orders"
SETTINGS = SenderSettings("a->b", "b", request_timeout_s=30.0, delivery_timeout_s=120.0)


def source_batches(count: int, size: int = 10, first: int = 0) -> list[ProducerBatch]:
    """``count`` batches of ``size`` records whose values are their source offsets."""
    out = []
    for i in range(count):
        start = first + i * size
        records = [Record(start + j, 1_000 + start + j, b"k", str(start + j).encode()) for j in range(size)]
        out.append(
            ProducerBatch(RecordBatch(memoryview(encode_batch(records, base_offset=start))), range(start, start + size))
        )
    return out


def make(
    cluster: FakeCluster, partitions: int = 2, batches: int = 30, settings: SenderSettings = SETTINGS
) -> tuple[Sender, list[PartitionQueue]]:
    if not any(k[0] == TOPIC for k in cluster.partitions):
        cluster.create(TOPIC, partitions)
    queues = [PartitionQueue(TOPIC, p, f"partition={p}") for p in range(partitions)]
    sender = Sender(cluster, queues, settings, ProducerIds(7, 0), clock=cluster.clock)
    for q in queues:
        sender.add(q.key, source_batches(batches))
    return sender, queues


def run(sender: Sender, until: Callable[[], bool] | None = None, steps: int = 200_000) -> None:
    for _ in range(steps):
        if not sender.busy() or (until is not None and until()):
            return
        sender.step()
    raise AssertionError("the sender did not finish")


def exactly_once_in_order(cluster: FakeCluster, key: TopicPartition, records: int) -> None:
    offsets = written(cluster, key)
    duplicates = [o for o, n in Counter(offsets).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} records written twice, e.g. {duplicates[:5]}"
    assert offsets == list(range(records)), f"lost or reordered: {len(offsets)} of {records}"


def test_every_batch_arrives_once_with_up_to_five_requests_in_flight_per_leader() -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=2, batches=40)
    most = 0
    while sender.busy():
        sender.step()
        most = max(most, *(len(r) for r in sender.requests.values()), 0)
    assert most == 5
    for q in queues:
        exactly_once_in_order(cluster, q.key, 400)
        assert q.acked_records == 400 and q.acked_upstream == 399 and q.failure is None


def test_the_produce_timeout_is_the_request_timeout() -> None:
    cluster = FakeCluster()
    seen: list[int] = []
    produce = cluster.produce

    def spy(node, record_sets, *, timeout_ms, transactional_id=None):  # type: ignore[no-untyped-def]
        seen.append(timeout_ms)
        return produce(node, record_sets, timeout_ms=timeout_ms)

    cluster.produce = spy  # type: ignore[method-assign]
    sender, _queues = make(
        cluster, partitions=1, batches=3, settings=SenderSettings("a->b", "b", request_timeout_s=12.5)
    )
    run(sender)
    assert set(seen) == {12_500}


@pytest.mark.parametrize("keep_unacknowledged", [True, False], ids=["followers-had-it", "lost-with-the-leader"])
def test_a_leader_killed_mid_copy_loses_nothing_and_writes_nothing_twice(keep_unacknowledged: bool) -> None:
    cluster = FakeCluster()
    cluster.keep_unacknowledged = keep_unacknowledged
    sender, queues = make(cluster, partitions=3, batches=200)
    leader = cluster.partitions[(TOPIC, 0)].leader
    run(sender, until=lambda: queues[0].acked_records >= 600)
    cluster.kill(leader)
    run(sender)
    for q in queues:
        assert q.failure is None
        exactly_once_in_order(cluster, q.key, 2_000)
    assert cluster.partitions[(TOPIC, 0)].leader != leader


def test_a_new_producer_s_first_batch_goes_alone_until_the_broker_acknowledged_it() -> None:
    """A broker takes a producer it has no state for at any sequence. Seen on real Kafka (a rolling SIGTERM of the
    target): a leader not ready yet refused a new task's first two batches (NOT_LEADER_OR_FOLLOWER) and wrote the
    next two, pipelined behind them, where the first belonged; the first, resent, then met OUT_OF_ORDER_SEQUENCE_NUMBER
    until delivery.timeout.ms, and the range was copied again: records duplicated and out of order."""
    cluster = FakeCluster()
    refused = iter(range(2))  # the first two produce requests find a leader that is not ready yet
    cluster.inject = lambda kind, node, key: (
        WireError(NOT_LEADER_OR_FOLLOWER) if kind == "produce" and next(refused, None) is not None else None
    )
    sender, queues = make(cluster, partitions=1, batches=30)
    run(sender)
    assert queues[0].failure is None
    exactly_once_in_order(cluster, queues[0].key, 300)
    firsts = [(t, n) for t, kind, n, _k in cluster.requests if kind == "produce"][:3]
    assert firsts[1][0] > firsts[0][0] and firsts[2][0] > firsts[1][0], "the first batch went alone, and again"


def test_a_partition_s_batches_never_go_to_two_brokers_at_once() -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=1, batches=0)
    q = queues[0]
    sender.add(q.key, source_batches(1))
    run(sender)  # one acknowledged: from now on the partition's batches are pipelined
    sender.add(q.key, source_batches(2, first=10))
    run(sender, until=lambda: q.in_flight == 2)  # both in flight at the leader
    old = cluster.partitions[q.key].leader
    new = next(n for n in cluster.partitions[q.key].replicas if n != old)
    cluster.stop(old)  # they stay unanswered until the request timeout
    cluster.elect(q.key, new)
    sender.leaders.request_update()  # as any other partition's NOT_LEADER_OR_FOLLOWER would: the move is known
    for _ in range(100):
        if sender.leaders.leader(q.key) == new:
            break
        sender.step()
    assert sender.leaders.leader(q.key) == new and q.in_flight == 2
    sender.add(q.key, source_batches(19, first=30))
    run(sender)
    exactly_once_in_order(cluster, q.key, 220)
    to_old = [t for t, kind, node, _keys in cluster.requests if kind == "produce" and node == old]
    to_new = [t for t, kind, node, _keys in cluster.requests if kind == "produce" and node == new]
    assert to_old and to_new
    # nothing went to the new leader until the old leader's requests had timed out (request timeout 30 s)
    assert min(to_new) >= max(to_old) + SETTINGS.request_timeout_s


def test_a_stopped_leader_times_out_and_the_copy_goes_on_at_the_new_leader() -> None:
    cluster = FakeCluster()
    cluster.keep_unacknowledged = True  # the followers fetched what the stopped leader appended
    sender, queues = make(cluster, partitions=2, batches=200)
    leader = cluster.partitions[(TOPIC, 1)].leader
    run(sender, until=lambda: queues[1].acked_records >= 500)
    cluster.stop(leader)
    cluster.at(cluster.now + 60.0, lambda: cluster.resume(leader))
    run(sender)
    for q in queues:
        assert q.failure is None
        exactly_once_in_order(cluster, q.key, 2_000)


def test_preferred_leader_elections_every_few_seconds_write_nothing_twice() -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=3, batches=300)
    for i in range(1, 40):
        for p in range(3):
            key = (TOPIC, p)
            cluster.at(i * 0.05, lambda key=key, i=i: cluster.elect(key, cluster.partitions[key].replicas[i % 3]))
    run(sender)
    for q in queues:
        assert q.failure is None
        exactly_once_in_order(cluster, q.key, 3_000)


def test_a_retriable_error_resends_the_partition_s_batches_in_order_with_the_same_sequences() -> None:
    cluster = FakeCluster()
    failed = []

    def once(kind: str, node: int, key: TopicPartition) -> WireError | None:
        if kind == "produce" and len(cluster.produced_batches) == 7 and not failed:
            failed.append(key)
            return WireError(NOT_ENOUGH_REPLICAS)
        return None

    cluster.inject = once
    sender, queues = make(cluster, partitions=1, batches=30)
    run(sender)
    exactly_once_in_order(cluster, queues[0].key, 300)
    assert failed and sender.epoch_bumps == 0


def test_a_batch_appended_without_its_acknowledgement_is_answered_with_its_offset_when_resent() -> None:
    cluster = FakeCluster()
    late: list[TopicPartition] = []

    def after(node: int, key: TopicPartition) -> WireError | None:
        if len(late) < 3 and len(cluster.produced_batches) % 5 == 2:
            late.append(key)
            return WireError(NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return None

    cluster.after_append = after
    sender, queues = make(cluster, partitions=2, batches=40)
    run(sender)
    assert len(late) == 3
    for q in queues:
        exactly_once_in_order(cluster, q.key, 400)


def test_duplicate_sequence_number_counts_as_acknowledged() -> None:
    cluster = FakeCluster()
    answered = []

    def after(node: int, key: TopicPartition) -> WireError | None:
        if not answered and len(cluster.produced_batches) == 4:
            answered.append(key)
            return WireError(DUPLICATE_SEQUENCE_NUMBER)  # written, and the broker no longer knows where
        return None

    cluster.after_append = after
    sender, queues = make(cluster, partitions=1, batches=10)
    run(sender)
    q = queues[0]
    exactly_once_in_order(cluster, q.key, 100)
    assert q.failure is None and q.acked_records == 100 and q.acked_upstream == 99
    # the offset syncs leave out the batch whose target offsets are unknown
    assert sum(length for _u, _d, length in q.runs) == 90


def test_a_gap_in_the_sequence_bumps_the_epoch_and_renumbers_from_zero() -> None:
    cluster = FakeCluster()
    gaps = []

    def gap(kind: str, node: int, key: TopicPartition) -> WireError | None:
        # the broker lost the producer's state: the next batch after the acknowledged ones is out of order
        if kind == "produce" and len(cluster.produced_batches) == 5 and not gaps:
            gaps.append(key)
            return WireError(OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    cluster.inject = gap
    sender, queues = make(cluster, partitions=1, batches=30, settings=SenderSettings("a->b", "b", max_in_flight=1))
    run(sender)
    assert sender.epoch_bumps == 1 and sender.producer == ProducerIds(7, 1)
    exactly_once_in_order(cluster, queues[0].key, 300)
    epochs = [(epoch, seq) for _k, _pid, epoch, seq in cluster.produced_batches]
    assert (1, 0) in epochs and all(seq >= 0 for _e, seq in epochs)


def test_an_out_of_order_answer_after_an_earlier_failure_is_only_resent() -> None:
    """Only the first failed batch is the cause; the ones after it fail with OUT_OF_ORDER_SEQUENCE_NUMBER as its
    echo and must not bump the epoch (TransactionManager.canRetry: not the next sequence)."""
    cluster = FakeCluster()
    first = []

    def fail_one(kind: str, node: int, key: TopicPartition) -> WireError | None:
        if kind == "produce" and len(cluster.produced_batches) == 3 and not first:
            first.append(key)
            return WireError(NOT_ENOUGH_REPLICAS)
        return None

    cluster.inject = fail_one
    sender, queues = make(cluster, partitions=1, batches=40)
    run(sender)
    assert sender.epoch_bumps == 0
    exactly_once_in_order(cluster, queues[0].key, 400)


@pytest.mark.parametrize("error", [UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH])
def test_a_broker_without_our_producer_state_gets_a_bumped_epoch(error: type) -> None:
    cluster = FakeCluster()
    hits = []

    def lost(kind: str, node: int, key: TopicPartition) -> WireError | None:
        if kind == "produce" and len(cluster.produced_batches) == 6 and not hits:
            hits.append(key)
            return WireError(error)
        return None

    cluster.inject = lost
    sender, queues = make(cluster, partitions=1, batches=30, settings=SenderSettings("a->b", "b", max_in_flight=1))
    run(sender)
    assert sender.epoch_bumps == 1
    assert queues[0].failure is None
    exactly_once_in_order(cluster, queues[0].key, 300)


def test_a_partition_without_a_leader_past_the_delivery_timeout_stops_alone() -> None:
    cluster = FakeCluster()
    cluster.create(TOPIC, 2, replication=1)
    dead = cluster.partitions[(TOPIC, 1)].leader
    settings = SenderSettings("a->b", "b", delivery_timeout_s=60.0)
    sender, queues = make(cluster, partitions=2, batches=20, settings=settings)
    run(sender, until=lambda: queues[1].acked_records >= 50)
    cluster.kill(dead)  # its only replica: no leader until it is back
    run(sender)
    assert queues[0].failure is None and queues[0].acked_records == 200
    stopped = queues[1]
    assert stopped.failure is not None and stopped.failure.kind is REQUEST_TIMED_OUT and stopped.failure.retriable
    assert "delivery.timeout.ms" in str(stopped.failure)
    assert written(cluster, stopped.key) == list(range(stopped.acked_records))  # counted exactly what was written


def test_a_partition_whose_leader_comes_back_within_the_delivery_timeout_finishes() -> None:
    cluster = FakeCluster()
    cluster.create(TOPIC, 2, replication=1)
    dead = cluster.partitions[(TOPIC, 1)].leader
    sender, queues = make(cluster, partitions=2, batches=20)
    run(sender, until=lambda: queues[1].acked_records >= 50)
    cluster.kill(dead)
    cluster.at(cluster.now + 60.0, lambda: (cluster.resume(dead), cluster.elect((TOPIC, 1), dead)))
    run(sender)
    for q in queues:
        assert q.failure is None
        exactly_once_in_order(cluster, q.key, 200)


def test_a_batch_too_large_for_the_target_stops_its_partition_with_a_permanent_error() -> None:
    cluster = FakeCluster()
    cluster.inject = lambda kind, node, key: WireError(MESSAGE_TOO_LARGE) if key[1] == 0 else None
    sender, queues = make(cluster, partitions=2, batches=5)
    run(sender)
    failure = queues[0].failure
    assert failure is not None and not failure.retriable and failure.kind is MESSAGE_TOO_LARGE
    # What to change, as the record path says it: the batch's size and source offsets, the key and the topic.
    assert "refused a record batch of" in failure.detail and "bytes (10 records, source offsets 0..9)" in failure.detail
    assert f"raise the max.message.bytes of topic {TOPIC} on b" in failure.detail, failure.detail
    assert queues[1].failure is None and queues[1].acked_records == 50


def test_retries_back_off_exponentially_up_to_the_maximum() -> None:
    cluster = FakeCluster()
    cluster.inject = lambda kind, node, key: WireError(NOT_ENOUGH_REPLICAS) if cluster.now < 5.0 else None
    sender, queues = make(cluster, partitions=1, batches=2)
    run(sender)
    times = [t for t, kind, _n, _k in cluster.requests if kind == "produce"]  # the first batch, again and again
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # retry.backoff.ms doubling up to retry.backoff.max.ms, each within Kafka's ±20 % jitter (and the maximum).
    nominal = [0.1, 0.2, 0.4, 0.8, 1.0]
    assert all(0.8 * n - 0.01 <= g <= 1.2 * n + 0.01 for g, n in zip(gaps, nominal, strict=False)), gaps
    assert len(gaps) >= 5 and max(gaps) <= 1.01, gaps
    exactly_once_in_order(cluster, queues[0].key, 20)


def test_batches_with_offset_holes_are_counted_and_mapped_record_by_record() -> None:
    # A compacted source: batch offsets 0..9 kept 0, 3, 4 and 9; the next batch (10..19) is whole.
    kept = [0, 3, 4, 9]
    holes = ProducerBatch(RecordBatch(memoryview(encode_batch([Record(o, 1000, b"k", b"v") for o in kept]))), kept)
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=1, batches=0)
    q = queues[0]
    sender.add(q.key, [holes, source_batches(2)[1]])
    run(sender)
    assert (q.acked_records, q.acked_upstream) == (14, 19)
    assert q.runs == [(0, 0, 1), (3, 1, 2), (9, 3, 11)]  # 9 -> 3 and 10..19 -> 4..13 are one run


def test_a_partition_of_small_batches_goes_in_fewer_requests_with_every_offset_mapped() -> None:
    cluster = FakeCluster()
    merging = SenderSettings("a->b", "b", merge_below=16 * 1024, merge_up_to=4 * 1024)
    sender, queues = make(cluster, partitions=1, batches=40, settings=merging)  # 40 batches of 10 records
    run(sender)
    q = queues[0]
    produced = [r for r in cluster.requests if r[1] == "produce"]
    assert len(produced) < 10  # 40 without merging: one batch per partition per request
    assert (q.acked_records, q.acked_upstream) == (400, 399) and q.runs == [(0, 0, 400)]
    exactly_once_in_order(cluster, q.key, 400)


def test_a_batch_already_sent_keeps_its_bytes_and_is_not_merged() -> None:
    cluster = FakeCluster()
    merging = SenderSettings("a->b", "b", merge_below=16 * 1024, merge_up_to=64 * 1024)
    sender, queues = make(cluster, partitions=1, batches=0, settings=merging)
    q = queues[0]
    first, *rest = source_batches(5)
    sender.add(q.key, [first, *rest])
    q.assign_next(q.unsent.popleft(), sender.producer)  # sent once already (its answer was lost) ...
    wire = first.wire
    q.sent.append(first)
    first.state = State.RETURNED  # ... and returned: it is resent as it was, never merged
    assert sender._peek(q) is first and first.wire == wire
    q.sent.clear()
    assert sender._peek(q) is q.unsent[0] and len(q.unsent) == 1
    assert list(q.unsent[0].upstream) == list(range(10, 50))


LINGERING = SenderSettings(
    "a->b", "b", merge_below=16 * 1024, merge_up_to=64 * 1024, linger_s=0.010, batch_bytes=64 * 1024
)


def lingering(**changes: float) -> SenderSettings:
    return dataclasses.replace(LINGERING, **changes)


def leaders_known(cluster: FakeCluster, sender: Sender, keys: list[TopicPartition]) -> float:
    """Serve the sender until it knows the leaders of ``keys`` (a Metadata round trip); the clock then."""
    while any(sender.leaders.leader(key) is None for key in keys):
        sender.leaders.request_update()
        sender.step(0.001)
    return cluster.now


def trickle(cluster: FakeCluster, sender: Sender, keys: list[TopicPartition], batches: int, every_s: float) -> float:
    """One batch of 10 records for each of ``keys`` every ``every_s`` of virtual time once the sender knows their
    leaders, the sender served in between, until every batch is acknowledged; when the first was handed over."""
    start = leaders_known(cluster, sender, keys)
    for i in range(batches):
        for key in keys:
            sender.add(key, source_batches(1, first=10 * i))
        until = start + (i + 1) * every_s
        while cluster.now < until - 1e-9:
            sender.step(until - cluster.now)
    run(sender)
    return start


def produced(cluster: FakeCluster, since: float = 0.0) -> list[tuple[float, list[TopicPartition]]]:
    """Each Produce request since ``since``: when, relative to it, and for which partitions."""
    return [(r[0] - since, sorted(r[3])) for r in cluster.requests if r[1] == "produce"]


@pytest.mark.parametrize("linger_s", [0.0, 0.010])
def test_a_partition_s_batches_wait_up_to_linger_ms_for_more_and_then_go_together(linger_s: float) -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=1, batches=0, settings=lingering(linger_s=linger_s))
    start = trickle(cluster, sender, [queues[0].key], batches=50, every_s=0.002)
    exactly_once_in_order(cluster, queues[0].key, 500)
    sent_at = [t for t, _ in produced(cluster, start)]
    if linger_s == 0:
        assert sent_at == pytest.approx([0.002 * i for i in range(50)])  # each batch at once, alone
        return
    # A request when the oldest batch waiting has waited linger.ms; it takes the one that came that moment, so
    # the next waits from 2 ms later: 100 ms of a batch every 2 ms in 9 requests, each batch in the first
    # request after it came.
    assert sent_at == pytest.approx([0.010 + 0.012 * i for i in range(9)])
    for i in range(50):
        assert min(t for t in sent_at if t >= 0.002 * i - 1e-9) - 0.002 * i <= linger_s + 1e-9


def test_batches_that_fill_batch_size_go_without_waiting() -> None:
    cluster = FakeCluster()
    one_batch = source_batches(1)[0].batch.size
    sender, queues = make(cluster, partitions=1, batches=0, settings=lingering(batch_bytes=one_batch))
    start = trickle(cluster, sender, [queues[0].key], batches=20, every_s=0.002)
    assert [t for t, _ in produced(cluster, start)] == pytest.approx([0.002 * i for i in range(20)])
    exactly_once_in_order(cluster, queues[0].key, 200)


def test_a_broker_s_request_goes_once_one_partition_is_ready_and_takes_the_others_along() -> None:
    cluster = FakeCluster()
    cluster.create(TOPIC, 6)  # partitions 0 and 3 share a leader
    queues = [PartitionQueue(TOPIC, p, f"partition={p}") for p in (0, 3)]
    sender = Sender(cluster, queues, LINGERING, ProducerIds(7, 0), clock=cluster.clock)
    start = leaders_known(cluster, sender, [q.key for q in queues])
    sender.add(queues[0].key, source_batches(1))
    while cluster.now < start + 0.008:
        sender.step(start + 0.008 - cluster.now)
    assert produced(cluster) == []
    sender.add(queues[1].key, source_batches(1))  # 2 ms before the first one's linger ends
    run(sender)
    assert produced(cluster, start) == [(pytest.approx(0.010), [queues[0].key, queues[1].key])]


def test_a_flush_sends_what_lingers_at_once_until_the_sender_is_idle() -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=1, batches=0, settings=LINGERING)
    start = leaders_known(cluster, sender, [queues[0].key])
    sender.add(queues[0].key, source_batches(1))
    sender.flush()
    run(sender)
    again = cluster.now
    sender.add(queues[0].key, source_batches(1, first=10))  # after the flush ended: it waits again
    run(sender)
    assert [t for t, _ in produced(cluster)] == pytest.approx([start, again + 0.010])
    exactly_once_in_order(cluster, queues[0].key, 20)


def test_a_batch_lingers_from_when_it_was_fetched_not_from_when_the_sender_took_it() -> None:
    cluster = FakeCluster()
    sender, queues = make(cluster, partitions=1, batches=0, settings=LINGERING)
    leaders_known(cluster, sender, [queues[0].key])
    cluster.poll(0.1)  # a clock well past 0: a batch's creation time is never negative
    start = cluster.now
    batch = source_batches(1)[0]
    batch.created = start - 0.006  # fetched 6 ms ago, waiting for the task's thread since
    sender.add(queues[0].key, [batch])
    run(sender)
    assert [t for t, _ in produced(cluster, start)] == pytest.approx([0.004])

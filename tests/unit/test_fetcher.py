"""The batch path's fetcher against a fake cluster of three brokers (tests/harness/fake_cluster.py), in virtual
time: every record is fetched once and in order through leader moves, a killed leader and a stall; a partition
that cannot go on stops alone; each partition waits its turn (KIP-74)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from mm2py.wire.batch_codec import Record, decode_records, encode_batch
from mm2py.wire.errors import OFFSET_OUT_OF_RANGE, REQUEST_TIMED_OUT, UNKNOWN_LEADER_EPOCH, WireError
from mm2py.wire.fetcher import Fetcher, FetcherSettings, FetchPartition
from mm2py.wire.forwarding import batches_to_send
from tests.harness.fake_cluster import FakeCluster

TOPIC = "orders"
BATCH = 10


def source(cluster: FakeCluster, partitions: int, batches: int, replication: int = 3) -> None:
    cluster.create(TOPIC, partitions, replication)
    for p in range(partitions):
        cluster.partitions[(TOPIC, p)].load(
            bytes(encode_batch([Record(b * BATCH + i, 1_000, b"k", str(b * BATCH + i).encode()) for i in range(BATCH)]))
            for b in range(batches)
        )


def fetcher(
    cluster: FakeCluster, partitions: int, end: int, stall_timeout_s: float = 120.0, min_interval_s: float = 0.0
) -> Fetcher:
    states = [FetchPartition(TOPIC, p, 0, end, fetch_bytes=3 * 200) for p in range(partitions)]
    settings = FetcherSettings(False, stall_timeout_s=stall_timeout_s, min_interval_s=min_interval_s)
    return Fetcher(cluster, states, settings, clock=cluster.clock)


def drain(f: Fetcher, on_step: object = None, steps: int = 100_000) -> dict[int, list[int]]:
    """Fetch until every partition is done or stopped; the source offsets of every record fetched, per partition
    (what the copier would hand to the sender)."""
    got: dict[int, list[int]] = {p.partition: [] for p in f.partitions.values()}
    for _ in range(steps):
        if not f.active():
            return got
        for state, part in f.step():
            for batch in batches_to_send(state, part.records, None, 1_000_000, "target") or []:
                got[state.partition].extend(int(r.value or b"") for r in decode_records(batch.batch))
        if callable(on_step):
            on_step()
    raise AssertionError("the fetcher did not finish")


def assert_once_in_order(got: list[int], records: int) -> None:
    assert not [o for o, n in Counter(got).items() if n > 1], "a record fetched twice"
    assert got == list(range(records))


def served_in_turn(cluster: FakeCluster) -> list[int]:
    """The partitions that answers carried data for, in order, over the first 12 such answers."""
    cluster.fill_limit = 1  # tansu, and a broker at its size limit: data for the first partitions only
    source(cluster, 4, 30, replication=1)
    f = fetcher(cluster, 4, 300)
    served: list[int] = []
    for _ in range(200):
        for state, part in f.step():
            if part.records:
                served.append(state.partition)
            batches_to_send(state, part.records, None, 1_000_000, "target")
        if len(served) == 12:
            break
    return served


def test_each_answer_serves_the_partition_that_waited_longest() -> None:
    # In a fetch session the broker keeps the order: a partition it returned records for goes to the end of the
    # session; the full request that opens the session is served in request order and reorders nothing.
    assert served_in_turn(FakeCluster(brokers=1)) == [0, *[0, 1, 2, 3] * 3][:12]


def test_without_a_fetch_session_the_fetcher_rotates_the_partitions_itself() -> None:
    cluster = FakeCluster(brokers=1)
    cluster.fetch_sessions[1].slots = 0  # a broker whose session cache is full: every request is full
    assert served_in_turn(cluster) == [0, 1, 2, 3] * 3  # round robin, in a stable order (KIP-74)
    assert {session for _node, session, _named, _gone in cluster.fetch_requests} == {(0, 0)}


def test_a_source_leader_killed_mid_copy_is_fetched_again_at_the_same_offset_from_the_new_one() -> None:
    cluster = FakeCluster()
    source(cluster, 3, 100)
    f = fetcher(cluster, 3, 1_000)
    old = cluster.partitions[(TOPIC, 0)].leader
    cluster.at(0.02, lambda: cluster.kill(old))
    got = drain(f)
    for p in range(3):
        assert_once_in_order(got[p], 1_000)
        assert f.partitions[(TOPIC, p)].failure is None
    assert cluster.partitions[(TOPIC, 0)].leader != old


def test_leader_elections_during_a_copy_skip_nothing_and_read_nothing_twice() -> None:
    cluster = FakeCluster()
    source(cluster, 2, 100)
    f = fetcher(cluster, 2, 1_000)
    for i in range(1, 30):
        for p in range(2):
            key = (TOPIC, p)
            cluster.at(i * 0.003, lambda key=key, i=i: cluster.elect(key, cluster.partitions[key].replicas[i % 3]))
    got = drain(f)
    for p in range(2):
        assert_once_in_order(got[p], 1_000)
    errors = [r for r in cluster.requests if r[1] == "fetch"]
    assert len(errors) > 2 * 100 // 3  # it did move between brokers, not finish in one answer


def test_a_partition_is_in_one_fetch_at_a_time_and_a_broker_has_one_fetch_in_flight() -> None:
    cluster = FakeCluster()
    source(cluster, 3, 60)
    sent: list[tuple[int, list[tuple[str, int]], object]] = []
    fetch = cluster.fetch
    violations = []

    def watched(node, positions, **kwargs):  # type: ignore[no-untyped-def]
        outstanding = [(n, keys) for n, keys, pending in sent if not pending.done]  # type: ignore[attr-defined]
        keys = [(p.topic, p.partition) for p in positions]
        if any(n == node for n, _keys in outstanding):
            violations.append(f"a second fetch to node {node}")
        if {k for _n, ks in outstanding for k in ks} & set(keys):
            violations.append(f"{keys} fetched twice at once")
        pending = fetch(node, positions, **kwargs)
        sent.append((node, keys, pending))
        return pending

    cluster.fetch = watched  # type: ignore[method-assign]
    cluster.latency[1] = 0.5  # a slow broker: partition 0's fetch is in flight there for a second
    assert [cluster.partitions[(TOPIC, p)].leader for p in range(3)] == [1, 2, 3]
    f = fetcher(cluster, 3, 600)
    cluster.at(0.01, lambda: cluster.elect((TOPIC, 1), 1))  # partition 1 moves to the slow broker meanwhile
    cluster.at(0.02, lambda: cluster.elect((TOPIC, 2), 2))  # and partition 2 to where partition 1 was
    cluster.at(0.02, lambda: cluster.elect((TOPIC, 0), 3))  # partition 0 moves away while its fetch is out
    got = drain(f)
    assert violations == []
    for p in range(3):
        assert_once_in_order(got[p], 600)


def test_every_fetch_carries_the_leader_epoch_metadata_names() -> None:
    cluster = FakeCluster()
    source(cluster, 1, 10)
    cluster.elect((TOPIC, 0), cluster.partitions[(TOPIC, 0)].replicas[1])  # epoch 1
    epochs = []
    fetch = cluster.fetch

    def watched(node, positions, **kwargs):  # type: ignore[no-untyped-def]
        epochs.extend(p.leader_epoch for p in positions)
        return fetch(node, positions, **kwargs)

    cluster.fetch = watched  # type: ignore[method-assign]
    assert_once_in_order(drain(fetcher(cluster, 1, 100))[0], 100)
    assert epochs and set(epochs) == {1}


def test_records_deleted_before_they_were_copied_stop_that_partition_alone() -> None:
    cluster = FakeCluster()
    source(cluster, 2, 20)
    cluster.inject = lambda kind, node, key: WireError(OFFSET_OUT_OF_RANGE) if key[1] == 1 else None
    f = fetcher(cluster, 2, 200)
    got = drain(f)
    assert_once_in_order(got[0], 200)
    failure = f.partitions[(TOPIC, 1)].failure
    assert failure is not None and failure.kind is OFFSET_OUT_OF_RANGE and not failure.retriable


def test_a_partition_whose_leader_stays_away_stops_after_the_stall_timeout_with_a_retriable_error() -> None:
    cluster = FakeCluster()
    source(cluster, 2, 40, replication=1)
    f = fetcher(cluster, 2, 400, stall_timeout_s=30.0)
    dead = cluster.partitions[(TOPIC, 1)].leader
    if dead == cluster.partitions[(TOPIC, 0)].leader:
        cluster.elect((TOPIC, 1), 3 if dead != 3 else 2)
        dead = cluster.partitions[(TOPIC, 1)].leader
    cluster.at(0.005, lambda: cluster.kill(dead))
    got = drain(f)
    assert_once_in_order(got[0], 400)
    failure = f.partitions[(TOPIC, 1)].failure
    assert failure is not None and failure.kind is REQUEST_TIMED_OUT and failure.retriable
    assert got[1] == list(range(len(got[1])))  # what it fetched before is exact
    assert cluster.now >= 30.0


def test_a_partition_whose_leader_comes_back_before_the_stall_timeout_finishes() -> None:
    cluster = FakeCluster()
    source(cluster, 2, 40, replication=1)
    f = fetcher(cluster, 2, 400)
    dead = cluster.partitions[(TOPIC, 1)].leader
    cluster.at(0.005, lambda: cluster.kill(dead))
    cluster.at(60.0, lambda: (cluster.resume(dead), cluster.elect((TOPIC, 1), dead)))
    got = drain(f)
    for p in range(2):
        assert_once_in_order(got[p], 400)


def test_an_unknown_leader_epoch_is_fetched_again_after_a_backoff() -> None:
    cluster = FakeCluster()
    source(cluster, 1, 10)
    answers = []

    def lagging(kind: str, node: int, key: tuple[str, int]) -> WireError | None:
        if kind == "fetch" and len(answers) < 3:
            answers.append(cluster.now)
            return WireError(UNKNOWN_LEADER_EPOCH)  # the broker has not caught up with the new epoch yet
        return None

    cluster.inject = lagging
    got = drain(fetcher(cluster, 1, 100))
    assert_once_in_order(got[0], 100)
    assert len(answers) == 3


# -- incremental fetch sessions (KIP-227) ---------------------------------------------------------------------


def batch_of(first: int) -> bytes:
    return bytes(encode_batch([Record(first + i, 1_000, b"k", str(first + i).encode()) for i in range(BATCH)]))


def test_once_a_session_is_open_a_request_names_only_partitions_whose_position_moved() -> None:
    cluster = FakeCluster(brokers=1)
    cluster.create(TOPIC, 8, 1)
    quiet = [FetchPartition(TOPIC, p, 0, 10**9) for p in range(8)]  # followed, not read to an end
    f = Fetcher(cluster, quiet, FetcherSettings(False), clock=cluster.clock)
    for i in range(20):  # ten records every 50 ms on partition 3 alone
        cluster.at(0.05 * (i + 1), lambda i=i: cluster.partitions[(TOPIC, 3)].load([batch_of(i * BATCH)]))
    got: list[int] = []
    while cluster.now < 2.0:
        for state, part in f.step():
            for batch in batches_to_send(state, part.records, None, 1_000_000, "target") or []:
                got.extend(int(r.value or b"") for r in decode_records(batch.batch))
    assert_once_in_order(got, 200)
    first, *rest = cluster.fetch_requests
    assert first[1] == (0, 0) and len(first[2]) == 8  # the full request that opened the session
    assert rest and all(session[0] != 0 and session[1] > 0 for _n, session, _named, _gone in rest)
    assert {key for _n, _s, named, _gone in rest for key in named} == {(TOPIC, 3)}
    assert sum(1 for _n, _s, named, _gone in rest if not named) > len(rest) / 2  # most round trips name none


def test_a_session_the_broker_lost_or_got_out_of_step_with_is_opened_again_skipping_nothing() -> None:
    cluster = FakeCluster(brokers=1)
    source(cluster, 3, 100, replication=1)
    sessions = cluster.fetch_sessions[1].sessions

    def out_of_step() -> None:
        for session in sessions.values():
            session.epoch += 5

    for i in range(1, 6):
        cluster.at(0.01 * i, sessions.clear)  # evicted, as a broker's full cache evicts the least used
        cluster.at(0.01 * i + 0.005, out_of_step)
    got = drain(fetcher(cluster, 3, 1_000))
    for p in range(3):
        assert_once_in_order(got[p], 1_000)
    opening = [session for _n, session, _named, _gone in cluster.fetch_requests if session[1] == 0]
    assert (0, 0) in opening[1:]  # after FETCH_SESSION_ID_NOT_FOUND: a new session
    assert any(session_id != 0 for session_id, _epoch in opening)  # after INVALID_FETCH_SESSION_EPOCH: close, open


def test_a_partition_led_elsewhere_is_forgotten_by_its_old_leader_and_the_sessions_close_at_the_end() -> None:
    cluster = FakeCluster()
    source(cluster, 2, 100)
    cluster.elect((TOPIC, 1), 1)  # broker 1 leads both
    cluster.at(0.01, lambda: cluster.elect((TOPIC, 1), 2))
    f = fetcher(cluster, 2, 1_000)
    got = drain(f)
    for p in range(2):
        assert_once_in_order(got[p], 1_000)
    assert any((TOPIC, 1) in gone for node, _s, _named, gone in cluster.fetch_requests if node == 1)
    assert any(s.sessions for s in cluster.fetch_sessions.values())
    f.close()
    assert not any(s.sessions for s in cluster.fetch_sessions.values())
    assert {session[1] for _n, session, named, _g in cluster.fetch_requests[-2:]} == {-1}


def test_a_quiet_partition_the_caller_stopped_leaves_the_session_within_a_second() -> None:
    cluster = FakeCluster(brokers=1)
    cluster.create(TOPIC, 8, 1)
    states = [FetchPartition(TOPIC, p, 0, 10**9) for p in range(8)]
    f = Fetcher(cluster, states, FetcherSettings(False), clock=cluster.clock)
    for i in range(40):  # partition 3 busy throughout, so answers keep coming
        cluster.at(0.05 * (i + 1), lambda i=i: cluster.partitions[(TOPIC, 3)].load([batch_of(i * BATCH)]))
    stopped_at = None
    while cluster.now < 2.0:
        for state, part in f.step():
            batches_to_send(state, part.records, None, 1_000_000, "target")
        if stopped_at is None and cluster.now >= 0.5:
            states[5].failure, stopped_at = WireError(REQUEST_TIMED_OUT, "the sender stopped it"), cluster.now
    assert stopped_at is not None
    forgotten = [
        when for when, (_n, _s, _named, gone) in zip(fetch_times(cluster), cluster.fetch_requests, strict=True) if gone
    ]
    assert forgotten and stopped_at <= forgotten[0] <= stopped_at + 1.1
    assert (TOPIC, 5) not in cluster.fetch_sessions[1].sessions[
        next(iter(cluster.fetch_sessions[1].sessions))
    ].partitions


def fetch_times(cluster: FakeCluster) -> list[float]:
    return [when for when, kind, _node, _keys in cluster.requests if kind == "fetch"]


def test_every_fetch_carries_the_consumer_s_wait_and_sizes() -> None:
    cluster = FakeCluster()
    source(cluster, 3, 4)
    states = [FetchPartition(TOPIC, p, 0, 40, fetch_bytes=3 * 200) for p in range(3)]
    settings = FetcherSettings(False, max_wait_ms=250, min_bytes=4096, max_bytes=1 << 20)
    got = drain(Fetcher(cluster, states, settings, clock=cluster.clock))
    assert all(got[p] == list(range(40)) for p in range(3))
    assert cluster.fetch_limits and set(cluster.fetch_limits) == {(250, 4096, 1 << 20)}


def paced_drain(cluster: FakeCluster, interval_s: float) -> tuple[list[float], int]:
    """Two partitions of 300 records fetched from one broker, fetches ``interval_s`` apart at the least: when
    each fetch went, and how many steps the fetcher took."""
    source(cluster, 2, 30, replication=1)
    f = fetcher(cluster, 2, 300, min_interval_s=interval_s)
    steps = [0]
    got = drain(f, on_step=lambda: steps.__setitem__(0, steps[0] + 1))
    for p in range(2):
        assert_once_in_order(got[p], 300)
    return [at for at, kind, _node, _keys in cluster.requests if kind == "fetch"], steps[0]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


@pytest.mark.parametrize("sessions", [True, False], ids=["incremental", "every-request-full"])
def test_fetches_to_a_broker_start_the_minimum_interval_apart_and_the_fetcher_waits_without_spinning(
    sessions: bool,
) -> None:
    def broker() -> FakeCluster:
        cluster = FakeCluster(brokers=1)
        if not sessions:
            cluster.fetch_sessions[1].slots = 0  # every request full: the fetcher's pass over every partition
        return cluster

    unpaced, _ = paced_drain(broker(), 0.0)
    assert min(gaps(unpaced)) < 0.005  # a round trip is 2 ms: without the interval the next fetch goes at once
    sent, steps = paced_drain(broker(), 0.02)
    assert min(gaps(sent)) >= 0.02 - 1e-9
    assert max(gaps(sent)) < 0.02 + 0.005  # and goes when the interval is over, not at the next step's whim
    assert steps <= 3 * len(sent)  # a held fetch is waited for, not polled for


def test_a_fetch_answered_after_the_interval_is_followed_at_once() -> None:
    # A quiet partition's fetch waits at the broker (fetch.max.wait.ms) far longer than the interval: the next one
    # goes as soon as the answer is taken, so the interval adds nothing to a record that ends such a wait.
    cluster = FakeCluster(brokers=1)
    cluster.latency[1] = 0.05  # a round trip of 100 ms
    sent, _ = paced_drain(cluster, 0.02)
    assert all(abs(gap - 0.1) < 0.002 for gap in gaps(sent))


def test_a_fetch_held_for_the_interval_goes_on_time_while_another_broker_answers_meanwhile() -> None:
    # Broker 1 without fetch sessions (every request full): after each of its answers the fetcher passes over every
    # partition, and holding its next fetch back defers that pass to the interval's end. Broker 2's answers (in a
    # session: no pass) end the fetcher's wait meanwhile; it must not forget when broker 1's fetch was due.
    cluster = FakeCluster(brokers=2)
    cluster.fetch_sessions[1].slots = 0
    cluster.latency[2] = 0.013  # a round trip of 26 ms, out of step with the fast broker's 20-ms interval
    source(cluster, 2, 60, replication=1)
    assert [cluster.partitions[(TOPIC, p)].leader for p in range(2)] == [1, 2]
    got = drain(fetcher(cluster, 2, 600, min_interval_s=0.02))
    for p in range(2):
        assert_once_in_order(got[p], 600)
    fast = [at for at, kind, node, _keys in cluster.requests if kind == "fetch" and node == 1]
    assert min(gaps(fast)) >= 0.02 - 1e-9 and max(gaps(fast)) < 0.02 + 0.002

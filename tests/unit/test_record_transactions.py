"""Exactly-once on the record path, without a broker: the transactional ids are MM2's slot ids, as on the batch
path; a fenced producer ends the task without copying its later ranges; a retried task starts after what an earlier
attempt committed; the task's slot producers are let go of when it ends. (On real Kafka:
tests/realkafka/test_mm2_beside_exactly_once.py, both paths.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2py.engine.spark import group_by_slot
from mm2py.errors import Failure, ReplicationError
from mm2py.executor import record_copy, record_transactions
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange, slot_transactional_id
from mm2py.mirror.progress import progress_record
from tests.unit.test_errors import SPEC

EOS = dataclasses.replace(SPEC, exactly_once=True, exactly_once_slots=2)
RANGES = [PartitionRange("orders", p, "dc1.orders", 10, 20) for p in range(6)]


def test_the_record_path_writes_under_mm2s_slot_ids_one_per_task_slot() -> None:
    ids = {record_transactions.producer_settings(EOS, rng)["transactional.id"] for rng in RANGES}
    assert (
        ids
        == {slot_transactional_id(SPEC.source, slot) for slot in (0, 1)}
        == {
            "dc1-mm2-MirrorSourceConnector-0",
            "dc1-mm2-MirrorSourceConnector-1",
        }
    )
    # One Spark task per slot: no two tasks of a job initialize the same id.
    groups = group_by_slot(RANGES, EOS)
    assert len(groups) == 2
    for group in groups:
        assert len({record_transactions.producer_settings(EOS, rng)["transactional.id"] for rng in group}) == 1
    assert "transactional.id" not in record_transactions.producer_settings(SPEC, RANGES[0])


def _copy(
    monkeypatch: pytest.MonkeyPatch, spec: CopySpec, ranges: list[PartitionRange], fail_at: dict[int, Failure]
) -> tuple[list[int], list[CopyResult]]:
    """The partitions copy_range was called for, and the task's results, each partition of ``fail_at`` failing."""
    copied: list[int] = []

    def copy_range(spec: CopySpec, rng: PartitionRange, throttle: Any = None) -> CopyResult:
        copied.append(rng.partition)
        if rng.partition in fail_at:
            raise ReplicationError.of_failure(fail_at[rng.partition])
        return CopyResult(rng.topic, rng.partition, rng.start, rng.end, rng.end - 1, rng.end - rng.start, 0, 0, 0.0)

    monkeypatch.setattr(record_copy, "copy_range", copy_range)
    return copied, list(record_copy.copy_partitions(spec, iter(ranges)))


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    dropped: list[str] = []
    monkeypatch.setattr(record_copy, "close_idle", lambda: None)
    monkeypatch.setattr(record_copy, "executor_logging", lambda spec: None)
    monkeypatch.setattr(record_transactions, "drop_producer", lambda s: dropped.append(s["transactional.id"]))
    return dropped


def test_a_fenced_producer_ends_the_task_and_its_later_ranges_are_not_copied(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    fenced = Failure("flow=dc1->target topic=orders partition=1: commit transaction failed", "PRODUCER_FENCED", False)
    copied, results = _copy(monkeypatch, EOS, RANGES[:4], {1: fenced})
    assert copied == [0, 1]  # nothing after the fenced range
    assert [r.partition for r in results] == [0, 1, 2, 3]
    assert results[0].error is None and results[0].next_offset == 20
    for r in results[1:]:
        assert r.error is not None and (r.error.code, r.error.retriable) == ("PRODUCER_FENCED", False)
        assert "fenced: another producer initialized transactional.id dc1-mm2-MirrorSourceConnector-" in r.error.message
        assert r.next_offset == r.start == 10  # nothing moves
    assert sorted(released) == sorted({record_transactions.transactional_id(EOS, rng) for rng in RANGES[:4]})


def test_a_records_invalid_producer_epoch_is_fencing_under_exactly_once_and_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    # A zombie's Produce answered INVALID_PRODUCER_EPOCH reaches copy_partitions as a delivery failure that is
    # retriable for an idempotent producer; raised, Spark would retry the task and its new producer would take the
    # slot's id back from the producer that fenced it.
    stale = Failure("flow=dc1->target topic=orders partition=1: producing failed", "INVALID_PRODUCER_EPOCH", True)
    copied, results = _copy(monkeypatch, EOS, RANGES[:3], {1: stale})
    assert copied == [0, 1]
    assert [(r.error.code, r.error.retriable) for r in results[1:] if r.error] == [("PRODUCER_FENCED", False)] * 2
    assert "fenced: another producer initialized transactional.id" in str(results[1].error)
    # At-least-once the same answer only replaces the idempotent producer: the task is retried.
    with pytest.raises(ReplicationError) as raised:
        _copy(monkeypatch, SPEC, RANGES[:3], {1: stale})
    assert raised.value.failure == stale


def test_a_fatal_fencing_raised_through_a_delivery_callback_ends_the_task_and_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    # What a fenced producer's flush raised in a full run (Spark's event log): the fatal KafkaException was left
    # pending while a delivery callback ran, whose first call into C failed with a SystemError in its context.
    def copy_range(spec: CopySpec, rng: PartitionRange, throttle: Any = None) -> CopyResult:
        if rng.partition == 0:
            return CopyResult(rng.topic, 0, rng.start, rng.end, rng.end - 1, rng.end - rng.start, 0, 0, 0.0)
        try:
            raise KafkaException(KafkaError(KafkaError._FENCED, "transactional producer fenced", fatal=True))
        except KafkaException:  # the fatal error as the SystemError's context, not its cause, as the client leaves it
            raise SystemError("<method 'purge' of 'cimpl.Producer'> returned a result with an exception set")  # noqa: B904

    monkeypatch.setattr(record_copy, "copy_range", copy_range)
    results = list(record_copy.copy_partitions(EOS, iter(RANGES[:3])))
    assert [r.error for r in results[:1]] == [None]
    assert [(r.error.code, r.error.retriable) for r in results[1:] if r.error] == [("PRODUCER_FENCED", False)] * 2

    # A SystemError that is not the client's is not taken for one.
    def broken(spec: CopySpec, rng: PartitionRange, throttle: Any = None) -> CopyResult:
        raise SystemError("other")

    monkeypatch.setattr(record_copy, "copy_range", broken)
    with pytest.raises(SystemError, match="other"):
        list(record_copy.copy_partitions(EOS, iter(RANGES[:1])))


class _Aborting:
    """A transactional producer whose abort fails with ``error`` (None: it aborts)."""

    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    def abort_transaction(self, timeout: float) -> None:
        if self.error is not None:
            raise KafkaException(self.error)


def test_an_abort_refused_as_fenced_is_the_fencing_and_any_other_failure_leaves_the_first_error(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    # A task stopped past message.timeout.ms resumes to a timed-out record (abortable, needs a new epoch): its
    # abort asks for one with the epoch it holds, and the coordinator refuses it if MM2 took the id meanwhile.
    # Swallowed, the task failed with the retriable timeout and Spark's retry took the id back from MM2.
    settings = record_transactions.producer_settings(EOS, RANGES[0])
    where = "flow=dc1->target topic=orders partition=0"
    fenced = KafkaError(
        KafkaError._FENCED, "Failed to end transaction: Local: This instance has been fenced", fatal=True
    )
    with pytest.raises(ReplicationError) as raised:
        record_transactions.abort(_Aborting(fenced), settings, where)
    stopped = record_transactions.fenced_failure(EOS, RANGES[0], raised.value.failure)
    assert stopped is not None and (stopped.code, stopped.retriable) == ("PRODUCER_FENCED", False)
    assert raised.value.failure.message.startswith(f"{where}: abort transaction failed: ")
    assert released == [settings["transactional.id"]]
    stale = KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "stale epoch")
    with pytest.raises(ReplicationError, match="abort transaction failed"):
        record_transactions.abort(_Aborting(stale), settings, where)
    record_transactions.abort(_Aborting(KafkaError(KafkaError._TIMED_OUT, "timed out")), settings, where)
    record_transactions.abort(_Aborting(None), settings, where)
    assert len(released) == 3  # each failed abort forgot the producer; the clean one kept it


def test_other_permanent_failures_leave_the_later_ranges_copied(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    too_large = Failure("flow=dc1->target topic=orders partition=1: too large", "MESSAGE_TOO_LARGE", False)
    copied, results = _copy(monkeypatch, EOS, RANGES[:3], {1: too_large})
    assert copied == [0, 1, 2]
    assert [r.error for r in results] == [None, too_large, None]
    # At-least-once, nothing is transactional: no producer is let go of at the end.
    released.clear()
    _copy(monkeypatch, SPEC, RANGES[:3], {})
    assert released == []


def test_a_retried_task_starts_after_what_an_earlier_attempt_committed(
    monkeypatch: pytest.MonkeyPatch, released: list[str]
) -> None:
    class _Msg:
        def __init__(self, key: bytes | None, value: bytes | None) -> None:
            self._key, self._value = key, value

        def key(self) -> bytes | None:
            return self._key

        def value(self) -> bytes | None:
            return self._value

    committed = [progress_record(SPEC.source, "orders", 0, 19), progress_record(SPEC.source, "orders", 1, 14)]
    other = progress_record("dc2", "orders", 2, 17)  # another source's progress in the same topic

    def read_topic(alias: str, settings: Any, topic: str, **kwargs: Any) -> Iterator[_Msg]:
        assert (alias, topic) == (EOS.target, EOS.progress_topic)
        return iter(_Msg(r.key, r.value) for r in [*committed, other])

    monkeypatch.setattr(record_transactions, "read_topic", read_topic)
    starts: list[tuple[int, int]] = []

    def copy_range(spec: CopySpec, rng: PartitionRange, throttle: Any = None) -> CopyResult:
        starts.append((rng.partition, rng.start))
        return CopyResult(rng.topic, rng.partition, rng.start, rng.end, rng.end - 1, rng.end - rng.start, 0, 0, 0.0)

    monkeypatch.setattr(record_copy, "copy_range", copy_range)
    list(record_copy.copy_partitions(EOS, iter(RANGES[:3]), retried=True))
    # Partition 0 was committed whole (an empty range is left), 1 up to 14, 2 not at all (dc2's is not ours).
    assert starts == [(0, 20), (1, 15), (2, 10)]
    starts.clear()
    list(record_copy.copy_partitions(EOS, iter(RANGES[:3])))  # a first attempt reads nothing
    assert starts == [(0, 10), (1, 10), (2, 10)]

"""The pipelined producer of the batch path against a fake broker that keeps Kafka's idempotence rules.

The fake broker appends a batch only when its sequence follows the last one it wrote for the partition,
answers a batch it already wrote with the original offset (duplicate detection), and refuses a gap with
OUT_OF_ORDER_SEQUENCE, as a real broker does; failures are injected per request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from mm2py.errors import ReplicationError
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.batches import RecordBatch
from mm2py.wire.connection import ErrorCode, ProducedPartition, error_for
from mm2py.wire.sender import MAX_IN_FLIGHT, Lane, Outgoing, PipelinedProducer, SenderSettings

SPEC = SenderSettings(flow="a->b", target="b", request_timeout_s=5.0, stall_timeout_s=5.0)


@dataclass
class _Pending:
    answer: list[ProducedPartition] | ErrorCode
    sent_at: float
    done: bool = False


@dataclass
class FakeBroker:
    """An idempotent partition log per (topic, partition): (sequence, record count, base offset) per batch."""

    fail: Callable[[int, tuple[str, int]], ErrorCode | None] = lambda request, key: None
    logs: dict[tuple[str, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    requests: int = 0
    outstanding: int = 0
    most_outstanding: int = 0

    # -- the WireClient surface the producer uses --
    def leader(self, key: tuple[str, int]) -> int:
        return 1

    def refresh_leaders(self, topics: Any, timeout_s: float) -> dict[Any, Any]:
        return {}

    def poll(self, timeout_s: float) -> None:
        pass

    def send_produce(
        self, node: int, record_sets: dict[tuple[str, int], tuple[bytes, memoryview]], *, timeout_ms: int
    ) -> _Pending:
        self.requests += 1
        self.outstanding += 1
        self.most_outstanding = max(self.most_outstanding, self.outstanding)
        parts = []
        for key, pieces in record_sets.items():
            batch = RecordBatch(memoryview(b"".join(pieces)))
            assert batch.crc_ok()
            error = self.fail(self.requests, key)
            if error is not None:
                parts.append(ProducedPartition(key[0], key[1], error, -1))
                continue
            log = self.logs.setdefault(key, [])
            duplicate = [base for seq, _n, base in log if seq == batch.base_sequence]
            expected = (log[-1][0] + log[-1][1]) if log else 0
            if duplicate:
                parts.append(ProducedPartition(key[0], key[1], None, duplicate[0]))
            elif batch.base_sequence != expected:
                parts.append(ProducedPartition(key[0], key[1], error_for(45), -1))
            else:
                base = (log[-1][2] + log[-1][1]) if log else 0
                log.append((batch.base_sequence, batch.record_count, base))
                parts.append(ProducedPartition(key[0], key[1], None, base))
        return _Pending(parts, float(self.requests))

    def produce_result(self, pending: _Pending, timeout_s: float) -> list[ProducedPartition] | ErrorCode:
        self.outstanding -= 1
        return pending.answer


def batches(count: int, size: int = 10) -> list[Outgoing]:
    out = []
    for i in range(count):
        records = [Record(i * size + j, 1000 + j, b"k", b"v", ()) for j in range(size)]
        raw = encode_batch(records, base_offset=i * size)
        out.append(Outgoing(RecordBatch(memoryview(raw)), range(i * size, (i + 1) * size)))
    return out


def run(broker: FakeBroker, lanes: list[Lane]) -> None:
    producer = PipelinedProducer(SPEC, broker, lanes, producer_id=7, epoch=0)  # type: ignore[arg-type]
    steps = 0
    while producer.busy():
        producer.step()
        steps += 1
        assert steps < 10_000


def lane(partition: int, count: int) -> Lane:
    new = Lane("t", partition, f"partition={partition}")
    new.pending.extend(batches(count))
    return new


def test_up_to_five_requests_are_in_flight_per_leader() -> None:
    broker = FakeBroker()
    lanes = [lane(0, 40), lane(1, 40)]
    run(broker, lanes)
    assert broker.most_outstanding == MAX_IN_FLIGHT
    assert broker.requests == 40  # one batch per partition per request
    for one in lanes:
        assert (one.records, one.last_upstream) == (400, 399)
        assert one.runs == [(0, 0, 400)]  # 40 contiguous batches make one run for the offset syncs


@pytest.mark.parametrize("error", [6, 7, -1])  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, no answer
def test_a_failed_request_is_resent_in_order_and_nothing_is_written_twice(error: int) -> None:
    code = error_for(error) if error > 0 else ErrorCode(-1, "NETWORK_EXCEPTION", True)
    broker = FakeBroker(fail=lambda request, key: code if request == 3 and key[1] == 0 else None)
    lanes = [lane(0, 30), lane(1, 30)]
    run(broker, lanes)
    for one in lanes:
        log = broker.logs[("t", one.partition)]
        assert [seq for seq, _n, _b in log] == list(range(0, 300, 10))  # every batch once, in order
        assert (one.records, one.last_upstream) == (300, 299)
        assert one.runs == [(0, 0, 300)]


def test_batches_with_offset_holes_are_counted_and_mapped_record_by_record() -> None:
    # A compacted source: batch offsets 0..9 kept 0, 3, 4 and 9; the next batch (10..19) is whole.
    kept = [0, 3, 4, 9]
    holes = Outgoing(RecordBatch(memoryview(encode_batch([Record(o, 1000, b"k", b"v") for o in kept]))), kept)
    one = Lane("t", 0, "partition=0")
    one.pending.extend([holes, batches(2)[1]])
    run(FakeBroker(), [one])
    assert (one.records, one.last_upstream) == (14, 19)
    assert one.runs == [(0, 0, 1), (3, 1, 2), (9, 3, 11)]  # 9 -> 3 and 10..19 -> 4..13 are one run


def test_a_lost_answer_is_resent_and_answered_with_the_original_offset() -> None:
    class LosingBroker(FakeBroker):
        def produce_result(self, pending: _Pending, timeout_s: float) -> list[ProducedPartition] | ErrorCode:
            super().produce_result(pending, timeout_s)
            if pending.sent_at == 2.0:  # written, but the answer never arrives
                return ErrorCode(-1, "NETWORK_EXCEPTION (no response)", True)
            return pending.answer

    broker = LosingBroker()
    one = lane(0, 12)
    run(broker, [one])
    assert len(broker.logs[("t", 0)]) == 12
    assert one.runs == [(0, 0, 120)]


def test_a_batch_larger_than_the_target_accepts_is_a_permanent_error_naming_sizes() -> None:
    broker = FakeBroker(fail=lambda request, key: error_for(10))
    one = lane(0, 1)
    size = one.pending[0].batch.size
    with pytest.raises(ReplicationError) as caught:
        run(broker, [one])
    assert not caught.value.retriable
    message = str(caught.value)
    assert f"record batch of {size} bytes" in message and f"to at least {size}" in message
    assert "bytes" in message and "max.message.bytes" in message and "mm2py.copy.mode=record" in message


def test_a_partition_that_keeps_failing_gives_up_after_the_stall_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("mm2py.wire.sender.time.monotonic", lambda: clock[0])

    def fail(request: int, key: tuple[str, int]) -> ErrorCode:
        clock[0] += 1.0
        return error_for(6)  # type: ignore[return-value]

    monkeypatch.setattr("mm2py.wire.sender.time.sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    with pytest.raises(ReplicationError, match="kept failing"):
        run(FakeBroker(fail=fail), [lane(0, 3)])

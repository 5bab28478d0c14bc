"""The batch copier's fetcher serves every partition of its task in turn, not the first ones until they end.

A Kafka broker fills a Fetch response in the order the request names the partitions, up to the response's
size limit (and tansu returns only the first partition that has data). The fake source here does the
former with a limit of one partition's data per response, so a fetcher that always asked in the same order
would read partition 0 to its end before any other partition got a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mm2py.executor.batch_copy import _BatchCopier
from mm2py.executor.contract import CopySpec, PartitionRange
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.connection import FetchedPartition, FetchPosition

SPEC = CopySpec(
    flow="a->b",
    source="a",
    target="b",
    consumer_settings={},
    producer_settings={},
    syncs_producer_settings=None,
    syncs_topic=None,
    progress_topic="p",
    offset_lag_max=100,
    stall_timeout_s=5.0,
    flush_timeout_s=5.0,
)
BATCH = 10  # records per batch in the fake log
PARTITIONS = 4


def log_of(batches: int) -> list[bytes]:
    return [
        bytes(encode_batch([Record(b * BATCH + i, 1000, b"k", b"v") for i in range(BATCH)], base_offset=b * BATCH))
        for b in range(batches)
    ]


@dataclass
class FakeSource:
    """One broker; a response holds the batches of the first partition (in request order) that has any."""

    logs: dict[int, list[bytes]]
    served: list[int] = field(default_factory=list)  # which partition each response carried data for

    def leader(self, key: tuple[str, int]) -> int:
        return 1

    def send_fetch(self, node: int, positions: list[FetchPosition], **_: object) -> list[FetchedPartition]:
        answer, filled = [], False
        for p in positions:
            data = b""
            if not filled:
                data = b"".join(self.logs[p.partition][p.offset // BATCH : p.offset // BATCH + 3])
                filled = bool(data)
                if filled:
                    self.served.append(p.partition)
            end = len(self.logs[p.partition]) * BATCH
            answer.append(FetchedPartition(p.topic, p.partition, None, end, end, None, data))
        return answer

    def fetch_result(self, pending: list[FetchedPartition], timeout_s: float) -> list[FetchedPartition]:
        return pending


def test_each_response_serves_the_partition_that_waited_longest() -> None:
    source = FakeSource({p: log_of(30) for p in range(PARTITIONS)})  # 10 responses' worth per partition
    ranges = [PartitionRange("t", p, "t", 0, 300) for p in range(PARTITIONS)]
    copier = _BatchCopier(SPEC, ranges)
    for _ in range(3 * PARTITIONS):
        copier._fetch_once(source, copier._active())  # type: ignore[arg-type]
        copier.inbox.get_nowait()  # the producer's side: take what was fetched
    # Round robin: every partition once in each round of PARTITIONS responses, in a stable order.
    assert source.served == list(range(PARTITIONS)) * 3
    assert {state.position for state in copier.ranges.values()} == {90}

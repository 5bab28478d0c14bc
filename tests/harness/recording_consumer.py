"""A consumer-group member that records every record it processes, as an application on either side of a
cut-over would: (topic, partition, offset) and the record's unique id, committing exactly what it processed.

Why: a switch-over is right when every group processes every record once across the old and the new cluster.
Offsets differ between the clusters, so a record is known by its id (its value: ``make_records`` makes every
value unique), and counting ids over both sides shows records read twice and records skipped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.harness.kafka_harness import consumer_config

Partition = tuple[str, int]


@dataclass(frozen=True)
class Processed:
    cluster: str
    topic: str
    partition: int
    offset: int
    record_id: bytes


@dataclass
class RecordingConsumer:
    """One member of ``group`` on ``bootstrap``, subscribed to ``topic``; ``consume`` processes records and
    commits after each batch (offset of the last processed record + 1), so what is committed is what was
    recorded."""

    cluster: str
    bootstrap: str
    group: str
    topic: str
    client_id: str
    processed: list[Processed] = field(default_factory=list)
    # partition -> the next offset to process, as far as seen; kept across ``consume`` calls, so a member that
    # already stands at an end it is asked for again (an idle partition sends no second EOF) is done at once.
    positions: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._consumer = Consumer(
            consumer_config(
                self.bootstrap,
                **{"group.id": self.group, "client.id": self.client_id, "enable.partition.eof": True},
            )
        )
        self._consumer.subscribe([self.topic])

    def consume(self, *, until_records: int | None = None, until_ends: Mapping[int, int] | None = None) -> None:
        """Process records until ``until_records`` were processed by this member, or until its positions reach
        ``until_ends`` (partition -> end offset) on every partition; bounded by a deadline."""
        deadline = time.monotonic() + 120
        positions = self.positions
        while not self._done(positions, until_records, until_ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {self.group} on {self.cluster}: at {positions}, wanted {until_ends}")
            batch = self._consumer.consume(num_messages=500, timeout=0.2)
            commit: dict[int, int] = {}
            for msg in batch:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                if (err := msg.error()) is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        positions[partition] = offset
                        continue
                    raise KafkaException(err)
                if until_records is not None and len(self.processed) >= until_records:
                    break  # not processed: the next member of the group (on either cluster) gets it
                self.processed.append(Processed(self.cluster, self.topic, partition, offset, msg.value() or b""))
                commit[partition] = offset + 1
                positions[partition] = offset + 1
            if commit:
                offsets = [TopicPartition(self.topic, p, o) for p, o in commit.items()]
                self._consumer.commit(offsets=offsets, asynchronous=False)

    def _done(
        self, positions: Mapping[int, int], until_records: int | None, until_ends: Mapping[int, int] | None
    ) -> bool:
        if until_records is not None:
            return len(self.processed) >= until_records
        assert until_ends is not None
        return all(positions.get(p, -1) >= end for p, end in until_ends.items())

    def close(self) -> None:
        """Leave the group (the consumer stops: no member remains on this cluster)."""
        self._consumer.close()


def once_per_group(processed: Iterable[Processed], every_id: Iterable[bytes]) -> tuple[int, int]:
    """(records processed twice, records never processed) by one group over both clusters."""
    counts = Counter(p.record_id for p in processed)
    twice = sum(n - 1 for n in counts.values() if n > 1)
    skipped = sum(1 for record_id in every_id if record_id not in counts)
    return twice, skipped

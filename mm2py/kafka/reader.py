"""Reading a topic from its start to its end: how MM2's internal topics (progress, offset syncs,
checkpoints, heartbeats) are loaded.

The end is where the consumer reports partition EOF, i.e. the high watermark of its own fetch - the same
end Connect's KafkaBasedLog reads to - so nothing depends on a separate ListOffsets answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from mm2py.errors import KafkaOperationError
from mm2py.kafka.admin import wrap_kafka_error
from mm2py.kafka.clients import new_consumer


def read_topic(alias: str, consumer_settings: Mapping[str, str], topic: str, *, purpose: str,
               timeout_s: float = 30.0) -> Iterator[Any]:
    """Every record of ``topic`` on cluster ``alias``, per partition in offset order; nothing if it does not exist.

    Yields confluent-kafka Message objects; raises KafkaOperationError naming the cluster and ``purpose``.
    """
    settings = {**consumer_settings, "group.id": f"mm2py-reader-{alias}", "enable.partition.eof": "true",
                "fetch.wait.max.ms": "10",
                "enable.auto.commit": "false", "isolation.level": "read_committed"}
    consumer = new_consumer(settings)
    operation = f"{purpose} ({topic})"
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise wrap_kafka_error(alias, operation, exc) from None
        info = metadata.topics.get(topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return
        partitions = sorted(info.partitions)
        if not partitions:
            return
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise KafkaOperationError(alias, operation, f"did not reach the end within {timeout_s:.0f} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.05):
                err = msg.error()
                partition = msg.partition() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(partition)
                        continue
                    raise KafkaOperationError(alias, operation, err.str())
                at_end.discard(partition)
                yield msg
    finally:
        consumer.close()

"""A partition of a topic, as ``(topic, partition)``: Kafka's ``TopicPartition`` (``org.apache.kafka.common``), the
key of every per-partition map in mm2py, on the driver and in the tasks alike.

A plain tuple rather than a class: it is hashed and compared in every hot loop of the copy, pickled into every
Spark task, and written as JSON in reports; one alias, declared here only, keeps the name the same everywhere.
"""

from __future__ import annotations

TopicPartition = tuple[str, int]

"""mm2py: Kafka MirrorMaker 2 re-made in Python, with its copy path on Apache Spark.

Packages, from the bottom up (each imports only from those before it; ``make lint`` checks it):
``errors`` and ``secrets`` (shared by all), ``mirror`` (MM2's rules and formats), ``librdkafka`` (the
confluent-kafka client stack), ``config`` (MM2 properties into typed flows), ``wire`` (the batch path's own
Kafka client), ``executor`` (the copy tasks Spark runs), ``control`` (the driver's control plane: plan,
topics, checkpoints, heartbeats, leases), ``metrics``, ``tools`` (lag, MirrorClient, verify), ``engine`` (the
driver's copy rounds and Spark, the only importer of pyspark) and ``cli``.
"""

__version__ = "0.1.0"

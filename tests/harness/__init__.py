"""What the tests, ``bench/`` and ``examples/demo.py`` share: brokers (``kafka_harness`` for tansu,
``real_kafka`` for Apache Kafka in KRaft mode, with ``real_kafka_security`` and ``real_kafka_compaction``),
Kafka's own MirrorMaker 2 (``mirror_maker``), a Spark standalone cluster (``spark_cluster``), a TLS proxy,
key stores, running ``mm2py`` as a user would (``mm2py_cli``, ``flows_helpers``, ``faults``) and one way to
wait for a condition (``polling``).

Imported as ``tests.harness.<module>``, from the repository root (pytest, ``python -m bench.…``,
``python -m examples.demo``), with no change to ``sys.path``.
"""

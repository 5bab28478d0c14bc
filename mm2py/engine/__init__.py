"""The replication engine on the driver: each flow's runner, its copy rounds and Spark.

``run`` (a run's flows, heartbeats and signals), ``flow_thread`` (one flow's thread: its lease taken or stood by
for, its copy, a hand-over to a cut-over), ``driver`` (FlowRunner: one flow from preparation to its last copy),
``copy_rounds`` (CopyRounds: positions, ends and the copy jobs, in rounds or following; ``source_ends``, the end
offsets with partitions whose leader is away left out), ``losses`` (records lost before they were replicated),
``flow_sync`` (MM2's periodic jobs of a flow), ``task_control`` (the endpoint following tasks report to),
``report_bounds`` (what a report may move), ``ranges`` (which offset ranges a copy job takes), ``spec`` (the CopySpec
every task of a flow gets), ``spark`` (the only module that imports pyspark; ``python_daemon`` runs pyspark's worker
daemon by name, on a local run's executor side), ``retry``, ``schedule`` (when the periodic jobs are due),
``unavailable`` (partitions whose leader is away) and ``stats`` (what the live view and the summary show). The copy
tasks themselves run on executors (:mod:`mm2py.executor`).

May import every package below it: ``mm2py.control``, ``mm2py.executor``, ``mm2py.metrics``, ``mm2py.tools.lag`` (lag
for the metrics endpoint), ``mm2py.config``, ``mm2py.mirror``, ``mm2py.librdkafka``.
"""

"""The replication engine: the driver plans batches of offset ranges, Spark tasks copy them.

Only ``mm2py.engine.spark`` imports pyspark; the copy task itself (``mm2py.engine.copy``) is plain Python
that runs inside a Spark Python worker, so it can also be exercised and measured without a JVM.
"""

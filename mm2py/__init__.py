"""mm2py: Kafka MirrorMaker 2 re-made in Python, with its copy path on Apache Spark.

The package is split the way MM2 is: a small client side (config, policies, filters, record formats,
offset translation, lag) that never imports pyspark, and an engine (``mm2py.engine``) that does.
"""

__version__ = "0.1.0"

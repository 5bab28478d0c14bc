"""Whether Spark's own authentication and encryption protect the Kafka credentials a run hands its executors.

Why: every copy task carries its flow's client settings (passwords, JAAS lines, keys) to an executor inside
the task Spark ships, and the driver's task-control token with them. In local mode nothing leaves the machine's
processes; on a cluster (standalone, YARN, Kubernetes) they cross the network, in clear unless Spark
authenticates its processes (``spark.authenticate``) and encrypts their traffic (``spark.network.crypto
.enabled``) and what it spills to local disk (``spark.io.encryption.enabled``, where broadcast task data may
land). All three are off by default in Spark. ``plan`` and ``run`` say so once (docs/security.md says how to
turn them on).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)

# What each protects, in the order a reader should turn them on.
SPARK_SECURITY_KEYS = {
    "spark.authenticate": "Spark's processes do not authenticate each other",
    "spark.network.crypto.enabled": "their RPC traffic, which carries each task, is not encrypted",
    "spark.io.encryption.enabled": "what they write to local disk is not encrypted",
}


def spark_exposure(master: str, conf: Mapping[str, str]) -> list[str]:
    """What is unprotected when a run with ``master`` and the Spark settings ``conf`` ships its tasks: nothing
    for a local master (one machine, its own processes)."""
    if master.strip().lower().startswith("local"):
        return []
    return [why for key, why in SPARK_SECURITY_KEYS.items() if conf.get(key, "false").strip().lower() != "true"]


def warn_if_spark_unprotected(master: str, conf: Mapping[str, str]) -> bool:
    """Log one warning line when the run's Spark is a cluster without its protections (``plan`` calls this once,
    ``run`` once its SparkContext is up, with the settings Spark took from everywhere); True if it did."""
    exposed = spark_exposure(master, conf)
    if not exposed:
        return False
    off = [key for key in SPARK_SECURITY_KEYS if conf.get(key, "false").strip().lower() != "true"]
    on_the_wire = off != ["spark.io.encryption.enabled"]
    log.warning(
        "Spark master %s is a cluster and %s: the Kafka credentials in every copy task %s (%s); set %s "
        "(e.g. mm2py.spark.conf.%s = true), see docs/security.md",
        master.strip(),
        ", ".join(f"{key} is off" for key in off),
        "travel unencrypted between Spark processes" if on_the_wire else "may reach executors' disks unencrypted",
        "; ".join(exposed),
        ", ".join(f"{key}=true" for key in off),
        off[0],
    )
    return True

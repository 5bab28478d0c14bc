"""``mm2py run``: signal handling and Spark settings from the file and the command line."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from mm2py.config import LoadedConfig
from mm2py.engine.driver import FlowStats, run_flows
from mm2py.engine.spark import SparkRunner
from mm2py.heartbeats import heartbeat_flows
from mm2py.metrics import RunMetrics

log = logging.getLogger(__name__)


def run(loaded: LoadedConfig, *, once: bool, master: str | None, deploy_mode: str | None,
        spark_conf: dict[str, str], on_progress: Callable[[list[FlowStats]], None] | None = None,
        metrics: RunMetrics | None = None) -> list[FlowStats]:
    """Replicate until done (``once``) or until SIGTERM/SIGINT, after which the job in flight finishes."""
    first = loaded.flows[0]
    conf = {**dict(first.spark_conf), **spark_conf}
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.warning("received %s: finishing the batch in flight, then stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    names = ", ".join(f.name for f in loaded.flows)

    def start_spark() -> SparkRunner:
        runner = SparkRunner(f"mm2py {names}", master or first.spark_master, deploy_mode or first.spark_deploy_mode,
                             conf)
        # PySpark's SparkContext takes SIGINT over to cancel every job at once; Ctrl-C must finish the batch.
        signal.signal(signal.SIGINT, on_signal)
        return runner

    try:
        return run_flows(
            list(loaded.flows), start_spark,
            once=once, stop=stop, on_progress=on_progress, metrics=metrics,
            heartbeat_pairs=heartbeat_flows(loaded.mm, loaded.flows, loaded.clusters))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

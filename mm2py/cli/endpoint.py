"""The run's HTTP endpoint, as the command line and the file ask for it (``--metrics-port``, ``mm2py.metrics.*``)."""

from __future__ import annotations

import contextlib
import logging

from mm2py.cli import render
from mm2py.config import LoadedConfig
from mm2py.errors import ConfigError, UsageError
from mm2py.metrics.registry import RunMetrics

log = logging.getLogger("mm2py")


def metrics_endpoint(
    loaded: LoadedConfig, option: int | None, metrics: RunMetrics
) -> contextlib.AbstractContextManager[object]:
    """The /metrics, /health and /ready server for the run's lifetime (``--metrics-port`` wins over
    ``mm2py.metrics.port``); a port that cannot be listened on is a usage error, named where it came from."""
    first = loaded.flows[0]
    port = first.metrics_port if option is None else option
    if port == 0:
        return contextlib.nullcontext()
    where = f"--metrics-port {port}" if option is not None else f"mm2py.metrics.port = {port}"
    if port > 65535:
        raise ConfigError(
            "is not a TCP port",
            source=loaded.mm.source,
            line=loaded.mm.line_of("mm2py.metrics.port"),
            key="mm2py.metrics.port",
            value=str(port),
            allowed="1 to 65535, or 0 for no endpoint",
        )
    try:
        endpoint = metrics.serve(first.metrics_host, port, render.redactor.redact)
    except OSError as exc:
        raise UsageError(
            f"{where}: cannot serve /metrics on {first.metrics_host}:{port}: {exc.strerror or exc}"
        ) from None
    log.info("serving /metrics, /health and /ready on http://%s:%d", first.metrics_host, endpoint.port)
    return endpoint

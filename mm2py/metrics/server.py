"""The HTTP endpoint of a run's metrics (driver side): ``/metrics`` served from a daemon thread."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


class MetricsEndpoint:
    """The HTTP server of a run, in a daemon thread; ``close()`` (or leaving the ``with``) stops it."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port: int = self._server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

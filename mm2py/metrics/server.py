"""The HTTP endpoint of a run (driver side): ``/metrics``, ``/health`` and ``/ready``, served from a daemon thread.

``/metrics`` is prometheus-client's own WSGI app (content negotiation, OpenMetrics); ``/health`` and ``/ready``
answer 200 or 503 with one line per flow (:mod:`mm2py.metrics.health`), each line passed through the run's
secret redactor, since a reason may quote a broker's error. Executors never import this module.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from mm2py.metrics.health import RunHealth

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes every few seconds would flood the run's log."""


class MetricsEndpoint:
    """The HTTP server of a run, in a daemon thread; ``close()`` (or leaving the ``with``) stops it."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        health: RunHealth | None = None,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        metrics_app = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if health is not None and path in ("/health", "/ready"):
                ok, lines = health.health() if path == "/health" else health.ready()
                if not lines:
                    lines = ["no flow yet"] if path == "/ready" else []
                    ok = ok and path == "/health"
                body = redact("\n".join(["ok" if ok else "unavailable", *lines]) + "\n").encode()
                status = "200 OK" if ok else "503 Service Unavailable"
                start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
                return [body]
            result: Iterable[bytes] = metrics_app(environ, start_response)
            return result

        class Server(ThreadingWSGIServer):
            """A class per endpoint, as prometheus-client's own start_wsgi_server makes one."""

        # IPv4 or IPv6, as the host names it (0.0.0.0 by default, :: for every IPv6 address).
        Server.address_family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        self._server = make_server(host, port, app, Server, handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-endpoint", daemon=True)
        self._thread.start()
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

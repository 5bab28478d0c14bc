"""The driver's endpoint for following copy tasks: they report what they copied every second and learn whether
their generation of the flow still runs.

Why: in continuous mode a batch-path task follows its partitions for as long as the flow's assignment holds (no
Spark job per trickle, so nothing waits between jobs). The driver still has to show lag, rates and MM2's metrics
while the tasks run, and to end them gracefully — at SIGTERM, when the lease is lost, when the topics change, when
a partition failed — so that each records its progress on the way out. Each flow has a :class:`FlowChannel`; a
Spark job of the flow is one *generation*; ``next_generation`` ends the one running (its tasks learn it at their
next report, finish what they fetched, record progress and return).

A small HTTP server on the driver's address, in a daemon thread: the tasks' executors reach the driver there as
they reach Spark's own driver endpoint. Requests carry the run's random token; anything else is refused.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mm2py.executor.contract import ControlEndpoint

log = logging.getLogger(__name__)

Rows = list[dict[str, Any]]


@dataclass
class FlowChannel:
    """One flow's generations: the one running, and whether the flow still copies at all."""

    flow: str
    url: str
    token: str
    on_report: Callable[[int, Rows, bool], None]  # generation, rows, final
    generation: int = 0
    running: bool = True

    def next_generation(self) -> ControlEndpoint:
        """End the generation that runs (if any) and name the next one."""
        self.generation += 1
        return ControlEndpoint(self.url, self.token, self.generation)

    def end(self) -> None:
        """End the running generation without starting another (the job's tasks stop at their next report)."""
        self.generation += 1

    def stop(self) -> None:
        self.running = False

    def goes_on(self, generation: int) -> bool:
        return self.running and generation == self.generation


class TaskControl:
    """The run's endpoint (``/report``); ``channel(flow)`` gives each flow its own."""

    def __init__(self, host: str, bind_address: str | None = None) -> None:
        """Listen on ``bind_address`` (Spark's ``spark.driver.bindAddress``, when the driver runs behind an
        address translation) or ``host``; the tasks are told ``host``, as Spark tells its executors."""
        self.token = secrets.token_urlsafe(24)
        self.channels: dict[str, FlowChannel] = {}
        self._lock = threading.Lock()
        control = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or "0")
                try:
                    body = json.loads(self.rfile.read(min(length, 64 * 1024 * 1024)))
                    answer = control.handle(body)
                except (ValueError, KeyError, TypeError):
                    self.send_error(400)
                    return
                if answer is None:
                    self.send_error(403)
                    return
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("task control: " + format, *args)

        self.server = ThreadingHTTPServer((bind_address or host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}/report"
        self._thread = threading.Thread(target=self.server.serve_forever, name="mm2py-task-control", daemon=True)
        self._thread.start()

    def channel(self, flow: str, on_report: Callable[[int, Rows, bool], None]) -> FlowChannel:
        with self._lock:
            self.channels[flow] = FlowChannel(flow, self.url, self.token, on_report)
            return self.channels[flow]

    def handle(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """One task's report: hand its rows to the flow, answer whether its generation goes on (None: refused)."""
        if not secrets.compare_digest(str(body.get("token", "")), self.token):
            return None
        channel = self.channels.get(str(body["flow"]))
        if channel is None:
            return None
        generation = int(body["generation"])
        channel.on_report(generation, list(body["rows"]), bool(body.get("final", False)))
        return {"run": channel.goes_on(generation)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

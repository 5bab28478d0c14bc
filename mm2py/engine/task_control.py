"""The driver's endpoint for following copy tasks: they report what they copied every second and learn whether
their generation of the flow still runs.

Why: in continuous mode a batch-path task follows its partitions for as long as the flow's assignment holds (no
Spark job per trickle, so nothing waits between jobs). The driver still has to show lag, rates and MM2's metrics
while the tasks run, and to end them gracefully — at SIGTERM, when the lease is lost, when the topics change, when
a partition failed — so that each records its progress on the way out. Each flow has a :class:`FlowChannel`; a
Spark job of the flow is one *generation*; ``next_generation`` ends the one running (its tasks learn it at their
next report, finish what they fetched, record progress and return).

A small HTTP server on the driver's address, in daemon threads: the tasks' executors reach the driver there as
they reach Spark's own driver endpoint, so anyone who reaches the driver's address reaches it too. Hence the
doors: the run's random token comes in a header and is compared (in constant time) before a byte of the body is
read; the body is capped by what a report of the flow's partitions can weigh; a silent socket is dropped after
``IDLE_TIMEOUT_S`` and every request after ``REQUEST_DEADLINE_S``; at most ``HANDLERS`` requests are served at
once, the others get 503 at once. What a report may change is checked by its reader
(:meth:`mm2py.engine.copy_rounds.CopyRounds.on_report`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mm2py.executor.contract import FLOW_HEADER, TOKEN_HEADER, ControlEndpoint

log = logging.getLogger(__name__)

Rows = list[dict[str, Any]]

# A task waits 2 s for its answer (executor/driver_link.py): a socket silent for longer serves no task.
IDLE_TIMEOUT_S = 3.0
REQUEST_DEADLINE_S = 10.0  # a whole request, however slowly it trickles in
# Each task reports once a second and is answered in milliseconds, so even hundreds of tasks have a few
# requests in flight; beyond 64 something else holds the sockets, and a task missing a report loses nothing.
HANDLERS = 64
# A row names its partition (topic names: 249 ASCII characters at most), six counts, a measurement (two
# aliases, the topic twice, eleven numbers) and at most a failure message (driver_link caps it at 1,000
# characters, 4 bytes each in UTF-8): under 6 KiB; 8 KiB leaves room. 16 KiB for the envelope.
ROW_BYTES = 8 * 1024
ENVELOPE_BYTES = 16 * 1024
REFUSALS_LOGGED_EVERY_S = 60.0


def body_limit(partitions: int) -> int:
    """The largest report a task of a flow with ``partitions`` partitions can send: one row per partition."""
    return ENVELOPE_BYTES + max(partitions, 1) * ROW_BYTES


@dataclass
class FlowChannel:
    """One flow's generations: the one running, and whether the flow still copies at all."""

    flow: str
    url: str
    token: str = field(repr=False)
    on_report: Callable[[int, Rows, bool], None]  # generation, rows, final
    partitions: Callable[[], int] = lambda: 1  # how many partitions the flow has now (bounds a report)
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


class _Refusals:
    """Refused requests, logged at most once a minute with how many there were: someone probing the endpoint
    must not flood the driver's log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._logged = -REFUSALS_LOGGED_EVERY_S

    def note(self, peer: str, why: str) -> None:
        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._logged < REFUSALS_LOGGED_EVERY_S:
                return
            count, self._count, self._logged = self._count, 0, now
        log.warning("task control: refused %d request(s) since the last such line; the latest from %s: %s",
                    count, peer, why)  # fmt: skip


class _Server(ThreadingHTTPServer):
    """A threading HTTP server that serves at most ``HANDLERS`` requests at once and answers 503 beyond."""

    daemon_threads = True
    request_queue_size = 128  # connections the kernel queues while the accepting thread hands them out

    def __init__(self, address: tuple[str, int], control: TaskControl) -> None:
        self.control = control
        self.slots = threading.BoundedSemaphore(HANDLERS)
        super().__init__(address, _ReportHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.control.refusals.note(str(client_address[0]), f"{HANDLERS} requests already being served")
            try:
                request.setblocking(False)  # the accepting thread never waits on a client
                request.send(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("task control: a request from %s failed", client_address, exc_info=True)


class _ReportHandler(BaseHTTPRequestHandler):
    """One task's report: ``POST /report`` with the token and the flow in headers and the rows as JSON."""

    server: _Server
    timeout = IDLE_TIMEOUT_S  # set on the socket: a read that waits longer fails

    def setup(self) -> None:
        super().setup()
        # Per-read timeouts do not stop a client that sends a byte now and then: cut the socket at the deadline.
        self._deadline = threading.Timer(REQUEST_DEADLINE_S, self._cut)
        self._deadline.daemon = True
        self._deadline.start()

    def finish(self) -> None:
        self._deadline.cancel()
        super().finish()

    def _cut(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def do_POST(self) -> None:
        self.close_connection = True
        control = self.server.control
        peer = str(self.client_address[0])
        if not control.authentic(self.headers.get(TOKEN_HEADER, "")):
            control.refusals.note(peer, "no token or a wrong one")
            self.send_error(401)
            return
        channel = control.channels.get(urllib.parse.unquote(self.headers.get(FLOW_HEADER, "")))
        if channel is None:
            self.send_error(404, "no such flow")
            return
        length = _content_length(self.headers.get("Content-Length"))
        limit = body_limit(channel.partitions())
        if length is None or length > limit:
            control.refusals.note(peer, f"Content-Length {self.headers.get('Content-Length')!r}, at most {limit}")
            self.send_error(411 if length is None else 413)
            return
        try:
            body = json.loads(self.rfile.read(length))
            answer = control.handle(channel, body)
        except (ValueError, KeyError, TypeError, RecursionError):
            self.send_error(400)
            return
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("task control: " + format, *args)


def _content_length(value: str | None) -> int | None:
    """A body's declared length, or None when it is missing or not a length (``-1``, ``1e9``, ``0x10``, digits
    other than ASCII's, more digits than any body could need)."""
    text = (value or "").strip()
    if not text or len(text) > 18 or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


class TaskControl:
    """The run's endpoint (``/report``); ``channel(flow)`` gives each flow its own."""

    def __init__(self, host: str, bind_address: str | None = None) -> None:
        """Listen on ``bind_address`` (Spark's ``spark.driver.bindAddress``, when the driver runs behind an
        address translation) or ``host``; the tasks are told ``host``, as Spark tells its executors."""
        self.token = secrets.token_urlsafe(24)
        self.channels: dict[str, FlowChannel] = {}
        self.refusals = _Refusals()
        self._lock = threading.Lock()
        self.server = _Server((bind_address or host, 0), self)
        self.url = f"http://{host}:{self.server.server_address[1]}/report"
        self._thread = threading.Thread(target=self.server.serve_forever, name="mm2py-task-control", daemon=True)
        self._thread.start()

    def channel(
        self, flow: str, on_report: Callable[[int, Rows, bool], None], partitions: Callable[[], int] | None = None
    ) -> FlowChannel:
        with self._lock:
            channel = FlowChannel(flow, self.url, self.token, on_report)
            if partitions is not None:
                channel.partitions = partitions
            self.channels[flow] = channel
            return channel

    def authentic(self, token: str) -> bool:
        """Whether a request carries the run's token (compared in constant time)."""
        return secrets.compare_digest(token.encode("utf-8", "replace"), self.token.encode())

    def handle(self, channel: FlowChannel, body: dict[str, Any]) -> dict[str, Any]:
        """An authentic report of ``channel``'s flow: hand its rows to the flow, answer whether its generation
        goes on."""
        generation = int(body["generation"])
        rows = body["rows"]
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise TypeError("rows must be a list of objects")
        channel.on_report(generation, rows, bool(body.get("final", False)))
        return {"run": channel.goes_on(generation)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

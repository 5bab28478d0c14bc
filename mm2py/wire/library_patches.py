"""Changes to kafka-python 3.0.12's receive and send paths and its event loop, for exactly that version (any other
keeps its own code).

- It reads a plain TCP socket 4 KiB per ``recv()`` call (the chunk size is fixed), so a multi-megabyte Fetch
  response took thousands of calls, each a Python-level loop turn. Measured in one process copying 500k records
  of 1 KB: 18-22% of the copier's CPU. The transport's read is replaced by the same loop with a larger chunk;
  TLS transports keep theirs (a TLS record holds at most 16 KiB).
- When one read took bytes and then met the peer's close, the transport aborted with the error and dropped the
  bytes. A broker that refuses a SASL login answers with the reason and closes the connection at once, so the
  answer was lost about as often as not and the refusal looked like a broken connection, retried until the
  deadline. Bytes read before a close are now handed on first and the close is met by the next read (an
  EOF stays readable), as Java's Selector closes a channel in ``CloseMode.GRACEFUL``: "process outstanding
  buffered receives, notify disconnect" (clients/.../common/network/Selector.java), for TCP and TLS alike.
- Its event loop registers a socket for each I/O wait and looks it up first. When the socket is not registered
  (the end of its last wait unregistered it), the standard library's selector answers with a KeyError whose
  message holds the socket's ``repr``, twice, which asks the kernel for both of the socket's addresses. Profiled
  on a following copy task at 10,000 records/s: 11 of its 263 samples (about 4 %). The descriptor is now looked
  up in the selector's own table (CPython's ``_fd_to_key``), which answers a miss without an exception; a socket
  registered for the other direction goes to the library's look-up and modify, which find it without one.
  (Trying ``register`` first is no cure: a socket waiting to write is mostly registered for reading already, and
  ``register`` answers that with the same kind of message.) Its trace lines (level 5, below DEBUG) keep their
  logger and level, with one Python call fewer each: they are logged several times per loop turn, and each call
  was another 3 % of those samples.
- Its transport's ``write`` never writes: it queues the bytes and starts a write task, which waits for the socket
  to be writable (registering it, one loop turn) and sends in the next turn (unregistering it). Every request
  paid a task and two loop turns, though a socket with an empty send buffer is nearly always writable: counted
  on a following copy task at 10,000 records/s, 530 loop turns a second for 135 requests. A write with nothing
  queued before it now goes to the socket at once, and only what the socket does not take goes through the
  library's task, as asyncio's selector transport writes (``_SelectorSocketTransport.write``: send first, buffer
  the rest). Java's ``Selector`` instead sets write interest and writes in its next poll (``KafkaChannel.setSend``,
  clients/.../common/network), one cheap select there; the bytes sent and their order are the same. TCP and TLS
  alike: both send through the transport's ``_sock_send``, which leaves what the socket refused queued. A send
  that fails aborts the connection in the loop's next turn, where the library's task would have.

Imported by :mod:`mm2py.wire.connection` before any connection is made.
"""

from __future__ import annotations

import functools
import logging
import selectors
import time
from typing import Any

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
import kafka.net.selector as net_selector  # type: ignore[import-untyped]
import kafka.version  # type: ignore[import-untyped]
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

RECV_CHUNK_BYTES = 256 * 1024
PATCHED_VERSION = "3.0.12"
TRACE_LEVEL = 5  # kafka.net.selector's log_trace level


def _sock_recv(self: Any) -> tuple[bytes, Exception | None]:
    """KafkaTCPTransport._sock_recv of kafka-python 3.0.12 with RECV_CHUNK_BYTES per call; errors as there,
    but only when nothing was read before them (see the module docstring)."""
    received: list[bytes] = []
    error: Exception | None = None
    while True:
        try:
            data = self._sock.recv(RECV_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            break
        except BaseException as exc:
            if received:
                break  # the next read meets the error again
            log.exception("%s: error receiving network data, closing socket", self)
            error = kafka_errors.KafkaConnectionError(exc)
            break
        if not data:
            if received:
                break  # the next read meets the close again
            log.error("%s: socket disconnected", self)
            error = kafka_errors.KafkaConnectionError("socket disconnected")
            break
        received.append(data)
    return b"".join(received), error


def _received_before_the_close(receive: Any) -> Any:
    """A transport's read that hands on the bytes read before an error; the next read reports the error."""

    def read(self: Any) -> tuple[bytes, Exception | None]:
        data, error = receive(self)
        return (data, None) if data else (data, error)

    read.__wrapped__ = receive  # type: ignore[attr-defined]
    return read


def _registering_by_descriptor(register_event: Any) -> Any:
    """NetworkSelector.register_event that registers a socket not yet registered without a look-up by exception
    (see the module docstring); one already registered goes to the library's ``register_event``."""

    def register(self: Any, fileobj: Any, event: int, task: Any) -> None:
        registered = getattr(self._selector, "_fd_to_key", None)  # CPython's selectors: fd -> key, a plain dict
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        # Registered (for the other direction), or closed (-1; the library finds a closed socket still registered
        # by identity): the library's look-up and modify.
        if registered is None or fd < 0 or fd in registered:
            register_event(self, fileobj, event, task)
            return
        net_selector.log_trace("net.register_event: %s, %s, %s", fileobj, event, task)
        task = task if isinstance(task, net_selector.Task) else net_selector.Task(task)
        self._selector.register(fileobj, event, (task, None) if event == selectors.EVENT_READ else (None, task))

    register.__wrapped__ = register_event  # type: ignore[attr-defined]
    return register


def _writing_at_once(write: Any) -> Any:
    """KafkaTCPTransport.write (TLS's inherits it) that sends at once when nothing is queued or being written (see
    the module docstring); the library's ``write`` queues behind what waits, and refuses a closed transport."""

    def write_now(self: Any, data: Any) -> None:
        if self._writing or self._write_buffer or self._closed or not self._write or not data or self._sock is None:
            write(self, data)
            return
        self._write_buffer.append(data)
        sent, error = self._sock_send()
        if sent:
            self.last_write = time.monotonic()
            if self._protocol is not None and self._protocol._sensors:
                self._protocol._sensors.bytes_sent.record(sent)
        if error is not None:
            self._net.call_soon(lambda: self.abort(error=error))  # where the library's write task aborts
        elif self._write_buffer:  # the rest once the socket is writable: the library's write task
            self._writing = True
            self._write_task = self._net.call_soon(self._write_to_sock)

    write_now.__wrapped__ = write  # type: ignore[attr-defined]
    return write_now


def apply() -> bool:
    """Patch the pinned version once; False (nothing changed) for any other."""
    if kafka.version.__version__ != PATCHED_VERSION:
        return False
    if KafkaTCPTransport._sock_recv is not _sock_recv:
        KafkaTCPTransport._sock_recv = _sock_recv
        KafkaSSLTransport._sock_recv = _received_before_the_close(KafkaSSLTransport._sock_recv)
        net_selector.NetworkSelector.register_event = _registering_by_descriptor(
            net_selector.NetworkSelector.register_event
        )
        net_selector.log_trace = functools.partial(net_selector.log.log, TRACE_LEVEL)
        KafkaTCPTransport.write = _writing_at_once(KafkaTCPTransport.write)
    return True

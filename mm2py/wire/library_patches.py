"""Two changes to kafka-python 3.0.12's receive path, for exactly that version (any other keeps its own code).

- It reads a plain TCP socket 4 KiB per ``recv()`` call (the chunk size is fixed), so a multi-megabyte Fetch
  response took thousands of calls, each a Python-level loop turn. Measured in one process copying 500k records
  of 1 KB: 18-22% of the copier's CPU. The transport's read is replaced by the same loop with a larger chunk;
  TLS transports keep theirs (a TLS record holds at most 16 KiB).
- ``FetchResponse.decode`` took ``read()`` of the receive buffer: a slice and then ``bytes()`` of the slice,
  two copies of every fetched byte before the record sets are cut out. It now decodes a view of the unread
  rest, which is what decode makes of a ``bytes`` argument; nothing reads or writes the buffer after decode.

Imported by :mod:`mm2py.wire.connection` before any connection is made.
"""

from __future__ import annotations

import logging
from typing import Any

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
import kafka.version  # type: ignore[import-untyped]
from kafka.net.transport import KafkaTCPTransport  # type: ignore[import-untyped]
from kafka.protocol.consumer import FetchResponse  # type: ignore[import-untyped]
from kafka.protocol.frame import KafkaBytes  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

RECV_CHUNK_BYTES = 256 * 1024
PATCHED_VERSION = "3.0.12"


def _sock_recv(self: Any) -> tuple[bytes, Exception | None]:
    """KafkaTCPTransport._sock_recv of kafka-python 3.0.12 with RECV_CHUNK_BYTES per call; errors as there."""
    received: list[bytes] = []
    error: Exception | None = None
    while True:
        try:
            data = self._sock.recv(RECV_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            break
        except BaseException as exc:
            log.exception("%s: error receiving network data, closing socket", self)
            error = kafka_errors.KafkaConnectionError(exc)
            break
        if not data:
            log.error("%s: socket disconnected", self)
            error = kafka_errors.KafkaConnectionError("socket disconnected")
            break
        received.append(data)
    return b"".join(received), error


_decode_fetch_response = FetchResponse.decode.__func__


def _decode_fetch_in_place(cls: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
    """FetchResponse.decode over a view of the received frame instead of a copy of it."""
    if isinstance(data, KafkaBytes):
        data = memoryview(data)[data.tell() :]
    return _decode_fetch_response(cls, data, *args, **kwargs)


def apply() -> bool:
    """Patch the pinned version once; False (nothing changed) for any other."""
    if kafka.version.__version__ != PATCHED_VERSION:
        return False
    if KafkaTCPTransport._sock_recv is not _sock_recv:
        KafkaTCPTransport._sock_recv = _sock_recv
        FetchResponse.decode = classmethod(_decode_fetch_in_place)
    return True

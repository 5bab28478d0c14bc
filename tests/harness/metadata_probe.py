"""Which brokers one node itself lists: a Metadata request sent to that node's address and nowhere else.

No client library answers this: librdkafka drops its bootstrap handle once a first answer named the brokers and
sends what was in flight there to any of them, and kafka-python's client may ask a broker it learned meanwhile.
A test harness needs the node's own view: right after a cluster starts, or a node restarts, a node whose metadata
image is behind leaves out brokers the others list, and a librdkafka client that asks it drops the handles of the
brokers left out (librdkafka PR 4557), failing requests in flight there with ``_DESTROY_BROKER``.

Metadata v4 over PLAINTEXT, laid out as Kafka's ``MetadataRequest.json`` and ``MetadataResponse.json``
(``clients/src/main/resources/common/message``): a request header v1 (api key, version, correlation id, client
id), an empty topic array (brokers only) and ``allow_auto_topic_creation``; the answer starts with the
correlation id, ``throttle_time_ms`` and the brokers (node id, host, port, nullable rack).
"""

from __future__ import annotations

import socket
import struct

_METADATA = 3
_VERSION = 4
_CORRELATION_ID = 1
_CLIENT_ID = b"harness-probe"


def brokers_listed_by(address: str, timeout_s: float = 2.0) -> frozenset[int]:
    """The node ids of the live brokers in the Metadata answer of the node at ``address`` (host:port, PLAINTEXT).
    Raises OSError when the node does not answer."""
    host, port = address.rsplit(":", 1)
    header = struct.pack(">hhih", _METADATA, _VERSION, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    request = header + struct.pack(">i?", 0, False)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        conn.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _read(conn, 4))
        answer = _read(conn, size)
    correlation_id, _throttle, count = struct.unpack_from(">iii", answer, 0)
    if correlation_id != _CORRELATION_ID:
        raise OSError(f"{address} answered correlation id {correlation_id}, not {_CORRELATION_ID}")
    offset, ids = 12, set()
    for _ in range(count):
        node_id, host_size = struct.unpack_from(">ih", answer, offset)
        offset += 6 + host_size + 4  # the host, then the port
        (rack_size,) = struct.unpack_from(">h", answer, offset)
        offset += 2 + max(rack_size, 0)  # -1: no rack
        ids.add(node_id)
    return frozenset(ids)


def _read(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("the broker closed the connection before its answer was complete")
        data += chunk
    return bytes(data)

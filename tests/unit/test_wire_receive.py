"""The batch path's socket reads and writes: large chunks on plain TCP, the bytes read before a close handed on
before the close, and a request written at once (mm2py.wire.library_patches, applied when mm2py.wire.connection is
imported), and a poll that waits at least as long as asked."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Iterator

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
import kafka.net.selector as net_selector  # type: ignore[import-untyped]
import pytest
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport  # type: ignore[import-untyped]

from mm2py.wire import library_patches as wire
from mm2py.wire.connection import KafkaConnection, wire_error  # importing the connection applies the patches
from mm2py.wire.errors import NETWORK_EXCEPTION, REQUEST_TIMED_OUT, UNSUPPORTED_VERSION


class FakeSocket:
    def __init__(self, data: bytes, then: BaseException | None = None) -> None:
        self.data, self.then, self.asked = data, then, []

    def getpeername(self) -> tuple[str, int]:  # the transport names its peer in log lines: none here
        raise OSError("not connected")

    def recv(self, size: int) -> bytes:
        self.asked.append(size)
        if not self.data:
            if self.then is not None:
                raise self.then
            return b""  # the peer closed
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


def receive(sock: FakeSocket) -> tuple[bytes, Exception | None]:
    return KafkaTCPTransport(None, sock, host="broker")._sock_recv()  # type: ignore[no-any-return]


def test_plain_tcp_reads_in_large_chunks_until_the_socket_would_block() -> None:
    assert KafkaTCPTransport._sock_recv is wire._sock_recv  # the pinned kafka-python version
    assert KafkaSSLTransport._sock_recv is not wire._sock_recv  # TLS keeps the library's read
    payload = bytes(range(256)) * 4096  # 1 MiB
    sock = FakeSocket(payload, then=BlockingIOError())
    data, error = receive(sock)
    assert error is None and data == payload
    assert set(sock.asked) == {wire.RECV_CHUNK_BYTES} and len(sock.asked) == len(payload) // wire.RECV_CHUNK_BYTES + 1


def test_bytes_read_before_a_close_or_an_error_are_handed_on_and_the_next_read_reports_it() -> None:
    # A broker that refuses a login writes its reason and closes at once: the reason must reach the protocol.
    closing = FakeSocket(b"abc")
    assert receive(closing) == (b"abc", None)
    data, error = receive(closing)
    assert data == b"" and isinstance(error, kafka_errors.KafkaConnectionError) and "disconnected" in str(error)
    failing = FakeSocket(b"abc", then=ConnectionResetError("reset"))
    assert receive(failing) == (b"abc", None)
    data, error = receive(failing)
    assert data == b"" and isinstance(error, kafka_errors.KafkaConnectionError) and "reset" in str(error)


def test_the_tls_read_hands_on_what_it_read_before_the_close_too() -> None:
    def library_read(_self: object) -> tuple[bytes, Exception | None]:
        return answers.pop(0)

    closed = kafka_errors.KafkaConnectionError("socket disconnected")
    answers: list[tuple[bytes, Exception | None]] = [(b"abc", closed), (b"", closed)]
    read = wire._received_before_the_close(library_read)
    assert read(None) == (b"abc", None) and read(None) == (b"", closed)
    assert KafkaSSLTransport._sock_recv.__wrapped__ is not None  # applied to the pinned version's TLS transport


def test_the_library_s_failures_become_retriable_lost_connections_where_a_new_leader_fixes_them() -> None:
    """A request to a broker that a Metadata answer no longer lists raises UnknownBrokerIdError in the library,
    which counts it as permanent; for the batch path it is a broker that died or left: retriable, and a metadata
    refresh names the new leader. A request timeout and a closed connection are retriable too."""
    gone = wire_error(kafka_errors.UnknownBrokerIdError(2), 2)
    assert gone.kind is NETWORK_EXCEPTION and gone.retriable and gone.invalid_metadata
    timeout = wire_error(kafka_errors.RequestTimedOutError("after 30000 ms"), 1)
    assert timeout.kind is REQUEST_TIMED_OUT and timeout.retriable
    closed = wire_error(kafka_errors.KafkaConnectionError("socket disconnected"), 1)
    assert closed.kind is NETWORK_EXCEPTION and closed.retriable
    assert not wire_error(kafka_errors.IncompatibleBrokerVersion("no Produce v3"), 1).retriable
    assert wire_error(kafka_errors.IncompatibleBrokerVersion("x"), 1).kind is UNSUPPORTED_VERSION


class CountedSocket(socket.socket):
    """A socket that counts how often it is formatted (each ``repr`` asks the kernel for both addresses)."""

    reprs = 0

    def __repr__(self) -> str:
        CountedSocket.reprs += 1
        return super().__repr__()


def test_the_event_loop_registers_a_socket_without_formatting_it_and_keeps_both_directions_apart() -> None:
    """kafka-python's loop registers a socket at every I/O wait: the patched registration must not format the
    socket (the library's look-up by exception did, twice a wait), and must still pair a reader and a writer
    of the same socket as the library does."""
    assert net_selector.NetworkSelector.register_event.__wrapped__ is not None  # applied to the pinned version
    loop = net_selector.NetworkSelector()
    near, far = socket.socketpair()
    sock = CountedSocket(fileno=near.detach())
    try:

        def waiting() -> Iterator[None]:
            yield

        reader, writer = net_selector.Task(waiting()), net_selector.Task(waiting())
        CountedSocket.reprs = 0
        loop.register_event(sock, selectors.EVENT_READ, reader)
        assert CountedSocket.reprs == 0
        loop.register_event(sock, selectors.EVENT_WRITE, writer)  # the other direction: the library's modify
        assert CountedSocket.reprs == 0
        key = loop._selector.get_key(sock)
        assert key.events == selectors.EVENT_READ | selectors.EVENT_WRITE and key.data == (reader, writer)
        loop.unregister_event(sock, selectors.EVENT_READ)
        assert loop._selector.get_key(sock).data == (None, writer)
        loop.unregister_event(sock, selectors.EVENT_WRITE)
        CountedSocket.reprs = 0
        loop.register_event(sock, selectors.EVENT_READ, reader)  # registered again after both waits ended
        assert CountedSocket.reprs == 0 and loop._selector.get_key(sock).data == (reader, None)
        with pytest.raises(RuntimeError, match="EVENT_READ already registered"):  # the library's own check
            loop.register_event(sock, selectors.EVENT_READ, writer)
    finally:
        loop.close()
        sock.close()
        far.close()


def test_the_event_loop_s_trace_lines_keep_their_logger_and_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(wire.TRACE_LEVEL, logger="kafka.net.selector")
    net_selector.log_trace("poll: %s", "enter")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("kafka.net.selector", wire.TRACE_LEVEL, "poll: enter")
    ]


class SendingSocket:
    """A socket whose send buffer takes ``room`` bytes (None: all), then would block, or fails with ``error``."""

    def __init__(self, room: int | None = None, error: BaseException | None = None) -> None:
        self.room, self.error, self.sent = room, error, bytearray()

    def getpeername(self) -> tuple[str, int]:
        raise OSError("not connected")

    def send(self, data: bytes | memoryview) -> int:
        if self.error is not None:
            raise self.error
        take = len(data) if self.room is None else min(self.room, len(data))
        if take == 0:
            raise BlockingIOError()
        if self.room is not None:
            self.room -= take
        self.sent += bytes(data[:take])
        return take

    def shutdown(self, how: int) -> None:
        pass

    def close(self) -> None:
        pass


class LoopCalls:
    """What a transport hands its event loop: the tasks it asks to run in the loop's next turn."""

    def __init__(self) -> None:
        self.soon: list[object] = []

    def call_soon(self, task: object) -> object:
        self.soon.append(task)
        return task

    def unregister_event(self, fileobj: object, events: int) -> None:
        pass


def transport(sock: SendingSocket) -> tuple[KafkaTCPTransport, LoopCalls]:
    loop = LoopCalls()
    return KafkaTCPTransport(loop, sock, host="broker"), loop


def test_a_request_goes_to_the_socket_at_once_without_a_write_task_or_a_loop_turn() -> None:
    assert KafkaTCPTransport.write.__wrapped__ is not None  # applied to the pinned version
    sock = SendingSocket()
    tcp, loop = transport(sock)
    tcp.last_write = 0.0
    tcp.write(b"request-1")
    tcp.write(b"request-2")
    assert bytes(sock.sent) == b"request-1request-2" and loop.soon == []
    assert not tcp._writing and not tcp._write_buffer and tcp.last_write > 0.0


def test_what_the_socket_does_not_take_goes_out_through_the_library_s_write_task_in_order() -> None:
    sock = SendingSocket(room=4)
    tcp, loop = transport(sock)
    tcp.write(b"request-1")
    assert bytes(sock.sent) == b"requ" and tcp._writing and len(loop.soon) == 1  # the library's write task
    tcp.write(b"request-2")  # queued behind the rest of request-1: no second task, nothing sent out of order
    assert bytes(sock.sent) == b"requ" and len(loop.soon) == 1
    assert b"".join(bytes(chunk) for chunk in tcp._write_buffer) == b"est-1request-2"


def test_a_send_that_fails_aborts_the_connection_in_the_loop_s_next_turn_as_the_library_does() -> None:
    tcp, loop = transport(SendingSocket(error=ConnectionResetError("reset by peer")))
    lost: list[BaseException | None] = []
    tcp._protocol = type("Protocol", (), {"_sensors": None, "connection_lost": lambda self, e: lost.append(e)})()
    tcp.write(b"request")  # not raised into the sender
    assert not tcp.is_closing() and len(loop.soon) == 1
    abort = loop.soon[0]
    assert callable(abort)
    abort()
    assert tcp.is_closing() and len(lost) == 1 and "reset by peer" in str(lost[0])
    with pytest.raises(RuntimeError, match="closed for writes"):  # the library's refusal after a close
        tcp.write(b"again")


def test_a_poll_waits_the_whole_millisecond_it_was_asked_for_not_less() -> None:
    # Rounded down, a wait under a millisecond would not wait at all (a caller waiting for a time would spin) and a
    # longer one would end before the time it was asked for.
    asked: list[int] = []

    class Client:
        def poll(self, timeout_ms: int) -> None:
            asked.append(timeout_ms)

    connection = KafkaConnection.__new__(KafkaConnection)
    connection._client = Client()
    for seconds in (0.0, 0.0008, 0.0176, 0.5, -1.0):
        connection.poll(seconds)
    assert asked == [0, 1, 18, 500, 0]

"""A record-path Python worker's cached clients: one per settings, reused by the tasks it runs, and closed as a
task starts once no task has asked for them in ``IDLE_CLOSE_S`` (a stopped flow or a cluster gone leaves no client
reconnecting for the rest of the worker's life). Real confluent-kafka clients, aimed at a port nothing listens on:
creating and closing one needs no broker."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from mm2py.librdkafka import clients

GONE = {"bootstrap.servers": "127.0.0.1:1", "group.id": "client-cache-gone", "enable.auto.commit": "false"}
KEPT = {"bootstrap.servers": "127.0.0.1:1", "group.id": "client-cache-kept", "enable.auto.commit": "false"}
PRODUCER = {"bootstrap.servers": "127.0.0.1:1", "client.id": "client-cache-producer"}


def test_clients_no_task_asked_for_in_the_idle_time_are_closed_and_the_others_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(clients, "time", SimpleNamespace(monotonic=lambda: clock.now))
    gone, producer = clients.cached_consumer(GONE), clients.cached_producer(PRODUCER)
    assert clients.cached_consumer(GONE) is gone  # reused while asked for
    clock.now += clients.IDLE_CLOSE_S / 2
    kept = clients.cached_consumer(KEPT)
    try:
        clock.now += clients.IDLE_CLOSE_S / 2 + 1
        assert clients.close_idle() == 2
        assert clients.cached_consumer(KEPT) is kept
        assert clients.cached_consumer(GONE) is not gone and clients.cached_producer(PRODUCER) is not producer
        assert clients.close_idle() == 0  # each was just asked for
    finally:
        clients.drop_consumer(GONE)
        clients.drop_consumer(KEPT)
        clients.drop_producer(PRODUCER)


def test_a_task_never_waits_for_an_idle_client_whose_close_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka's consumer close can wait without bound for a cluster that is gone: the task that starts goes on,
    and the client is closed beside it."""
    release, closed = threading.Event(), threading.Event()

    class StuckConsumer:
        def close(self) -> None:
            release.wait(30)
            closed.set()

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(clients, "time", SimpleNamespace(monotonic=lambda: clock.now))
    key = clients._key({"bootstrap.servers": "127.0.0.1:1", "group.id": "client-cache-stuck"})
    with clients._lock:
        clients._consumers[key] = StuckConsumer()  # type: ignore[assignment]
        clients._last_used[key] = clock.now
    clock.now += clients.IDLE_CLOSE_S + 1
    assert clients.close_idle() == 1  # returned while the close still waits
    assert not closed.is_set() and key not in clients._consumers
    release.set()
    assert closed.wait(10)


class _LastWords:
    """A client as librdkafka's log queue makes it: the lines it queued since it was last polled reach its
    ``logger`` when it is next polled, flushed or closed."""

    def __init__(self, conf: dict[str, object]) -> None:
        self.logger: Any = conf["logger"]

    def _serve(self) -> None:
        self.logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#client-1", "Connect to 127.0.0.1:1 failed")

    def poll(self, timeout: float = 0) -> int:
        self._serve()
        return 0

    def flush(self, timeout: float = 0) -> int:
        self._serve()
        return 0

    def close(self) -> None:
        self._serve()


def test_an_idle_client_s_queued_lines_are_served_at_debug_when_it_is_closed_and_at_their_level_before(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The close of a client no task asked for in the idle time serves every line librdkafka queued since, about
    brokers no task uses (a flow that ended, a cluster gone): they must not land among the lines of the task that
    starts then. A client in use, or one a caller drops, keeps its lines' level."""
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(clients, "time", SimpleNamespace(monotonic=lambda: clock.now))
    monkeypatch.setattr(clients, "Consumer", _LastWords)
    monkeypatch.setattr(clients, "Producer", _LastWords)
    caplog.set_level(logging.DEBUG, logger="mm2py.librdkafka")
    idle = clients.cached_consumer(GONE)
    clients.cached_producer(PRODUCER)
    clients.cached_consumer(KEPT)
    idle.poll(0)
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    caplog.clear()
    clients.drop_consumer(KEPT)  # a caller done with its cluster: its lines are still its work's
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    caplog.clear()
    clock.now += clients.IDLE_CLOSE_S + 1
    closing = set(threading.enumerate())
    assert clients.close_idle() == 2
    for thread in set(threading.enumerate()) - closing:
        thread.join(10)
    assert sorted(r.levelno for r in caplog.records) == [logging.DEBUG, logging.DEBUG]
    ours = {clients._key(settings) for settings in (GONE, KEPT, PRODUCER)}
    assert not [key for _kind, key in clients._logs if key in ours]  # forgotten with their clients

"""The batch path's target connection can be woken (mm2py.wire.connection.KafkaConnection.wakeup): the fetch
thread ends the task's thread's wait for its sender's answers when it hands records over. No broker: a poll with
nothing to serve waits its whole timeout unless woken."""

from __future__ import annotations

import threading
import time

from mm2py.client_settings import ClientSettings
from mm2py.wire.connection import KafkaConnection


def test_a_poll_in_one_thread_ends_when_another_wakes_it() -> None:
    connection = KafkaConnection("target", ClientSettings(bootstrap_servers=("127.0.0.1:9",)))
    try:
        started = time.monotonic()
        connection.poll(0.3)
        quiet = time.monotonic() - started
        waker = threading.Timer(0.2, connection.wakeup)
        waker.start()
        started = time.monotonic()
        connection.poll(30.0)
        woken = time.monotonic() - started
        waker.join()
    finally:
        connection.close()
    assert quiet >= 0.25, quiet  # nothing to serve: the poll waits its timeout
    assert woken < 10.0, woken  # not the 30 s asked for

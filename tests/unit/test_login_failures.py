"""The batch path's watch on one client's connections for a refused login (mm2py.wire.login_failures): every
connection the library hands out is watched, each once however many requests go through it."""

from __future__ import annotations

from typing import Any

import kafka.errors as kafka_errors  # type: ignore[import-untyped]
from kafka.future import Future  # type: ignore[import-untyped]

from mm2py.wire.login_failures import LoginFailures


class Connection:
    def __init__(self, node_id: Any) -> None:
        self.node_id, self.init_future = node_id, Future()


class Manager:
    """Hands out one connection per node, as the library's connection manager does until it is replaced."""

    def __init__(self) -> None:
        self.conns: dict[Any, Connection] = {}

    def get_connection(self, node_id: Any) -> Connection:
        return self.conns.setdefault(node_id, Connection(node_id))


def test_each_connection_is_watched_once_and_a_new_one_after_a_reconnect_too() -> None:
    manager = Manager()
    login = LoginFailures("source", "SCRAM-SHA-512", manager)
    first = manager.get_connection(1)
    for _ in range(5):  # a request each
        assert manager.get_connection(1) is first
    assert len(first.init_future._errbacks) == 1
    del manager.conns[1]  # the connection closed; the next request gets a new one
    second = manager.get_connection(1)
    assert second is not first and len(second.init_future._errbacks) == 1
    second.init_future.failure(
        kafka_errors.SaslAuthenticationFailedError("[Error 58] SaslAuthenticationFailedError: bad")
    )
    assert login.reason == "refused the SCRAM-SHA-512 login (authentication failed): bad"

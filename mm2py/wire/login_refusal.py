"""The cause of a refused SASL login, which kafka-python's bootstrap logs and retries but never raises.

Why: when a broker refuses the login (a wrong password, an AWS_MSK_IAM signature it rejects), the library's
bootstrap logs "Bootstrap connection to ... failed: <error>", backs off, tries again until its deadline, and
then raises only "Unable to bootstrap". The refusal is the one fact a user needs, so while a connection
bootstraps, this handler on the library's connection-manager logger keeps the last refusal it logs.

A process normally bootstraps one connection at a time (one Spark task per Python worker); two at once in
one process could each see the other's refusal, which would still name a real refusal, not hide one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import kafka.errors as kafka_errors  # type: ignore[import-untyped]

_MANAGER_LOGGER = "kafka.net.manager"
_PREFIXES = re.compile(r"^(?:\[Error \d+\] |SaslAuthenticationFailedError: )+")


class LoginRefusals(logging.Handler):
    """Keeps the last SASL login refusal the library logs; ``cause`` is its text without the library's prefixes."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.cause: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if isinstance(arg, kafka_errors.SaslAuthenticationFailedError):
                self.cause = _PREFIXES.sub("", str(arg))


@contextmanager
def watching_login_refusals() -> Iterator[LoginRefusals]:
    """A :class:`LoginRefusals` attached to the library's connection manager for the ``with`` block."""
    refusals = LoginRefusals()
    logger = logging.getLogger(_MANAGER_LOGGER)
    logger.addHandler(refusals)
    try:
        yield refusals
    finally:
        logger.removeHandler(refusals)

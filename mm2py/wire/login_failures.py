"""Why the batch path's connection to a cluster fails, when waiting cannot cure it: a refused SASL login or a
failed TLS handshake (a certificate for another host, an untrusted CA, no shared protocol version), or an OIDC
token endpoint that refuses the client credentials.

Why: kafka-python 3.0.12 retries a bootstrap connection until its deadline and then says only "Unable to
bootstrap from [...]"; the refused login and the handshake error reach nothing but a log line. A wrong password
or a certificate for another host must stop the copy at once, with a line naming the cause, as librdkafka's
clients on the record path do; not after the stall timeout as if the broker were down.

The library keeps no such record, so this watches one client's connection manager: every connection it hands
out (including bootstrap ones) reports its failure here. Only the instance is touched, never the library's
classes. Executor side; nothing here is pickled.
"""

from __future__ import annotations

import re
import ssl
from typing import Any

import kafka.errors as kafka_errors  # type: ignore[import-untyped]

from mm2py.errors import ReplicationError
from mm2py.wire.oauth_tokens import TokenRefused

_PREFIXES = re.compile(r"^(?:\[Error \d+\] |SaslAuthenticationFailedError: )+")


class LoginFailures:
    """The last login or TLS failure of one client's connections, or None."""

    def __init__(self, alias: str, mechanism: str, manager: Any) -> None:
        self.alias = alias
        self.mechanism = mechanism
        self.reason: str | None = None
        hand_out = manager.get_connection
        # The connection watched per node: the manager hands the same one out for every request sent to it, and
        # a new one after a reconnect; each is watched once (an errback per request cost about 3 % of a following
        # copy task's CPU, profiled at 10,000 records/s).
        watched: dict[Any, Any] = {}

        def get_connection(*args: Any, **kwargs: Any) -> Any:
            connection = hand_out(*args, **kwargs)
            if watched.get(connection.node_id) is not connection:
                watched[connection.node_id] = connection
                connection.init_future.add_errback(self._note)
            return connection

        manager.get_connection = get_connection

    def _note(self, exc: BaseException) -> None:
        if isinstance(exc, TokenRefused):  # the OIDC token endpoint said no before the broker was asked
            self.reason = f"could not get an {self.mechanism} token: {exc}"
            return
        if isinstance(exc, kafka_errors.SaslAuthenticationFailedError):
            # The broker's own reason, without the library's "[Error 58] SaslAuthenticationFailedError: " prefixes.
            broker_says = _PREFIXES.sub("", str(exc))
            self.reason = f"refused the {self.mechanism} login (authentication failed): {broker_says}"
            return
        # The library wraps a failed handshake in KafkaConnectionError("Handshake failed: ...").
        cause = exc.__context__ if isinstance(exc, kafka_errors.KafkaConnectionError) else exc
        if isinstance(cause, ssl.SSLCertVerificationError):
            self.reason = f"TLS handshake failed: {cause.verify_message or cause.reason}"
        elif isinstance(cause, ssl.SSLError):
            self.reason = f"TLS handshake failed: {cause.reason or cause}"

    def raise_if_any(self) -> None:
        """Raise the failure as one that no retry can cure (the run stops, exit 3)."""
        if self.reason is not None:
            separator = " " if self.reason.startswith("refused") else ": "
            raise ReplicationError(f"{self.alias}{separator}{self.reason}", retriable=False)

"""A fake MSK broker: just enough Kafka protocol over TLS to take an AWS_MSK_IAM login and judge its signature.

Why: there is no AWS access from the test machine, so the closest proof that mm2py's batch path logs in to MSK
is to capture the SaslAuthenticate payload it sends and check it with AWS's own signer (botocore's SigV4):
recompute the signature over the same canonical request with the credentials the test gave the client, and
check what it authorizes (``kafka-cluster:Connect``), for which host, region and lifetime. A real MSK broker
does this check in AWS's IAM service; this one does it with the same library, nothing hand-rolled.

What it speaks: ApiVersions (any version: the answer is shaped for the version asked), SaslHandshake v0-1,
SaslAuthenticate v0-1 and Metadata v0 (one broker, itself, no topics), which is what kafka-python sends
before and after an AWS_MSK_IAM login. A payload that does not verify is answered as MSK answers it:
SASL_AUTHENTICATION_FAILED with an "Access denied" message; the client then closes the connection.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HOST = "127.0.0.1"
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
_UNSUPPORTED_VERSION = 35
_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE, _METADATA = 18, 17, 36, 3
# (api key, min, max) advertised: a broker that takes SaslAuthenticate v1 and nothing flexible besides ApiVersions.
_ADVERTISED = ((_METADATA, 0, 0), (_SASL_HANDSHAKE, 0, 1), (_API_VERSIONS, 0, 3), (_SASL_AUTHENTICATE, 0, 1))


@dataclass(frozen=True)
class Verdict:
    """What the signer said about one payload: accepted, or the first reason it was not."""

    payload: dict[str, str]
    problem: str | None

    @property
    def accepted(self) -> bool:
        return self.problem is None


def check_msk_payload(
    raw: bytes, credentials: Credentials, region: str, host: str, now: datetime.datetime | None = None
) -> Verdict:
    """Judge an AWS_MSK_IAM payload as MSK would: botocore's SigV4 over the same query, action, host, region, time."""
    payload = json.loads(raw)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    signed_at = datetime.datetime.strptime(payload["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc
    )
    expected_scope = f"{credentials.access_key}/{signed_at:%Y%m%d}/{region}/kafka-cluster/aws4_request"
    checks = (
        (payload.get("action") == "kafka-cluster:Connect", f"action {payload.get('action')} is not Connect"),
        (payload.get("host") == host, f"signed for host {payload.get('host')}, not {host}"),
        (payload.get("x-amz-credential") == expected_scope, "credential scope (key, day, region, service) differs"),
        (payload.get("x-amz-signedheaders") == "host", "signed headers are not just host"),
        (0 < int(payload.get("x-amz-expires", "0")) <= 900, "expiry is not within MSK's 900 s"),
        (abs((now - signed_at).total_seconds()) <= 300, "signed more than 5 minutes away from now"),
    )
    for ok, problem in checks:
        if not ok:
            return Verdict(payload, problem)
    if payload.get("x-amz-security-token") != credentials.token:
        return Verdict(payload, "session token differs")
    # AWS's own signer, over the request the payload claims to have signed.
    signer = SigV4QueryAuth(credentials, "kafka-cluster", region, expires=int(payload["x-amz-expires"]))
    request = AWSRequest(method="GET", url=f"https://{payload['host']}/", params={"Action": payload["action"]})
    request.context["timestamp"] = payload["x-amz-date"]
    signer._modify_request_before_signing(request)  # the X-Amz-* query parameters, at the payload's time
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != payload.get("x-amz-signature"):
        return Verdict(payload, "signature does not match")
    return Verdict(payload, None)


@dataclass
class FakeMskBroker:
    """A one-node TLS listener on 127.0.0.1 that judges AWS_MSK_IAM logins with ``judge``."""

    certificate: Path
    key: Path
    judge: Callable[[bytes], Verdict]
    verdicts: list[Verdict] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)  # api keys received, in order, over all connections
    port: int = 0
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> FakeMskBroker:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificate, self.key)
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        accepting = threading.Thread(target=self._accept, args=(context,), daemon=True)
        accepting.start()
        self._threads.append(accepting)
        return self

    def stop(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()

    def _accept(self, context: ssl.SSLContext) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(raw, context), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, raw: socket.socket, context: ssl.SSLContext) -> None:
        with contextlib.suppress(OSError, ConnectionError), raw:
            raw.settimeout(0.2)
            conn = _handshake(context, raw, self._stopped)
            if conn is None:
                return
            with conn:
                while not self._stopped.is_set():
                    frame = _read_frame(conn, self._stopped)
                    if frame is None:
                        return
                    answer, keep_open = self._answer(frame)
                    conn.sendall(struct.pack(">i", len(answer)) + answer)
                    if not keep_open:
                        return

    def _answer(self, frame: bytes) -> tuple[bytes, bool]:
        api_key, version, correlation = struct.unpack_from(">hhi", frame)
        self.requests.append(api_key)
        (client_id_length,) = struct.unpack_from(">h", frame, 8)
        body = frame[10 + max(client_id_length, 0) :]
        header = struct.pack(">i", correlation)
        if api_key == _API_VERSIONS:
            return header + _api_versions(version), True
        if api_key == _SASL_HANDSHAKE:
            mechanism = _string(body, 0)
            error = 0 if mechanism == "AWS_MSK_IAM" else UNSUPPORTED_SASL_MECHANISM
            return header + struct.pack(">hi", error, 1) + _encode_string("AWS_MSK_IAM"), error == 0
        if api_key == _SASL_AUTHENTICATE:
            (length,) = struct.unpack_from(">i", body)
            verdict = self.judge(body[4 : 4 + length])
            self.verdicts.append(verdict)
            if verdict.accepted:
                answer = json.dumps({"version": "2020_10_22", "request-id": "fake-msk-0001"}).encode()
                lifetime = struct.pack(">q", 0) if version >= 1 else b""
                return header + struct.pack(">hh", 0, -1) + struct.pack(">i", len(answer)) + answer + lifetime, True
            message = _encode_string(f"[fake-msk-0002]: Access denied ({verdict.problem})")
            lifetime = struct.pack(">q", 0) if version >= 1 else b""
            refusal = struct.pack(">h", SASL_AUTHENTICATION_FAILED) + message + struct.pack(">i", 0) + lifetime
            return header + refusal, True  # the client closes: closing first could cut the answer off
        if api_key == _METADATA:
            broker = struct.pack(">i", 1) + _encode_string(HOST) + struct.pack(">i", self.port)
            return header + struct.pack(">i", 1) + broker + struct.pack(">i", 0), True  # one broker, no topics
        return header, False


def _handshake(context: ssl.SSLContext, raw: socket.socket, stopped: threading.Event) -> ssl.SSLSocket | None:
    raw.settimeout(10)
    try:
        conn = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        return None
    conn.settimeout(0.2)
    return conn if not stopped.is_set() else None


def _read_exactly(conn: ssl.SSLSocket, size: int, stopped: threading.Event) -> bytes | None:
    data = b""
    while len(data) < size and not stopped.is_set():
        try:
            chunk = conn.recv(size - len(data))
        except TimeoutError:
            continue
        if not chunk:
            return None
        data += chunk
    return data if len(data) == size else None


def _read_frame(conn: ssl.SSLSocket, stopped: threading.Event) -> bytes | None:
    size = _read_exactly(conn, 4, stopped)
    return None if size is None else _read_exactly(conn, struct.unpack(">i", size)[0], stopped)


def _api_versions(version: int) -> bytes:
    if version > 3:  # as Kafka answers a version it does not know: v0, UNSUPPORTED_VERSION, what it does know
        entries = b"".join(struct.pack(">hhh", *api) for api in _ADVERTISED)
        return struct.pack(">hi", _UNSUPPORTED_VERSION, len(_ADVERTISED)) + entries
    if version == 3:  # flexible: compact array, tagged fields
        entries = b"".join(struct.pack(">hhh", *api) + b"\x00" for api in _ADVERTISED)
        return struct.pack(">h", 0) + bytes([len(_ADVERTISED) + 1]) + entries + struct.pack(">i", 0) + b"\x00"
    entries = b"".join(struct.pack(">hhh", *api) for api in _ADVERTISED)
    throttle = struct.pack(">i", 0) if version >= 1 else b""
    return struct.pack(">hi", 0, len(_ADVERTISED)) + entries + throttle


def _string(data: bytes, offset: int) -> str:
    (length,) = struct.unpack_from(">h", data, offset)
    return data[offset + 2 : offset + 2 + length].decode()


def _encode_string(text: str) -> bytes:
    encoded = text.encode()
    return struct.pack(">h", len(encoded)) + encoded

"""TLS in front of tansu: test certificates, and a TLS-terminating proxy that forwards to tansu's plaintext port.

Why: tansu parses ``--cert``/``--key`` but its listener never uses them (docs/test-broker.md, *TLS*), so a client with
``security.protocol=SSL`` can only reach it through a proxy that ends TLS and forwards the bytes. tansu must
advertise the proxy's address (``--advertised-listener-url``), or clients would reconnect around it.

The proxy also forwards plaintext clients on the same port when asked (``plaintext_too``): a Kafka request
starts with a 4-byte length whose first byte is 0 for any request under 16 MiB, while a TLS connection starts
with a handshake record (0x16). So the harness's plaintext helpers (``create_topic``, ``produce``,
``read_all``) keep working against a broker that advertises the proxy's address, and the counters tell
whether a client under test really spoke TLS.

Certificates come from the ``openssl`` command line into a directory the caller owns (``tmp_path``): the
``cryptography`` package is not installed, and generated keys must never land in the repository.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
HANDSHAKE_TIMEOUT = 10.0
_TLS_HANDSHAKE_RECORD = 0x16


# --- certificates -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Certificates:
    """PEM files of one test CA, a server certificate for 127.0.0.1 and a client certificate it signed."""

    ca: Path
    ca_key: Path
    server: Path
    server_key: Path
    client: Path
    client_key: Path

    def client_pkcs12(self, path: Path, password: str) -> Path:
        """The client key and certificate (with the CA in the chain) as a PKCS#12 keystore."""
        _openssl(
            "pkcs12",
            "-export",
            "-in",
            self.client,
            "-inkey",
            self.client_key,
            "-certfile",
            self.ca,
            "-name",
            "client",
            "-out",
            path,
            "-passout",
            f"pass:{password}",
        )
        return path


def _openssl(*args: str | Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise RuntimeError("the openssl command is needed to make test certificates (apt-get install openssl)")
    result = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(map(str, args[:2]))} failed: {result.stderr.strip()}")


def _new_key(path: Path) -> Path:
    # EC P-256: generated in milliseconds, and OpenSSL on both ends accepts it.
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    return path


def _sign(directory: Path, name: str, subject: str, extensions: str, ca: Path, ca_key: Path) -> tuple[Path, Path]:
    key = _new_key(directory / f"{name}.key")
    csr, cert, ext = directory / f"{name}.csr", directory / f"{name}.pem", directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr)
    _openssl(
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        ca,
        "-CAkey",
        ca_key,
        "-CAcreateserial",
        "-days",
        "2",
        "-sha256",
        "-extfile",
        ext,
        "-out",
        cert,
    )
    return cert, key


def make_certificates(directory: Path, ca_name: str = "mm2py test CA") -> Certificates:
    """A fresh CA in ``directory`` and the server (SAN IP:127.0.0.1) and client certificates it signs."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key(directory / "ca.key")
    ca = directory / "ca.pem"
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        ca_key,
        "-subj",
        f"/CN={ca_name}",
        "-days",
        "2",
        "-sha256",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-out",
        ca,
    )
    server, server_key = _sign(
        directory, "server", f"/CN={HOST}", f"subjectAltName=IP:{HOST}\nextendedKeyUsage=serverAuth\n", ca, ca_key
    )
    client, client_key = _sign(directory, "client", "/CN=mm2py-client", "extendedKeyUsage=clientAuth\n", ca, ca_key)
    return Certificates(ca, ca_key, server, server_key, client, client_key)


# --- the proxy ----------------------------------------------------------------------------------------------
@dataclass
class ProxyStats:
    """Connections the proxy saw; tests compare snapshots taken before and after a command."""

    tls_sessions: int = 0  # TLS handshakes that succeeded and were forwarded
    plaintext: int = 0  # connections forwarded without TLS (only with plaintext_too)
    rejected: int = 0  # TLS handshakes that failed: no or untrusted client certificate, client distrusts us

    def since(self, earlier: ProxyStats) -> ProxyStats:
        return ProxyStats(
            self.tls_sessions - earlier.tls_sessions,
            self.plaintext - earlier.plaintext,
            self.rejected - earlier.rejected,
        )


@dataclass
class TlsProxy:
    """A TLS-terminating TCP proxy on ``HOST:port`` that forwards to ``HOST:upstream_port``.

    Runs an asyncio loop in a daemon thread, so synchronous tests and fixtures drive it with ``start()`` and
    ``stop()``. With ``client_ca`` set, clients must present a certificate that CA signed (mTLS).
    """

    upstream_port: int
    port: int
    certfile: Path
    keyfile: Path
    client_ca: Path | None = None
    plaintext_too: bool = False
    _stats: ProxyStats = field(default_factory=ProxyStats, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _stopping: asyncio.Event | None = field(default=None, init=False, repr=False)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(self._stats.tls_sessions, self._stats.plaintext, self._stats.rejected)

    def start(self) -> None:
        """Bind and start serving; returns once the port accepts connections, raises if it cannot bind."""
        if self._thread is not None:
            raise RuntimeError(f"proxy on {self.address} is already running")
        context = self._server_context()
        listener = socket.create_server((HOST, self.port), reuse_port=False)
        listener.setblocking(False)
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, args=(listener, context, ready), name=f"tls-proxy-{self.port}", daemon=True
        )
        self._thread.start()
        if not ready.wait(HANDSHAKE_TIMEOUT):
            raise RuntimeError(f"proxy on {self.address} did not start")

    def stop(self) -> None:
        """Close the listener and every forwarded connection; idempotent."""
        if self._thread is None or self._loop is None:
            return
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(HANDSHAKE_TIMEOUT)
        self._thread = None

    def _server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certfile, self.keyfile)
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca)
        return context

    def _run(self, listener: socket.socket, context: ssl.SSLContext, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve(listener, context, ready))
        finally:
            listener.close()
            self._loop.close()

    async def _serve(self, listener: socket.socket, context: ssl.SSLContext, ready: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        connections: set[asyncio.Task[None]] = set()

        async def accept_forever() -> None:
            while True:
                conn, _ = await loop.sock_accept(listener)
                task = asyncio.create_task(self._handle(conn, context))
                connections.add(task)
                task.add_done_callback(connections.discard)

        acceptor = asyncio.create_task(accept_forever())
        ready.set()
        await self._stopping.wait()
        for task in (acceptor, *connections):
            task.cancel()
        await asyncio.gather(acceptor, *connections, return_exceptions=True)

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self._stats, what, getattr(self._stats, what) + 1)

    async def _handle(self, conn: socket.socket, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            first = await _peek(conn)
            if not first:
                conn.close()
                return
            tls = first[0] == _TLS_HANDSHAKE_RECORD
            if not tls and not self.plaintext_too:
                conn.close()
                self._count("rejected")
                return
            reader = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(reader)
            try:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol,
                    conn,
                    ssl=context if tls else None,
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT if tls else None,
                )
            except (ssl.SSLError, OSError, asyncio.TimeoutError):
                conn.close()
                self._count("rejected")
                return
            self._count("tls_sessions" if tls else "plaintext")
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(HOST, self.upstream_port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except asyncio.CancelledError:
            conn.close()
            raise


async def _peek(conn: socket.socket) -> bytes:
    """The connection's first byte, left in the socket for the TLS layer (or the broker) to read."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(conn, wake)
    try:
        await asyncio.wait_for(readable, HANDSHAKE_TIMEOUT)
    except asyncio.TimeoutError:
        return b""
    finally:
        loop.remove_reader(conn)
    try:
        return conn.recv(1, socket.MSG_PEEK)
    except OSError:
        return b""


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side ends, then close the writing side (Kafka never half-closes)."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()

"""A real MIT Kerberos KDC for tests (Debian's krb5-kdc), in a temporary directory on a loopback port.

Why: Kerberos (GSSAPI) is how many production Kafka clusters authenticate, and nothing short of a real KDC
shows whether mm2py's clients can log in from a keytab as MirrorMaker 2's Java clients do. The KDC has its own
krb5.conf and database under ``directory``, so it touches nothing of the machine's (no /etc/krb5.conf, no
system service); clients and the broker JVM are pointed at that krb5.conf (``KRB5_CONFIG``,
``-Djava.security.krb5.conf``).

Keys are random (``addprinc -randkey``) and exist only in the keytabs written here; the database's master
password is random too and never leaves this object.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from pathlib import Path

from tests.harness.kafka_harness import HOST, free_port
from tests.harness.polling import poll_until

REALM = "EXAMPLE.COM"
SERVICE = "kafka"
# Debian installs the KDC's programs under /usr/sbin, which a non-login shell may not have on PATH.
_SBIN = ("/usr/sbin", "/usr/local/sbin")
_START_TIMEOUT = 20.0


class KerberosMissing(RuntimeError):
    """The KDC programs are not installed; tests must fail with the fix, never skip."""


def _program(name: str) -> str:
    found = shutil.which(name) or next((f"{d}/{name}" for d in _SBIN if Path(d, name).is_file()), None)
    if found is None:
        raise KerberosMissing(f"no {name}: install Debian's krb5-kdc, krb5-admin-server and krb5-user (make install)")
    return found


class Kdc:
    """One realm, one ``krb5kdc`` process; a context manager that always stops the process on exit."""

    def __init__(self, directory: Path, realm: str = REALM) -> None:
        self.directory = directory
        self.realm = realm
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._master_password = secrets.token_urlsafe(18)

    @property
    def krb5_conf(self) -> Path:
        """The client (and broker JVM) configuration: this realm, this KDC, TCP only, no DNS look-ups."""
        return self.directory / "krb5.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment that makes MIT's tools and libraries use this realm's files only."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf")}

    def service_principal(self, host: str = "localhost") -> str:
        """The broker's principal: Kafka's service name and the broker's host name as a Java client derives it.

        Java's clients name the host by a reverse look-up of the address they connect to, so a broker on
        127.0.0.1 is ``kafka/localhost``; MIT-based clients need to be told that name (they keep the address).
        """
        return f"{SERVICE}/{host}@{self.realm}"

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def __enter__(self) -> Kdc:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Write the configuration, create the database and start ``krb5kdc`` in the foreground (``-n``)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        self._run(_program("kdb5_util"), "create", "-s", "-r", self.realm, "-P", self._master_password)
        log = (self.directory / "krb5kdc.out").open("ab")
        self._process = subprocess.Popen(
            [_program("krb5kdc"), "-n", "-r", self.realm],
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        poll_until(self._listening, _START_TIMEOUT, f"krb5kdc listening on {HOST}:{self.port}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def add_principal(self, principal: str, keytab: Path) -> Path:
        """Create ``principal`` with a random key and export that key into ``keytab``."""
        kadmin = _program("kadmin.local")
        self._run(kadmin, "-r", self.realm, "-q", f"addprinc -randkey {principal}")
        self._run(kadmin, "-r", self.realm, "-q", f"ktadd -k {keytab} {principal}")
        return keytab

    def log_tail(self, chars: int = 4000) -> str:
        path = self.directory / "krb5kdc.log"
        return path.read_text(errors="replace")[-chars:] if path.is_file() else "<no KDC log>"

    def _listening(self) -> bool:
        if self._process is None or self._process.poll() is not None:
            out = (self.directory / "krb5kdc.out").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"krb5kdc exited early:\n{out}\n{self.log_tail()}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((HOST, self.port)) == 0

    def _run(self, *command: str) -> None:
        done = subprocess.run(command, env={**os.environ, **self.env}, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            # The master password is an argument of kdb5_util; never echo the command line.
            output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise RuntimeError(f"{Path(command[0]).name} failed ({done.returncode}):\n{output}")

    def _write_configs(self) -> None:
        realm, port, root = self.realm, self.port, self.directory
        # udp_preference_limit = 1: every request over TCP, the one port krb5kdc is asked to listen on;
        # Java and MIT then agree on the transport. No DNS look-ups by MIT clients: host names stay as written.
        self.krb5_conf.write_text(
            f"""[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = true

[realms]
    {realm} = {{
        kdc = {HOST}:{port}
    }}

[domain_realm]
    {HOST} = {realm}
    localhost = {realm}
"""
        )
        (root / "kdc.conf").write_text(
            f"""[kdcdefaults]
    kdc_listen = {HOST}:{port}
    kdc_tcp_listen = {HOST}:{port}

[realms]
    {realm} = {{
        database_name = {root / "principal"}
        key_stash_file = {root / "stash"}
        acl_file = {root / "kadm5.acl"}
        max_life = 1h
        max_renewable_life = 1h
    }}

[logging]
    kdc = FILE:{root / "krb5kdc.log"}
    default = FILE:{root / "krb5kdc.log"}
"""
        )
        (root / "kadm5.acl").write_text("")


KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


def keytab_jaas(keytab: Path, principal: str) -> str:
    """A ``sasl.jaas.config`` that logs ``principal`` in from ``keytab``, as MM2 users and brokers write it."""
    return f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}";'


class KerberosRealm:
    """A KDC with the broker's and a client's principals, and what a broker and MM2 users configure for them.

    ``client`` (``mm2@REALM``) is the principal mm2py logs in as; ``stranger`` has a keytab but no principal in
    the KDC's database (a key the KDC never issued), for refusals.
    """

    def __init__(self, directory: Path) -> None:
        self.kdc = Kdc(directory / "kdc")
        self.directory = directory
        self.client = self.kdc.principal("mm2")
        self.broker_keytab = directory / "kafka.keytab"
        self.client_keytab = directory / "mm2.keytab"

    def start(self) -> None:
        self.kdc.start()
        self.kdc.add_principal(self.kdc.service_principal(), self.broker_keytab)
        self.kdc.add_principal(self.client, self.client_keytab)

    def stop(self) -> None:
        self.kdc.stop()

    def broker_settings(self) -> dict[str, str]:
        """server.properties entries: the SASL_PLAINTEXT listener takes GSSAPI only, as ``kafka/HOST``."""
        return {
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": SERVICE,
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": keytab_jaas(
                self.broker_keytab, self.kdc.service_principal()
            ),
        }

    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.kdc.krb5_conf}"]

    def java_client_settings(self, keytab: Path | None = None, principal: str | None = None) -> dict[str, str]:
        """An MM2 user's Kerberos client settings, unchanged (a JAAS Krb5LoginModule with a keytab)."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": SERVICE,
            "sasl.jaas.config": keytab_jaas(keytab or self.client_keytab, principal or self.client),
        }

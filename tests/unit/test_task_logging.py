"""Executor logging in a reused Python worker: three flows' tasks, three passwords, one process (a fresh
interpreter, as a Spark Python worker is). Every line the worker prints — mm2py's, librdkafka's (through
``mm2py.librdkafka``) and kafka-python's (``kafka.*``), with tracebacks — is read back and must hold none of the
three passwords, while the lines themselves are there (with the usernames: a username is the principal that a
refusal names, not a secret).

Why a unit proof: the test brokers (tansu) have no SASL or TLS, so an integration run cannot carry a real
password to a worker; what a worker prints depends only on this module, proven here in the worker's own shape."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PASSWORDS = ("alpha-Secret-1111", "bravo-Secret-2222", "charlie-Secret-3333")
USERS = ("user-one-9", "user-two-9", "user-three-9")

PRELUDE = textwrap.dedent(
    """
    import logging
    from mm2py.client_settings import ClientSettings
    from mm2py.executor.contract import CopySpec
    from mm2py.executor.task_logging import executor_logging

    NOWHERE = ClientSettings(bootstrap_servers=())

    def spec(flow, user, password, where):
        jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
                f'password="{password}";')
        settings = {"bootstrap.servers": "b:9092", "sasl.mechanism": "PLAIN"}
        settings[where] = password if where.endswith("password") else jaas
        return CopySpec(flow, flow.split("->")[0], "target", settings, {"sasl.password": password}, None,
                        {}, NOWHERE, NOWHERE, None, NOWHERE, None, "mm2-offsets.x.internal", 100)
    """
)
WORKER = PRELUDE + textwrap.dedent(
    """
    flows = [("dc1->target", "sasl.password"), ("dc2->target", "sasl.jaas.config"),
             ("dc3->target", "sasl.jaas.config")]
    users, passwords = USERS, PASSWORDS
    for i, (flow, where) in enumerate(flows):
        executor_logging(spec(flow, users[i], passwords[i], where))
        # Every secret seen so far, in every logger a task's lines come from.
        for j in range(i + 1):
            logging.getLogger("mm2py.wire.connection").warning("task %d: login with %s failed", i, passwords[j])
            logging.getLogger("mm2py.librdkafka").error("SASL authentication of %s failed", users[j])
            logging.getLogger("kafka.conn").error("<BrokerConnection> %s rejected", passwords[j])
            try:
                raise RuntimeError(f"handshake with {users[j]}:{passwords[j]} refused")
            except RuntimeError:
                logging.getLogger("kafka.client").exception("task %d: connection failed", i)
        print("LINES-DONE", i, flush=True)
    """
)


def test_a_reused_worker_masks_every_flow_s_secrets_in_every_logger() -> None:
    script = f"USERS = {USERS!r}\nPASSWORDS = {PASSWORDS!r}\n" + WORKER
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    # The first flow's password is set alone (sasl.password), the others' come in JAAS strings; either way
    # the password is masked and the username, the principal, is not.
    for secret in PASSWORDS:
        assert secret not in err, f"{secret} printed:\n{err}"
    assert USERS[0] in err and USERS[1] in err
    # The lines are there, masked: 6 per secret seen per task (1 + 2 + 3 times).
    assert err.count("login with [hidden] failed") == 6, err
    assert err.count("WARNING mm2py.wire.connection") == 6
    assert err.count("ERROR kafka.conn <BrokerConnection> [hidden] rejected") == 6, err
    assert err.count("ERROR kafka.client task") == 6 and err.count("RuntimeError: handshake with ") == 6
    assert err.count("ERROR mm2py.librdkafka SASL authentication of") == 6
    assert done.stdout.split() == ["LINES-DONE", "0", "LINES-DONE", "1", "LINES-DONE", "2"]


# The worker's first task runs while the process's stderr is one stream, and a line comes later, when that stream
# is closed and another took its place (librdkafka's lines are served at a client's next poll, which may be the
# idle-client closer's, long after; a test that runs task code in its own process swaps stderr per test).
SWAPPED = PRELUDE + textwrap.dedent(
    """
    import io, sys
    first = sys.stderr = io.StringIO()
    executor_logging(spec("dc1->target", "user-one-9", "alpha-Secret-1111", "sasl.password"))
    first.close()
    sys.stderr = sys.__stderr__
    logging.getLogger("mm2py.librdkafka").warning("after the swap, %s", "alpha-Secret-1111")
    """
)


def test_a_task_s_lines_go_to_the_stderr_the_worker_has_when_they_are_logged() -> None:
    done = subprocess.run([sys.executable, "-c", SWAPPED], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "WARNING mm2py.librdkafka after the swap, [hidden]\n", done.stderr

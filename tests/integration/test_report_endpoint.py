"""The report endpoint of a real continuous run (tansu brokers, Spark in local mode, the driver in the test's
process): an unauthenticated 1 GiB body, ``Content-Length: -1``, 1,000 idle connections and a forged forward
position (with the run's token) each leave the run copying, every record exactly once and in order.

The run's endpoint address is read from its ``/health`` lines (the documented way). The token never leaves
the driver; the forger gets it here because the driver runs in this process: ``run_flows`` is started with
``TaskControl`` replaced by a subclass that keeps the instance, so the test holds what a compromised executor
would hold (the token travels to every executor in the CopySpec)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import mm2py.engine.run as engine_run
from mm2py.config import load
from mm2py.engine.spark import SparkRunner
from mm2py.engine.task_control import TaskControl
from mm2py.executor.contract import FLOW_HEADER, TOKEN_HEADER, ControlEndpoint
from mm2py.executor.driver_link import DriverLink, report_row
from mm2py.metrics.registry import RunMetrics
from tests.harness.flows_helpers import IDENTITY, config_for, copied
from tests.harness.kafka_harness import TansuBroker, end_offsets, make_records, produce, read_all
from tests.harness.polling import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.usefixtures("own_spark_context")]

PARTITIONS = 4
GIB = 1024**3
FLOW = "dc1->target"


class _Run:
    """A continuous run in a thread of this process, its TaskControl kept."""

    def __init__(self, config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.controls: list[TaskControl] = []
        kept = self.controls

        class KeptTaskControl(TaskControl):
            def __init__(self, host: str, bind_address: str | None = None) -> None:
                super().__init__(host, bind_address)
                kept.append(self)

        monkeypatch.setattr(engine_run, "TaskControl", KeptTaskControl)
        loaded = load(config)
        self.metrics = RunMetrics()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

        def start_spark() -> SparkRunner:
            return SparkRunner.start("mm2py report endpoint", "local[2]", "client", {}, flows=1)

        def run() -> None:
            try:
                engine_run.run_flows(
                    list(loaded.flows),
                    start_spark,
                    once=False,
                    stop=self.stop,
                    metrics=self.metrics,
                    heartbeat_pairs=engine_run.heartbeat_flows(loaded.mm, loaded.flows, loaded.clusters),
                )
            except BaseException as exc:
                self.errors.append(exc)

        self.thread = threading.Thread(target=run, name="continuous run", daemon=True)
        self.thread.start()

    def url_from_health(self) -> str:
        lines = [line for line in self.metrics.health.health()[1] if line.startswith("task control: ")]
        return lines[0].removeprefix("task control: ") if lines else ""

    def alive(self) -> bool:
        assert not self.errors, self.errors
        return self.thread.is_alive()

    def end(self) -> None:
        self.stop.set()
        self.thread.join(timeout=120)
        assert not self.thread.is_alive(), "the run did not stop within 120 s"
        assert not self.errors, self.errors


@pytest.fixture
def started(pair: dict[str, TansuBroker], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Run]:
    config = config_for(tmp_path, pair, IDENTITY + "consumer.poll.timeout.ms = 200\n")
    run = _Run(config, monkeypatch)
    try:
        yield run
    finally:
        if run.thread.is_alive():
            run.stop.set()
            run.thread.join(timeout=120)


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)


def _head(headers: dict[str, str]) -> bytes:
    lines = ["POST /report HTTP/1.1", "Host: driver", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _status(sock: socket.socket) -> int:
    answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1]) if answer else 0


def _stream_gib(sock: socket.socket) -> int:
    chunk = b"\0" * (1024 * 1024)  # one buffer sent again and again: 1 GiB is never allocated
    sent = 0
    with contextlib.suppress(OSError):
        while sent < GIB:
            sent += sock.send(chunk)
    return sent


def _copied_exactly(pair: dict[str, TansuBroker], total: int) -> None:
    source = read_all(pair["dc1"].bootstrap, "orders")
    target = read_all(pair["target"].bootstrap, "orders")
    assert len(source) == total
    for p in range(PARTITIONS):  # one by one: none lost, none duplicated, none out of order
        assert [r.value for r in target if r.partition == p] == [r.value for r in source if r.partition == p], p


def test_knocks_on_the_report_endpoint_leave_every_record_exactly_where_it_should_be(
    pair: dict[str, TansuBroker], started: _Run, caplog: pytest.LogCaptureFixture
) -> None:
    run = started
    produced = 2_000
    produce(pair["dc1"].bootstrap, "orders", make_records(produced, partitions=PARTITIONS, seed=1))
    poll_until(lambda: copied(pair["target"]) == produced and run.alive(), 180, "the first 2000 records")
    poll_until(lambda: run.url_from_health() != "", 30, "/health to name the task-control endpoint")
    url = run.url_from_health()
    control = run.controls[0]
    assert url == control.url and control.token not in "\n".join(run.metrics.health.health()[1])
    figures: dict[str, Any] = {}

    # An unauthenticated 1 GiB body: refused from its headers, the body never read.
    with _connect(url) as sock:
        started_at = time.monotonic()
        sock.sendall(_head({FLOW_HEADER: FLOW, TOKEN_HEADER: "guess", "Content-Length": str(GIB)}))
        assert _status(sock) == 401
        figures["401_ms"] = round((time.monotonic() - started_at) * 1000)
        figures["gib_body_mib_sent"] = round(_stream_gib(sock) / 2**20, 1)
    assert figures["gib_body_mib_sent"] < 64
    produce(pair["dc1"].bootstrap, "orders", make_records(500, partitions=PARTITIONS, seed=2))
    produced += 500

    # Content-Length: -1, with and without the token.
    for token, status in (("guess", 401), (control.token, 411)):
        with _connect(url) as sock:
            sock.sendall(_head({FLOW_HEADER: FLOW, TOKEN_HEADER: token, "Content-Length": "-1"}))
            assert _status(sock) == status
            assert _stream_gib(sock) < 64 * 2**20

    # 1,000 idle connections: each answered 503 at once or dropped when silent; the run goes on.
    idle = [_connect(url) for _ in range(1000)]
    produce(pair["dc1"].bootstrap, "orders", make_records(500, partitions=PARTITIONS, seed=3))
    produced += 500
    held_at = time.monotonic()
    outcomes: dict[str, int] = {}
    for sock in idle:
        sock.settimeout(15)
        try:
            outcome = "503" if sock.recv(64).startswith(b"HTTP/1.0 503") else "dropped"
        except TimeoutError:
            outcome = "still open"
        except OSError:
            outcome = "dropped"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        sock.close()
    figures["idle_all_closed_s"] = round(time.monotonic() - held_at, 1)
    figures["idle_outcomes"] = outcomes
    assert "still open" not in outcomes, outcomes
    poll_until(lambda: copied(pair["target"]) == produced and run.alive(), 60, "records written meanwhile")

    # A forged forward position with the run's token: a million past each partition's end, and a failure, so
    # that the generation ends and the next one starts from the positions the driver kept.
    channel = control.channels[FLOW]
    generation = channel.generation
    ends = end_offsets(pair["dc1"].bootstrap, "orders")
    forger = DriverLink(ControlEndpoint(url, control.token, generation), FLOW, "forger")
    forged = [
        report_row("orders", p, end + 1_000_000, 1_000_000, 1, end + 1_000_000, None, {"message": "forged"})
        for p, end in ends.items()
    ]
    with caplog.at_level(logging.WARNING, logger="mm2py.engine.report_bounds"):
        forger.report(forged)
        poll_until(lambda: channel.generation > generation, 30, "the forged failure to end the generation")
        produce(pair["dc1"].bootstrap, "orders", make_records(500, partitions=PARTITIONS, seed=4))
        produced += 500
        poll_until(lambda: copied(pair["target"]) == produced and run.alive(), 120, "records after the forgery")
    refusals = "\n".join(r.getMessage() for r in caplog.records if "refused" in r.getMessage())
    for p, end in ends.items():
        assert f"partition={p}: " in refusals and f"{end + 1_000_000} is beyond the source's end" in refusals
    run.end()
    _copied_exactly(pair, produced)
    figures["records"] = produced
    print(f"FIGURES report endpoint: {figures}")


def test_quiet_partitions_are_left_out_of_reports_and_named_in_every_tenth(
    pair: dict[str, TansuBroker], started: _Run
) -> None:
    """Reports of quiet partitions cost the idle run most of its CPU; they carry only what changed, and every
    tenth report (``FULL_REPORT_EVERY``) names every partition of its task."""
    run = started
    poll_until(lambda: bool(run.controls) and FLOW in run.controls[0].channels, 60, "the flow's channel")
    channel = run.controls[0].channels[FLOW]
    reports: list[list[dict[str, Any]]] = []
    forward = channel.on_report

    def recording(generation: int, rows: list[dict[str, Any]], final: bool) -> None:
        reports.append(rows)
        forward(generation, rows, final)

    channel.on_report = recording

    def orders(since: int) -> list[dict[str, Any]]:
        """The rows of ``orders`` in the reports from ``since`` on (the flow also copies dc1's heartbeats)."""
        return [row for rows in reports[since:] for row in rows if row["topic"] == "orders"]

    def counted(since: int = 0) -> int:
        return sum(row["records"] for row in orders(since))

    produce(pair["dc1"].bootstrap, "orders", make_records(400, partitions=PARTITIONS, seed=5))
    poll_until(lambda: counted() == 400 and run.alive(), 180, "the first 400 records copied and reported")
    quiet_from = len(reports)  # from here on nothing is new until the next records

    def quiet_and_full() -> bool:
        """A report that named no partition of orders, and every partition named by the full ones."""
        quiet = any(all(row["topic"] != "orders" for row in rows) for rows in reports[quiet_from:])
        return quiet and {row["partition"] for row in orders(quiet_from)} == set(range(PARTITIONS))

    poll_until(lambda: quiet_and_full() and run.alive(), 60, "quiet reports and a full one")
    assert counted(quiet_from) == 0  # a full report names its partitions and counts nothing again
    produce(pair["dc1"].bootstrap, "orders", make_records(100, partitions=PARTITIONS, seed=6))
    poll_until(lambda: counted(quiet_from) == 100 and run.alive(), 60, "records after the quiet spell, reported")
    run.end()
    _copied_exactly(pair, 500)

"""The driver's task-control endpoint as a door (no JVM, no broker; real HTTP on loopback): the token is checked
before a byte of the body is read, the body is capped by the flow's partitions, silent sockets are dropped,
requests beyond the handler cap are answered 503 at once, and a report can move a partition only within the
range its generation was given (``ReportBounds``, and ``CopyRounds.on_report`` with it)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping

import pytest
from test_engine_driver import FakeSource, recorded, runner  # noqa: F401 (recorded: a fixture)
from test_follow_jobs import FollowingSpark, two_partitions

from mm2py.engine.ranges import FOLLOW_END, follow_ranges
from mm2py.engine.report_bounds import LIST_WAIT_S, ReportBounds
from mm2py.engine.task_control import HANDLERS, IDLE_TIMEOUT_S, ROW_BYTES, TaskControl, body_limit
from mm2py.executor.contract import FLOW_HEADER, TOKEN_HEADER, PartitionRange
from mm2py.executor.driver_link import FAILURE_MESSAGE_CHARS, FULL_REPORT_EVERY, DriverLink, report_row
from mm2py.metrics.measurement import PartitionMeasurement
from tests.harness.polling import poll_until

GIB = 1024**3
Positions = Mapping[tuple[str, int], int]


@pytest.fixture
def control() -> Iterator[TaskControl]:
    endpoint = TaskControl("127.0.0.1")
    yield endpoint
    endpoint.close()


def _connect(control: TaskControl) -> socket.socket:
    port = control.server.server_address[1]
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _head(headers: Mapping[str, str]) -> bytes:
    lines = ["POST /report HTTP/1.1", "Host: driver", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _status(sock: socket.socket) -> int:
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    return int(answer.split(b" ", 2)[1]) if answer else 0


def _stream(sock: socket.socket, total: int) -> int:
    """Send up to ``total`` bytes of body from one 1-MiB buffer (nothing of that size is allocated); returns
    how many were sent before the driver cut the connection."""
    chunk = b"\0" * (1024 * 1024)
    sent = 0
    with contextlib.suppress(OSError):
        while sent < total:
            sent += sock.send(chunk[: min(len(chunk), total - sent)])
    return sent


def test_an_unauthenticated_1_gib_body_is_refused_before_any_of_it_is_read(control: TaskControl) -> None:
    heard: list[object] = []
    control.channel("a->b", lambda *report: heard.append(report))
    with _connect(control) as sock:
        started = time.monotonic()
        sock.sendall(_head({TOKEN_HEADER: "guess", FLOW_HEADER: "a->b", "Content-Length": str(GIB)}))
        assert _status(sock) == 401  # answered from the headers alone
        answered = time.monotonic() - started
        sent = _stream(sock, GIB)
    assert heard == []
    # Only what the kernels' socket buffers take in before the reset; never the 1 GiB.
    assert sent < 64 * 1024 * 1024, sent
    assert answered < 2, answered
    print(f"FIGURES 1 GiB unauthenticated: answered 401 in {answered * 1000:.0f} ms, {sent / 2**20:.1f} MiB sent")


@pytest.mark.parametrize("length", ["-1", "", "1e9", "0x10", "\u0661\u0662", "9" * 5000, None])
def test_a_report_without_a_usable_length_is_refused_unread(control: TaskControl, length: str | None) -> None:
    control.channel("a->b", lambda *report: None)
    headers = {TOKEN_HEADER: control.token, FLOW_HEADER: "a->b"}
    if length is not None:
        headers["Content-Length"] = length
    with _connect(control) as sock:
        sock.sendall(_head(headers))
        assert _status(sock) == 411
        assert _stream(sock, GIB) < 64 * 1024 * 1024
    with _connect(control) as sock:  # without the token the length is not even looked at
        sock.sendall(_head({**headers, TOKEN_HEADER: "guess"}))
        assert _status(sock) == 401


def test_a_body_above_what_the_flow_s_partitions_can_weigh_is_refused_unread(control: TaskControl) -> None:
    control.channel("a->b", lambda *report: None, lambda: 10)
    limit = body_limit(10)
    headers = {TOKEN_HEADER: control.token, FLOW_HEADER: "a->b", "Content-Length": str(limit + 1)}
    with _connect(control) as sock:
        sock.sendall(_head(headers))
        assert _status(sock) == 413


def test_the_token_in_the_body_instead_of_its_header_is_not_enough(control: TaskControl) -> None:
    heard: list[object] = []
    control.channel("a->b", lambda *report: heard.append(report))
    body = json.dumps({"token": control.token, "flow": "a->b", "generation": 0, "rows": []}).encode()
    with _connect(control) as sock:
        sock.sendall(_head({FLOW_HEADER: "a->b", "Content-Length": str(len(body))}) + body)
        assert _status(sock) == 401
    assert heard == []


def test_a_thousand_idle_connections_are_dropped_and_reports_go_through_again(control: TaskControl) -> None:
    heard: list[object] = []
    channel = control.channel("a->b", lambda *report: heard.append(report))
    threads_before = threading.active_count()
    opened = time.monotonic()
    idle = [_connect(control) for _ in range(1000)]
    try:
        peak = threading.active_count() - threads_before
        started = time.monotonic()
        outcomes: dict[str, int] = {}
        for sock in idle:  # each is answered 503 at once or dropped once silent for IDLE_TIMEOUT_S
            sock.settimeout(IDLE_TIMEOUT_S + 5)
            try:
                answer = sock.recv(4096)
                outcome = "503" if answer.startswith(b"HTTP/1.0 503") else "dropped" if not answer else "other"
            except TimeoutError:
                outcome = "still open"
            except OSError:
                outcome = "dropped"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        dropped_in = time.monotonic() - started
        since_first = time.monotonic() - opened
    finally:
        for sock in idle:
            sock.close()
    link = DriverLink(channel.next_generation(), "a->b", "task-0")
    poll_until(lambda: link.report([]) and bool(heard), 10, "a report to go through")
    # One handler thread and its deadline timer per request served; the rest answered by the accepting thread.
    assert peak <= 2 * HANDLERS + 2, peak
    assert set(outcomes) <= {"503", "dropped"}, outcomes  # none left open, none served
    # A handler slot drops at most one silent connection per IDLE_TIMEOUT_S; the rest were answered 503 at once.
    # (How many slots free up while the 1,000 are still being accepted depends on the machine's load.)
    slot_rounds = 1 + int(since_first // IDLE_TIMEOUT_S)
    assert outcomes.get("dropped", 0) <= HANDLERS * slot_rounds, (outcomes, since_first)
    assert dropped_in < IDLE_TIMEOUT_S + 3, dropped_in
    print(f"FIGURES 1000 idle connections: {outcomes}, at most {peak} threads, all closed in {dropped_in:.1f} s")


def test_a_link_asks_for_every_partition_first_every_tenth_report_and_after_one_the_driver_missed(
    control: TaskControl,
) -> None:
    """Quiet partitions are left out of a report; these full ones make good a row the driver did not apply or a
    report it never heard."""
    heard: list[object] = []
    channel = control.channel("a->b", lambda *report: heard.append(report))
    link = DriverLink(channel.next_generation(), "a->b", "task-0")
    due = []
    for _ in range(2 * FULL_REPORT_EVERY):
        due.append(link.full_due)
        assert link.report([])
    assert due == ([True] + [False] * (FULL_REPORT_EVERY - 1)) * 2
    assert len(heard) == 2 * FULL_REPORT_EVERY
    control.close()  # the driver is gone: the report is not answered
    assert link.report([])  # goes on: the driver may be back within DRIVER_GONE_S
    assert link.full_due


def test_a_report_sent_in_the_background_does_not_hold_its_sender_and_its_answer_is_taken_once(
    control: TaskControl,
) -> None:
    """The copy loop sends a report and goes on copying: the driver may list the source's ends before it answers.
    The answer is taken once, a stop comes through as False, and the next report waits for it."""
    release = threading.Event()
    heard: list[bool] = []

    def held(generation: int, rows: object, final: bool) -> None:
        heard.append(final)
        if not final:
            release.wait(30)

    channel = control.channel("a->b", held)
    link = DriverLink(channel.next_generation(), "a->b", "task-0")
    started = time.monotonic()
    link.send([])
    assert time.monotonic() - started < 1.0, "send waited for the driver's answer"
    poll_until(lambda: heard == [False], 10, "the driver to hold the report")
    assert link.in_flight and link.answer() is None and link.in_flight  # on its way: nothing to take yet
    with pytest.raises(RuntimeError):
        link.send([])  # one at a time
    release.set()
    answers: list[bool | None] = []
    poll_until(lambda: answers.append(link.answer()) or answers[-1] is not None, 10, "the answer")
    assert answers[-1] is True and not link.in_flight and link.answer() is None  # taken once
    channel.end()
    link.send([])
    answers.clear()
    poll_until(lambda: answers.append(link.answer()) or answers[-1] is not None, 10, "the generation's end")
    assert answers[-1] is False
    assert link.report([], final=True) is False and heard[-1] is True


def test_settle_waits_for_the_report_on_its_way_so_the_final_report_comes_after_it(control: TaskControl) -> None:
    order: list[str] = []

    def slow(generation: int, rows: object, final: bool) -> None:
        if not final:
            time.sleep(0.5)  # a driver busy listing the source's ends: the final report must not overtake it
        order.append("final" if final else "regular")

    channel = control.channel("a->b", slow)
    link = DriverLink(channel.next_generation(), "a->b", "task-0")
    link.send([])
    link.settle()
    link.report([], final=True)
    assert order == ["regular", "final"] and not link.in_flight


def test_a_worst_case_report_row_fits_the_room_allowed_for_it() -> None:
    measurement = PartitionMeasurement("a" * 64, "b" * 64, "t" * 249, "r" * 249, 2**31 - 1, 2**62, 2**62)
    failure = {"message": "\U0001f4a5" * (FAILURE_MESSAGE_CHARS * 3), "retriable": False}
    row = report_row("t" * 249, 2**31 - 1, 2**62, 2**62, 2**62, 2**62, measurement, failure)
    size = len(json.dumps(row, ensure_ascii=False).encode())
    assert size < ROW_BYTES, size


# -- what a report may move ---------------------------------------------------------------------------------


def _bounds(ends: dict[tuple[str, int], int]) -> tuple[ReportBounds, list[list[tuple[str, int]]]]:
    listings: list[list[tuple[str, int]]] = []

    def list_ends(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        listings.append(partitions)
        return {tp: ends[tp] for tp in partitions}

    return ReportBounds("a->b", list_ends), listings


def test_a_position_beyond_the_source_end_backwards_or_of_another_generation_is_refused_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ends = {("t", 0): 100, ("t", 1): 50}
    bounds, listings = _bounds(ends)
    bounds.start(3, [PartitionRange("t", 0, "t", 20, FOLLOW_END), PartitionRange("t", 1, "t", 5, 40)], {})
    positions = {("t", 0): 20, ("t", 1): 5}
    assert bounds.allowed(3, {("t", 0): 100, ("t", 1): 40}, positions) == {("t", 0), ("t", 1)}
    assert listings == [[("t", 0), ("t", 1)]]  # the ends were listed once, when positions went past them
    with caplog.at_level(logging.WARNING):
        assert bounds.allowed(3, {("t", 0): 101}, positions) == set()  # one past the source's end
        assert bounds.allowed(3, {("t", 0): 10**12}, positions) == set()  # logged already for this generation
        assert bounds.allowed(3, {("t", 1): 41}, positions) == set()  # past the range's own end
        assert bounds.allowed(3, {("t", 1): 4}, positions) == set()  # before the range's start
        assert bounds.allowed(3, {("t", 0): 19}, {("t", 0): 30}) == set()  # behind what was reported
        assert bounds.allowed(2, {("t", 0): 30}, positions) == set()  # an older generation
        assert bounds.allowed(3, {("t", 2): 1}, positions) == set()  # not in the generation's ranges
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 4, refusals  # once per generation and partition (and once for the generation)
    assert "partition=0" in refusals[0] and "beyond the source's end offset 100" in refusals[0]
    assert bounds.refused == 7
    ends[("t", 0)] = 150  # the source grew: a position up to its new end is taken
    assert bounds.allowed(3, {("t", 0): 150}, positions) == {("t", 0)}


def test_a_source_slow_to_list_its_ends_holds_no_report_and_refuses_nothing() -> None:
    """A source whose ListOffsets hangs: the report is answered within LIST_WAIT_S with the position not applied
    (not refused either); once the listing answers, the next report is taken."""
    release = threading.Event()

    def slow(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        release.wait(30)
        return {tp: 500 for tp in partitions}

    bounds = ReportBounds("a->b", slow)
    bounds.start(1, [PartitionRange("t", 0, "t", 0, FOLLOW_END)], {("t", 0): 100})
    started = time.monotonic()
    assert bounds.allowed(1, {("t", 0): 150}, {("t", 0): 100}) == set()
    assert time.monotonic() - started < LIST_WAIT_S + 1 and bounds.refused == 0
    assert bounds.allowed(1, {("t", 0): 90}, {}) == {("t", 0)}  # within the known end: no listing needed
    release.set()
    poll_until(lambda: bounds.allowed(1, {("t", 0): 150}, {("t", 0): 100}) == {("t", 0)}, 10, "the late listing")
    assert bounds.refused == 0


def test_a_forged_forward_position_with_the_token_leaves_positions_where_the_records_are(
    recorded: list[Positions],  # noqa: F811 (the fixture)
) -> None:
    """While a generation follows, a report with the run's token claims partition 0 copied to 10**9: refused,
    so the positions (and the next generation's start) stay what the task copied; the forger's counts are not
    counted either."""
    source = two_partitions({0: 30, 1: 7})
    spark = FollowingSpark(source)
    r = runner(source, spark)  # type: ignore[arg-type]
    r.rounds.place({})
    control = TaskControl("127.0.0.1")
    r.control = control
    stop = threading.Event()
    answers: list[bool] = []

    def forge() -> None:
        assert spark.specs[0].control is not None
        forger = DriverLink(spark.specs[0].control, "dc1->target", "forger")
        answers.append(forger.report([report_row("orders", 0, 10**9, 10**9, 1, 10**9, None)]))
        answers.append(forger.report([report_row("orders", 1, 2, 0, 0, 7, None)]))  # backwards
        source.latest[("orders", 0)] = 40  # ten more records arrive; the real task copies them

    spark.during = [forge, lambda: None, stop.set]
    try:
        r.run_continuous(stop, threading.Event())
    finally:
        control.close()
    assert answers == [True, True]  # the token is right: the forger is answered, but not believed
    assert r.rounds.positions == {("orders", 0): 40, ("orders", 1): 7}
    assert r.stats.records == 47
    assert r.rounds.bounds.refused == 2
    assert [
        (x.partition, x.start) for x in follow_ranges(r.rounds.partitions(), r.rounds.positions, r.rounds.remote)
    ] == [
        (0, 40),
        (1, 7),
    ]


def test_a_report_row_carries_every_field_of_its_measurement_as_the_driver_reads_it_back() -> None:
    measured = PartitionMeasurement(
        "dc1", "target", "orders", "dc1.orders", 3, 7, 700, 1.0, 9.0, 20.0, 9.0, 2.0, 5.0, 21.0, 5.0, 12.5
    )
    row = json.loads(json.dumps(report_row("orders", 3, 41, 7, 700, 50, measured)))
    assert PartitionMeasurement(**row["measurement"]) == measured
    assert report_row("orders", 3, 41, 0, 0, 50, None)["measurement"] is None

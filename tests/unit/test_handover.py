"""The hand-over of a flow from a running run to ``mm2py cutover`` (control/handover.py, tools/cutover/switch.py):
the records that say it, which process they apply to, the standing-by run's wait, and the cut-over's wait for
the lease group to empty. Real Kafka: tests/realkafka/test_real_kafka_handover.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.control import handover
from mm2py.control.cutover_mark import mark_key
from mm2py.control.handover import FlowClaims, FlowHandoverWatch, HandoverRequest, claims_in, request_key
from mm2py.control.lease import this_process
from mm2py.errors import CheckFailed, KafkaOperationError
from mm2py.librdkafka.admin_groups import GroupInfo, GroupMember
from mm2py.tools.cutover import CutoverOptions, CutoverReport, switch

BASE = "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
OTHER = "otherhost:4242"


def flow() -> FlowConfig:
    return build_flow_config(MirrorMakerConfig(parse_properties(BASE, "t.properties"), {}), Flow("a", "b"))


def request(by: str = OTHER, flow_name: str = "a->b") -> bytes:
    return json.dumps({"flow": flow_name, "by": by, "at": 1}).encode()


MARK = json.dumps({"flow": "a->b", "at": 2, "command": "cutover", "by": OTHER, "positions": []}).encode()


def test_the_newest_request_stands_a_tombstone_clears_it_and_other_flows_and_undecodable_values_are_passed_over() -> (
    None
):
    key = request_key("a->b")
    assert claims_in("a->b", [(key, request())]).request == HandoverRequest("a->b", OTHER, 1)
    assert claims_in("a->b", [(key, request()), (key, None)]).request is None
    assert claims_in("a->b", [(key, None), (key, request("h:2"))]).request == HandoverRequest("a->b", "h:2", 1)
    assert claims_in("a->b", [(request_key("c->b"), request(flow_name="c->b"))]).request is None
    assert claims_in("a->b", [(key, b"not json")]).request is None
    claims = claims_in("a->b", [(key, request()), (mark_key("a->b"), MARK), (key, None)])
    assert claims.request is None and claims.mark is not None and claims.mark.by == OTHER


def test_a_request_applies_to_every_process_but_the_one_that_wrote_it() -> None:
    watch = FlowHandoverWatch(flow())
    assert watch.in_record(request_key("a->b"), request()) == f"`mm2py cutover` ({OTHER})"
    assert watch.in_record(request_key("a->b"), request(this_process())) is None  # the cut-over's own copy
    assert watch.in_record(request_key("c->b"), request(flow_name="c->b")) is None
    assert watch.in_record(b"a->b", json.dumps({"holder": OTHER, "since": 0}).encode()) is None  # a holder record
    assert watch.in_record(request_key("a->b"), None) is None


def _reads(watch: FlowHandoverWatch, answers: list[FlowClaims | Exception]) -> list[int]:
    calls: list[int] = []

    def claims() -> FlowClaims:
        calls.append(1)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    watch.claims = claims  # type: ignore[method-assign]
    return calls


def test_a_standing_by_run_waits_through_failed_reads_until_the_mark_or_the_request_is_gone() -> None:
    standing = FlowClaims(HandoverRequest("a->b", OTHER, 1), None)
    marked = claims_in("a->b", [(mark_key("a->b"), MARK)])
    watch = FlowHandoverWatch(flow())
    calls = _reads(watch, [standing, KafkaOperationError("b", "reading", "timed out"), standing, marked])
    assert watch.wait_for_end(threading.Event(), 0) == marked and len(calls) == 4
    given_back = FlowClaims(None, None)
    _reads(watch, [standing, given_back])
    assert watch.wait_for_end(threading.Event(), 0) == given_back
    mine = FlowClaims(HandoverRequest("a->b", this_process(), 1), None)  # not ours to wait for
    _reads(watch, [mine])
    assert watch.wait_for_end(threading.Event(), 0) == mine
    stopped = threading.Event()
    stopped.set()
    assert watch.wait_for_end(stopped, 0) is None


def test_a_failed_read_of_a_standing_request_lets_the_run_copy_on() -> None:
    watch = FlowHandoverWatch(flow())
    _reads(watch, [KafkaOperationError("b", "reading", "timed out")])
    assert watch.standing() is None


class FakeTarget:
    """The lease group as the cut-over sees it: members for the first ``held_for`` descriptions."""

    def __init__(self, held_for: int) -> None:
        self.held_for = held_for
        self.described = 0

    def describe_group(self, _group: str) -> GroupInfo:
        self.described += 1
        if self.described <= self.held_for:
            return GroupInfo("STABLE", (GroupMember("m1", f"mm2py-lease|a->b|{OTHER}", "/h"),))
        return GroupInfo("EMPTY", ())


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    written: list[str] = []
    monkeypatch.setattr(switch, "request_handover", lambda f, _a: written.append(f"request {f.name}"))
    monkeypatch.setattr(switch, "clear_handover", lambda f, _a: written.append(f"clear {f.name}"))
    monkeypatch.setattr(handover, "read_lease_holder", lambda *_a, **_k: None)
    yield written


def _hand_over(target: FakeTarget, options: CutoverOptions) -> tuple[bool, CutoverReport, list[float]]:
    report = CutoverReport("a->b", "a", "b", options.dry_run)
    waits: list[float] = []
    asked = switch._hand_over(flow(), target, options, report, switch._Checks(report), waits.append)  # type: ignore[arg-type]
    return asked, report, waits


def test_the_cut_over_asks_and_waits_until_the_lease_group_is_empty(requests: list[str]) -> None:
    asked, report, waits = _hand_over(FakeTarget(held_for=3), CutoverOptions())
    assert asked and requests == ["request a->b"]  # cleared by cut_over when it ends, not here
    assert waits == [switch.HANDOVER_POLL_S] * 3
    (said,) = report.handovers
    assert said.startswith("the run holding it handed a->b over in ") and said.endswith(" s and stands by")


def test_a_holder_that_does_not_let_go_is_refused_and_the_request_cleared(requests: list[str]) -> None:
    with pytest.raises(CheckFailed, match=r"did not hand the flow over within --handover-timeout 0 s") as refused:
        _hand_over(FakeTarget(held_for=100), CutoverOptions(handover_timeout_s=0))
    assert f"mm2py-lease|a->b|{OTHER}" in str(refused.value)
    assert requests == ["request a->b", "clear a->b"]


def test_a_dry_run_says_whom_it_would_ask_and_writes_nothing(requests: list[str]) -> None:
    asked, report, _waits = _hand_over(FakeTarget(held_for=100), CutoverOptions(dry_run=True))
    assert not asked and requests == [] and report.handovers == ["would ask the run holding it to hand a->b over"]
    asked, report, _waits = _hand_over(FakeTarget(held_for=0), CutoverOptions())
    assert not asked and requests == [] and report.handovers == []

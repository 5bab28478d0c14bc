"""The hand-over of a flow from a continuous run to ``mm2py cutover``, through the lease topic on the target.

``cutover`` writes a request under the key ``handover:A->B`` in ``mm2py-leases.internal`` (beside the flow's
lease-holder record and its cut-over mark) and waits for the flow's lease group to empty. The run holding the
lease reads the request as the owner of that topic's one partition (control/lease.py), ends the running
generation as at a lost lease (its tasks record their progress), leaves the group and stands by; standbys of
the flow leave too. The cut-over then copies to lag 0 under a lease of its own. It ends by writing the mark and
then clearing the request (a tombstone), or, refused or failed, by clearing the request only: a standing-by run
that reads the mark ends the flow, one that reads the request gone takes the lease again. Mark before
tombstone, in one partition, so no reader sees the request gone without the mark that came with it.

A request applies to every run but the process that wrote it (the cut-over's own copy takes the lease as
``run --once`` does). Driver side only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.control.cutover_mark import CutoverMark, marks_in, write_lease_record
from mm2py.control.lease import lease_group, read_lease_holder, this_process
from mm2py.control.topics import LEASE_TOPIC
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.admin_groups import GroupInfo
from mm2py.librdkafka.partition_reader import read_topic

log = logging.getLogger(__name__)
REQUEST_KEY_PREFIX = "handover:"


def request_key(flow: str) -> bytes:
    return f"{REQUEST_KEY_PREFIX}{flow}".encode()


@dataclass(frozen=True)
class HandoverRequest:
    """A cut-over asking the runs of ``flow`` to let go of it: who asks (host:pid) and since when."""

    flow: str
    by: str
    at_ms: int

    def applies_here(self) -> bool:
        """Every run but the requesting process itself (whose copy to lag 0 takes the lease)."""
        return self.by != this_process()

    def describe(self) -> str:
        return f"`mm2py cutover` ({self.by})"

    def to_json(self) -> dict[str, Any]:
        return {"flow": self.flow, "by": self.by, "at": self.at_ms}

    @classmethod
    def from_value(cls, value: bytes) -> HandoverRequest:
        data = json.loads(value)
        return cls(str(data["flow"]), str(data["by"]), int(data["at"]))


@dataclass(frozen=True)
class FlowClaims:
    """What the lease topic says of one flow besides its lease: a standing hand-over request, a cut-over mark."""

    request: HandoverRequest | None
    mark: CutoverMark | None


def request_in(flow: str, key: bytes | None, value: bytes | None) -> HandoverRequest | None:
    """The request one lease-topic record makes for ``flow``; None for any other record (or an undecodable
    one, which a newer writer may have made: passed over, as the marks are)."""
    if key != request_key(flow) or value is None:
        return None
    try:
        return HandoverRequest.from_value(value)
    except (ValueError, KeyError, TypeError):
        return None


def claims_in(flow: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> FlowClaims:
    """The standing request and mark of ``flow`` from the lease topic's records (key, value) in order: the newest
    record under each key wins and a tombstone clears it."""
    listed = list(records)
    request: HandoverRequest | None = None
    for key, value in listed:
        if key == request_key(flow):
            request = request_in(flow, key, value)
    return FlowClaims(request, marks_in(listed).get(flow))


def read_claims(flow: str, target: str, consumer_settings: Mapping[str, str], timeout_s: float = 15.0) -> FlowClaims:
    """The flow's standing request and mark on its target (none when the lease topic does not exist)."""
    records = read_topic(
        target, consumer_settings, LEASE_TOPIC, purpose=f"reading the hand-over of {flow}", timeout_s=timeout_s
    )
    return claims_in(flow, ((msg.key(), msg.value()) for msg in records))


def running_lease(flow: FlowConfig, admin: ClusterAdmin) -> tuple[GroupInfo, str | None]:
    """The members of the flow's lease group on its target and, when there are any, who wrote that it holds the
    lease (what the cut-over commands name when a run has the flow)."""
    info = admin.describe_group(lease_group(flow.source, flow.target))
    if not info.members:
        return info, None
    holder = read_lease_holder(flow.target, flow.target_consumer.settings(), flow.name)
    return info, holder.describe() if holder else None


def request_handover(flow: FlowConfig, admin: ClusterAdmin) -> HandoverRequest:
    request = HandoverRequest(flow.name, this_process(), int(time.time() * 1000))
    value = json.dumps(request.to_json()).encode()
    write_lease_record(flow, admin, request_key(flow.name), value, f"the hand-over request of {flow.name}")
    return request


def clear_handover(flow: FlowConfig, admin: ClusterAdmin) -> None:
    write_lease_record(flow, admin, request_key(flow.name), None, f"the hand-over request of {flow.name}")


class FlowHandoverWatch:
    """``HandoverWatch`` (control/lease.py) for one flow: the requests of other processes, by who asks."""

    def __init__(self, flow: FlowConfig) -> None:
        self._flow = flow

    def in_record(self, key: bytes | None, value: bytes | None) -> str | None:
        request = request_in(self._flow.name, key, value)
        return request.describe() if request is not None and request.applies_here() else None

    def standing(self) -> str | None:
        """A read that fails answers None: the run goes on, and a cut-over still waiting for the flow refuses
        when its --handover-timeout passes (nothing is copied twice or into a B in use either way)."""
        try:
            request = self.claims().request
        except KafkaOperationError as exc:
            log.debug("flow=%s: reading the lease topic for a hand-over failed: %s", self._flow.name, exc)
            return None
        return request.describe() if request is not None and request.applies_here() else None

    def claims(self) -> FlowClaims:
        return read_claims(self._flow.name, self._flow.target, self._flow.target_consumer.settings())

    def wait_for_end(self, stop: threading.Event, poll_s: float) -> FlowClaims | None:
        """Read the lease topic every ``poll_s`` until the request that applies here is gone (the claims then
        hold the mark if the cut-over wrote one); None once ``stop`` is set. A failed read is tried again."""
        while not stop.wait(poll_s):
            try:
                claims = self.claims()
            except KafkaOperationError as exc:
                log.debug("flow=%s: reading the hand-over's end failed: %s", self._flow.name, exc)
                continue
            if claims.mark is not None or claims.request is None or not claims.request.applies_here():
                return claims
        return None

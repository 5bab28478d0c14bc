"""One run per flow at a time, across hosts: a lease held as a consumer-group membership on the target.

Kafka Connect workers coordinate through a group on the target cluster; mm2py does the same with less: every
run of flow A->B joins group ``mm2py-lease.A->B`` on B, subscribed to the one-partition topic
``mm2py-leases.internal``. The member that owns partition 0 holds the lease and copies; any other member is a
standby. The cooperative-sticky assignor keeps the partition with its owner when a standby joins, and the
group coordinator hands it to a standby once the holder stops heartbeating for ``session.timeout.ms``
(``mm2py.lease.session.timeout.ms``): a crashed run never keeps its flow longer than that.

The holder also writes who it is (host, process, since when) to the same topic, keyed by flow, so a run that
finds the flow taken can name the holder. As the owner of that partition it reads what is written there after
it took the lease; a ``HandoverWatch`` (control/handover.py) picks out a cut-over asking for the flow, and the
holder then lets go as at a lost lease. Runs on the driver only; nothing here touches records.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from mm2py.control.topics import LEASE_TOPIC
from mm2py.errors import KafkaOperationError, error_name
from mm2py.librdkafka.clients import new_consumer, new_producer
from mm2py.librdkafka.error_mapping import wrap_kafka_error
from mm2py.librdkafka.partition_reader import read_topic
from mm2py.librdkafka.principals import principal_of

log = logging.getLogger(__name__)
_REFUSED = (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
HANDOVER_CHECK_S = 3.0  # how often a standby reads the lease topic for a cut-over asking for its flow


class HandoverWatch(Protocol):
    """Tells a lease whether a cut-over asks for its flow: in one record of the lease topic (no I/O), or in
    what the topic holds now (a read). Each answers who asks, or None."""

    def in_record(self, key: bytes | None, value: bytes | None) -> str | None: ...

    def standing(self) -> str | None: ...


def lease_group(source: str, target: str) -> str:
    return f"mm2py-lease.{source}->{target}"


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class LeaseHolder:
    """What the holder of a flow's lease wrote about itself."""

    holder: str
    since_ms: int

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since_ms / 1000))
        return f"{self.holder} (since {since})"


def read_lease_holder(
    target: str, consumer_settings: Mapping[str, str], flow: str, timeout_s: float = 15.0
) -> LeaseHolder | None:
    """The newest holder record of ``flow`` in the lease topic on ``target``, if any (it outlives the holder:
    whether a run holds the flow *now* is the lease group's membership)."""
    holder: LeaseHolder | None = None
    for msg in read_topic(
        target, consumer_settings, LEASE_TOPIC, purpose=f"reading the lease holder of {flow}", timeout_s=timeout_s
    ):
        if msg.key() != flow.encode() or msg.value() is None:
            continue
        try:
            data = json.loads(msg.value())
            holder = LeaseHolder(str(data["holder"]), int(data["since"]))
        except (ValueError, KeyError, TypeError):
            continue
    return holder


class FlowLease:
    """The lease on one flow; ``acquire`` joins the group, a background thread keeps the membership alive."""

    def __init__(
        self,
        source: str,
        target: str,
        consumer_settings: Mapping[str, str],
        producer_settings: Mapping[str, str],
        session_timeout_ms: int,
        watch: HandoverWatch | None = None,
    ) -> None:
        self.source = source
        self.target = target
        self.flow = f"{source}->{target}"
        self.identity = this_process()
        self._session_timeout_ms = session_timeout_ms
        self._consumer_settings = {
            **consumer_settings,
            "group.id": lease_group(source, target),
            "client.id": f"mm2py-lease|{self.flow}|{self.identity}",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": str(session_timeout_ms),
            "heartbeat.interval.ms": str(max(100, session_timeout_ms // 5)),
            "enable.auto.commit": "false",
            "enable.partition.eof": "false",
            "auto.offset.reset": "latest",
        }
        self._producer_settings = dict(producer_settings)
        self._consumer_read_settings = dict(consumer_settings)
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._decided = threading.Event()  # the first assignment (ours or someone else's) has arrived
        self.held = threading.Event()
        self.lost = threading.Event()  # we held the lease and the group took it away, or we let go of it
        self._watch = watch
        self.handed_over = threading.Event()  # a cut-over asked for the flow: let go and stand by
        self.requested_by: str | None = None  # who asked
        self._standing_checked = False  # read the lease topic for a request since this membership began
        self._error: KafkaError | None = None

    # -- joining -------------------------------------------------------------------------------------------

    def acquire(self, stop: threading.Event, *, wait: bool, on_standby: Callable[[str], None] | None = None) -> bool:
        """Join the group; True once this run holds the lease.

        ``wait=False`` (``--once``): return False as soon as the group has given the partition to another
        member. ``wait=True`` (continuous): stay a standby until the lease comes to us or ``stop`` is set;
        ``on_standby`` hears who holds it then (the run's /ready and /health say so).
        """
        self.join()
        deadline = time.monotonic() + max(30.0, 3 * self._session_timeout_ms / 1000)
        said_standby = False
        next_check = time.monotonic() + HANDOVER_CHECK_S
        while not stop.is_set():
            if self.held.is_set():
                # A request written before we held the partition is behind our first fetch: read it now, once
                # per membership (a --once run acquires twice: to skip held flows, then to copy).
                if not self._standing_checked:
                    self._standing_checked = True
                    if self._asked_by(self._watch.standing() if self._watch is not None else None):
                        return False
                self._announce()
                if said_standby:
                    log.warning(
                        "flow=%s: this run took over the lease on %s and starts copying", self.flow, self.target
                    )
                return True
            if self._error is not None:
                raise KafkaOperationError(
                    self.target,
                    f"joining lease group {lease_group(self.source, self.target)}",
                    self._error.str(),
                    code=error_name(self._error),
                    principal=principal_of(self._consumer_settings),
                )
            if not wait and self._decided.is_set():
                return False
            if wait and self._decided.is_set() and not said_standby:
                holder = self.current_holder()
                described = holder.describe() if holder else "another run"
                log.warning(
                    "flow=%s is held by %s; this run stands by and takes over if the holder stops", self.flow, described
                )
                if on_standby is not None:
                    on_standby(described)
                said_standby = True
            if wait and self._watch is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + HANDOVER_CHECK_S
                if self._asked_by(self._watch.standing()):
                    return False  # a standby leaves too, or it would take the lease the holder lets go of
            if not wait and time.monotonic() > deadline:
                raise KafkaOperationError(
                    self.target,
                    f"joining lease group {lease_group(self.source, self.target)}",
                    "no assignment from the group coordinator in time",
                )
            stop.wait(0.05)
        return False

    def join(self) -> None:
        """Join the lease group without waiting for the answer (``acquire`` waits), so that the joins of several
        flows overlap: a broker can take seconds to form a group."""
        if self._thread is None:
            self._start()

    def _asked_by(self, who: str | None) -> bool:
        """Note a cut-over's request (True) so that the caller lets go of the flow."""
        if who is None:
            return False
        if not self.handed_over.is_set():
            log.warning("flow=%s: %s asks for the flow; handing it over", self.flow, who)
        self.requested_by = who
        self.handed_over.set()
        self.lost.set()
        return True

    def _start(self) -> None:
        for event in (self._closing, self._decided, self.held, self.lost, self.handed_over):
            event.clear()  # a lease released for a hand-over is joined again when the flow comes back
        self._error, self.requested_by, self._standing_checked = None, None, False
        self._consumer = new_consumer(self._consumer_settings)
        try:
            self._consumer.subscribe(
                [LEASE_TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        except KafkaException as exc:
            raise wrap_kafka_error(self.target, f"joining lease group for {self.flow}", exc) from None
        self._thread = threading.Thread(target=self._keep_alive, name=f"lease {self.flow}", daemon=True)
        self._thread.start()

    def _keep_alive(self) -> None:
        """Poll the group consumer: that is what sends its heartbeats and runs the rebalance callbacks."""
        while not self._closing.is_set():
            try:
                msg = self._consumer.poll(0.2)
            except (KafkaException, RuntimeError) as exc:
                if not self._closing.is_set():
                    log.warning("flow=%s lease: %s", self.flow, exc)
                continue
            if msg is None:
                continue
            if (error := msg.error()) is None:
                if self._watch is not None and self.held.is_set():
                    self._asked_by(self._watch.in_record(msg.key(), msg.value()))
                continue
            # An ACL refusing the group or the topic does not pass by waiting (librdkafka would rejoin forever).
            if error.fatal() or error.code() in _REFUSED:
                self._error = error
            elif error.code() == KafkaError.INVALID_SESSION_TIMEOUT:
                # Not fatal to librdkafka, which rejoins forever; but the broker refuses this timeout every time.
                self._error = KafkaError(
                    error.code(),
                    (
                        f"{error.str()}: mm2py.lease.session.timeout.ms = {self._session_timeout_ms} is outside the "
                        "broker's group.min.session.timeout.ms..group.max.session.timeout.ms (6000..1800000 by default)"
                    ),
                )

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        if any(tp.partition == 0 for tp in partitions):
            self.held.set()
            self.lost.clear()
        self._decided.set()

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        if any(tp.partition == 0 for tp in partitions) and self.held.is_set() and not self._closing.is_set():
            log.warning(
                "flow=%s: the lease on %s was taken away by the group; stopping this flow", self.flow, self.target
            )
            self.held.clear()
            self.lost.set()

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._on_revoke(consumer, partitions)

    # -- who holds it ------------------------------------------------------------------------------------

    def _announce(self) -> None:
        """Write who holds the lease now (compacted by flow), for the runs that find it taken."""
        producer = new_producer(self._producer_settings)
        value = json.dumps(
            {"holder": self.identity, "since": int(time.time() * 1000), "run": uuid.uuid4().hex[:8]}
        ).encode()
        producer.produce(LEASE_TOPIC, value, self.flow.encode(), 0)
        if producer.flush(10) > 0:
            log.warning("flow=%s: could not record the lease holder on %s", self.flow, self.target)

    def current_holder(self, timeout_s: float = 15.0) -> LeaseHolder | None:
        """The newest holder record of this flow, if any."""
        return read_lease_holder(self.target, self._consumer_read_settings, self.flow, timeout_s)

    # -- leaving -------------------------------------------------------------------------------------------

    def release(self) -> None:
        """Leave the group at once, so a standby takes over without waiting for the session timeout."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._consumer is not None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:
                log.debug("flow=%s lease: close: %s", self.flow, exc)
            self._consumer = None
        self.held.clear()

"""The copy contract: what the driver sends to a copy task and what the task sends back.

Both copy paths (``record_copy``, record by record; ``batch_copy``, whole record batches) take a
:class:`CopySpec` and :class:`PartitionRange` s and return one :class:`CopyResult` per range, so the driver's
Spark runner, its retry rules and its summary lines do not care which path ran. Everything here is small,
frozen and picklable: it crosses the Spark boundary with every task, and carries no open client.

May import: ``mm2py.errors`` and ``mm2py.metrics.measurement`` only (both sides of Spark import this).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from mm2py.client_settings import ClientSettings
from mm2py.errors import Failure
from mm2py.metrics.measurement import PartitionMeasurement

Path = Literal["batch", "record"]


@dataclass(frozen=True)
class CopyPath:
    """The copy path of one flow and, for the record path, why: decided once on the driver
    (:func:`mm2py.control.copy_path.choose_copy_path`), shown by ``plan``, ``run`` and the metrics, and carried
    to the tasks in :class:`CopySpec`."""

    path: Path
    reason: str = ""

    @property
    def batch(self) -> bool:
        return self.path == "batch"

    def describe(self) -> str:
        return self.path if not self.reason else f"{self.path} ({self.reason})"


# The headers of a following task's report (executor/driver_link.py sends them, engine/task_control.py reads them
# before the body): the run's token, and the flow (percent-encoded: a header is Latin-1), whose partitions bound
# the body.
TOKEN_HEADER = "X-Mm2py-Token"
FLOW_HEADER = "X-Mm2py-Flow"


@dataclass(frozen=True)
class ControlEndpoint:
    """Where a following task reports to the driver (its progress, every second) and learns whether to go on:
    the driver's task-control endpoint (:mod:`mm2py.engine.task_control`), this job's generation of the flow and
    the run's secret, so that nothing but this run's tasks is heard."""

    url: str
    token: str = field(repr=False)
    generation: int = 0


def slot_transactional_id(source: str, slot: int) -> str:
    """The transactional.id of exactly-once task slot ``slot`` of a flow from ``source``: MM2's own naming for a
    source task, ``<group.id>-<connector>-<task>`` (KIP-618) with a dedicated MM2's group.id ``<source>-mm2``, so an
    MM2 and an mm2py taking a flow over from each other fence each other's producers."""
    return f"{source}-mm2-MirrorSourceConnector-{slot}"


@dataclass(frozen=True)
class CopySpec:
    """What every task of one flow needs; small, plain and picklable (shipped with each task)."""

    flow: str
    source: str
    target: str
    consumer_settings: Mapping[str, str] = field(repr=False)
    producer_settings: Mapping[str, str] = field(repr=False)
    syncs_producer_settings: Mapping[str, str] | None = field(repr=False)
    # How a retried task reads the progress its predecessor recorded on the target (read_committed).
    target_consumer_settings: Mapping[str, str] = field(repr=False)
    # How the batch path's own client reaches each cluster, as the same clients above (library-neutral).
    consumer_connection: ClientSettings = field(repr=False)
    producer_connection: ClientSettings = field(repr=False)
    syncs_producer_connection: ClientSettings | None = field(repr=False)
    target_consumer_connection: ClientSettings = field(repr=False)
    syncs_topic: str | None
    progress_topic: str
    offset_lag_max: int
    dense_offset_syncs: bool = True
    dense_syncs_topic: str | None = None  # mm2py's own syncs (cleanup.policy=delete), None when disabled
    provenance: bool = False
    exactly_once: bool = False
    copy_path: CopyPath = field(default_factory=lambda: CopyPath("record"))  # decided once (control.copy_path)
    poll_timeout_s: float = 1.0
    stall_timeout_s: float = 120.0
    flush_timeout_s: float = 300.0
    # Continuous mode on the batch path: the tasks follow their partitions, copying what arrives, until the
    # driver tells them to stop (it is asked through this endpoint); None: copy the ranges and end.
    control: ControlEndpoint | None = None
    # mm2py.continuous.fetch.min.interval.ms: a following task fetches from a broker at most this often.
    follow_fetch_min_interval_s: float = 0.0
    # How often a task records the progress of what the target acknowledged (at-least-once): a task that dies
    # (its executor lost, its process killed) copies again at most this much. MM2's offset.flush.interval.ms,
    # at most PROGRESS_INTERVAL_S so that ``mm2py lag`` moves within seconds; a following task at most every
    # report (every second).
    progress_interval_s: float = 5.0
    # MM2's offset.flush.interval.ms: a following task sends MM2's delayed offset syncs (the newest record of each
    # partition that no due sync covered) this often, as MM2 sends them at each commit.
    offset_flush_interval_s: float = 60.0
    # Exactly-once: partitions are spread over this many transactional producers (task slots), each slot one Spark
    # task with one transactional.id, on either path (0: not exactly-once).
    exactly_once_slots: int = 0
    # The batch path's (producer id, epoch) each slot's task writes with, initialized for this job by the driver
    # (:class:`mm2py.control.fencing.SlotEpochs`): a batch-path task never initializes its transactional.id itself.
    slot_producers: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    transaction_timeout_ms: int = 60_000
    syncs_on_target: bool = False  # offset-syncs.topic.location = target: the syncs join the transactions
    # mm2py.throughput.max.bytes.per.second of the flow (0: no limit), and how many partition ranges the job
    # shares it between (set by the driver for each job): each task gets its ranges' share.
    throughput_bytes_per_s: int = 0
    job_ranges: int = 0

    @property
    def following(self) -> bool:
        """Whether the tasks follow their partitions until the driver stops them (continuous mode on the batch
        path) rather than copy their ranges and end."""
        return self.control is not None

    @property
    def fetch_min_interval_s(self) -> float:
        """How far apart a task's fetches to one broker go: ``follow_fetch_min_interval_s`` while following, else
        0 (a range is copied as fast as the source answers). The fetcher spaces by it and the sender's default
        linger depends on it, so both read it here."""
        return self.follow_fetch_min_interval_s if self.following else 0.0

    def task_throughput(self, ranges: int) -> float:
        """Bytes per second a task copying ``ranges`` of the job's ranges may copy (0: no limit): the flow's limit
        shared in proportion to partitions, so tasks that all copy add up to the limit."""
        if self.throughput_bytes_per_s <= 0:
            return 0.0
        return self.throughput_bytes_per_s * min(1.0, ranges / max(1, self.job_ranges))

    def slot_transactional_id(self, slot: int) -> str:
        """The transactional.id of task slot ``slot`` on either path (:func:`slot_transactional_id`)."""
        return slot_transactional_id(self.source, slot)

    def slot_of(self, topic: str, partition: int) -> int:
        """The task slot (and so the transactional.id) a source partition is copied under: a stable hash, the
        same on every host and in every run with the same slot count."""
        return zlib.crc32(f"{topic}\0{partition}".encode()) % max(1, self.exactly_once_slots)


@dataclass(frozen=True)
class PartitionRange:
    """Copy source ``topic``-``partition`` offsets [start, end) into ``remote_topic``, same partition."""

    topic: str
    partition: int
    remote_topic: str
    start: int
    end: int


@dataclass(frozen=True)
class CopyResult:
    topic: str
    partition: int
    start: int
    next_offset: int  # where the next range starts (after the last record or marker read)
    last_offset: int  # offset of the last record read (copied, or skipped as a cycle), -1 if none
    records: int
    bytes: int
    syncs: int
    seconds: float
    # Why the range stopped before its end (records and next_offset count what it copied before); None: it did not.
    error: Failure | None = None
    measurement: PartitionMeasurement | None = None  # MM2's per-partition metrics of what was copied
    source_end: int = -1  # the source partition's end offset when the task last fetched it; -1: not known


def failed_result(rng: PartitionRange, failure: Failure) -> CopyResult:
    return CopyResult(rng.topic, rng.partition, rng.start, rng.start, -1, 0, 0, 0, 0.0, failure)

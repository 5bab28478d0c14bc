"""mm2py's own client defaults, next to the translation of MM2's client keys (``settings.py``).

They tune the copy path; anything the user sets for a client wins over a default, and nothing wins over the
forced settings, which the copy task's correctness relies on.
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.client_settings import COPY_BATCH_SIZE, COPY_FETCH_WAIT_MS, COPY_LINGER_MS

# isolation.level: librdkafka defaults to read_committed, Java (and so MM2) to read_uncommitted.
CONSUMER_DEFAULTS = {
    "isolation.level": "read_uncommitted",
    "fetch.queue.backoff.ms": "10",
    "queued.max.messages.kbytes": "65536",
    "fetch.wait.max.ms": str(COPY_FETCH_WAIT_MS),
}
PRODUCER_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": str(COPY_LINGER_MS),
    "batch.size": str(COPY_BATCH_SIZE),
    "batch.num.messages": "10000",
    "queue.buffering.max.messages": "200000",
}
# The copy task relies on partition EOF to finish ranges that end in transaction markers, and the progress
# record needs Connect's key->partition mapping. A copy task always starts at an offset the driver chose, so an
# offset the source no longer holds (deleted before it was copied) must stop it with an error the driver counts
# as lost records, never move it silently elsewhere: auto.offset.reset = error (the user's value still decides
# where a partition without progress starts, on the driver).
CONSUMER_FORCED = {"enable.partition.eof": "true", "enable.auto.commit": "false", "auto.offset.reset": "error"}
PRODUCER_FORCED = {"partitioner": "murmur2_random"}


def copy_consumer_settings(user: Mapping[str, str], group_id: str, *, exactly_once: bool) -> dict[str, str]:
    """The source consumer of copy tasks; exactly-once copies committed records only."""
    settings = {**CONSUMER_DEFAULTS, **user, **CONSUMER_FORCED, "group.id": group_id}
    if exactly_once:
        settings["isolation.level"] = "read_committed"
    return settings


def copy_producer_settings(user: Mapping[str, str], *, exactly_once: bool) -> dict[str, str]:
    """The target producer of copy tasks; exactly-once gives each range's transaction room to finish."""
    settings = {**PRODUCER_DEFAULTS, **user, **PRODUCER_FORCED}
    if exactly_once:
        settings.setdefault("transaction.timeout.ms", "300000")
    return settings


def syncs_producer_settings(user: Mapping[str, str]) -> dict[str, str]:
    return {**PRODUCER_DEFAULTS, **user}

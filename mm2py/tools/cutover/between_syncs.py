"""Exact positions where MM2's syncs give none: records matched one by one between the source and the target.

A flow Java MirrorMaker 2 replicated has MM2's syncs only: one every ``offset.lag.max`` records at best, sparser
further back (KIP-1292), so a group between two of them translates by MM2's rule, one past the sync below it, and
re-reads an unknown number of records. At a planned cut-over both clusters are there to read: from that sync on, the
target partition holds the source partition's records in order, so reading the source from the sync to the group's
last processed record and the target from the sync's downstream offset, and matching each record (verify's
fingerprint: key, value, headers, timestamp), finds where that last record landed; the group resumes right after it.
Where a record does not match (another source writes the partition, a transformation changed a record), the row
keeps MM2's answer and says the re-read is unknown. Reads at most ``MATCH_LIMIT`` records a partition. Driver side
only.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from mm2py.config.flow import FlowConfig
from mm2py.errors import KafkaOperationError
from mm2py.librdkafka.partition_reader import PartitionReader
from mm2py.mirror.translation import Translation
from mm2py.tools.cutover.report import SourceRow
from mm2py.tools.verify.matching import fingerprint

log = logging.getLogger(__name__)
MATCH_LIMIT = 200_000


def matched(flow: FlowConfig, rows: list[SourceRow]) -> list[SourceRow]:
    """``rows`` with each conservative translation replaced by the matched position where one is found."""
    return [_match(flow, r) if r.row.translation.method == "conservative" else r for r in rows]


def _match(flow: FlowConfig, r: SourceRow) -> SourceRow:
    row, offsets = r.row, r.offsets
    sync = offsets.sync_below(row.upstream_offset - 1) if offsets is not None else None
    if sync is None or row.upstream_offset - sync.upstream > MATCH_LIMIT:
        return r
    try:
        processed = _read(
            flow.source,
            # As MM2's consumer read the source: uncommitted records too, unless the flow says otherwise.
            {"isolation.level": "read_uncommitted", **flow.source_consumer.settings()},
            row.topic,
            row.partition,
            sync.upstream,
            row.upstream_offset - 1,
        )
        copied = _read(
            flow.target,
            flow.target_consumer.settings(),
            row.remote_topic,
            row.partition,
            sync.downstream,
            None,
            len(processed),
        )
    except KafkaOperationError as exc:
        log.warning("flow=%s: matching %s-%d record by record failed: %s", flow.name, row.topic, row.partition, exc)
        return r
    if not processed or [c for _o, c in copied] != [c for _o, c in processed]:
        return r  # not the source's records one for one from the sync on: MM2's answer stands
    landed = copied[-1][0] + 1
    reason = f"found record by record after MM2's sync at {sync.upstream} (MM2's rule: {row.translation.offset})"
    return replace(r, row=replace(row, translation=Translation(row.upstream_offset, landed, "exact", reason)))


def _read(
    alias: str, settings: dict[str, str], topic: str, partition: int, start: int, last: int | None, count: int = 0
) -> list[tuple[int, tuple[Any, ...]]]:
    """(offset, content) of the records of one partition from ``start``: up to offset ``last``, or ``count``
    records when ``last`` is None."""
    out: list[tuple[int, tuple[Any, ...]]] = []
    settings = {**settings, "group.id": f"mm2py-reader-{alias}"}  # never commits (PartitionReader)
    starts = {(topic, partition): start}
    with PartitionReader(alias, settings, starts, purpose="matching records", timeout_s=60) as reader:
        for msg in reader.records():
            if last is not None and msg.offset() > last:
                break
            out.append((msg.offset(), fingerprint(msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])))
            if (last is not None and msg.offset() >= last) or (last is None and len(out) >= count):
                break
    return out

"""Where a source partition resumes, and what it lost: the one rule ``run`` copies by and ``lag`` reports by.

MM2's task seeks to the stored progress + 1, or leaves the position to the consumer's ``auto.offset.reset``
when nothing is stored. mm2py adds what a run that comes back (cron, a restart, a standby taking over) needs:

- a start taken from ``auto.offset.reset`` or ``mm2py.start.timestamp`` is recorded as progress at once, so the
  next run continues from it instead of choosing again and skipping what was produced in between;
- a source partition that no longer holds the stored position is said out loud, and what it lost is counted
  (:mod:`mm2py.mirror.loss`): records deleted before they were replicated (retention, DeleteRecords) are the
  gap between the position and the new log start; a partition that now ends before the position was
  re-created or truncated, and loses the old partition's records after the position that a run saw but did
  not copy. Either way it is replicated from what it holds now, and the new start is recorded at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mm2py.mirror.loss import Gap, LossState

# librdkafka's names for "start at the end"; anything else (earliest, smallest, beginning) starts at the start.
_LATEST = ("latest", "largest", "end")

Reason = Literal["progress", "auto.offset.reset", "start.timestamp", "deleted", "truncated"]


@dataclass(frozen=True)
class Resume:
    """Where copying of one partition starts, why, and what was lost on the way."""

    start: int
    reason: Reason
    record: bool  # the start is not stored as progress yet: write start - 1 now
    gap: tuple[int, int] | None = None  # offsets (first, last) lost now, counted once
    loss: LossState = field(default_factory=LossState)  # the partition's losses with this gap counted
    position: int = -1  # the replicated position the partition had (stored progress + 1), -1 if none

    @property
    def lost(self) -> int:
        return 0 if self.gap is None else self.gap[1] - self.gap[0] + 1

    def gap_of(self, topic: str, partition: int) -> Gap | None:
        return None if self.gap is None else Gap(topic, partition, *self.gap)

    @property
    def warning(self) -> str | None:
        lost = "" if self.gap is None else f"offsets {self.gap[0]}-{self.gap[1]} ({self.lost} records) "
        if self.reason == "deleted" and self.gap is not None:
            return (
                f"{lost}were deleted from the source before they were replicated (retention or DeleteRecords); "
                f"replicating from offset {self.start}"
            )
        if self.reason == "truncated":
            return (
                f"the source partition ends before the replicated position {self.position}: the topic was "
                f"re-created or truncated; replicating it again from offset {self.start}"
                + (f"; {lost}of the old partition were never replicated" if lost else "")
            )
        return None


def resume_position(
    progress: int | None,
    earliest: int,
    latest: int,
    auto_offset_reset: str,
    *,
    start_at: int | None = None,
    loss: LossState | None = None,
) -> Resume:
    """The offset the next copied record of a partition has.

    ``progress`` is the last replicated offset stored in ``mm2-offsets.<source>.internal`` (None when nothing
    is stored; -1 is what mm2py records for "start at offset 0", MM2 itself never writes it), ``earliest`` and
    ``latest`` the source partition's log start and end offsets. ``start_at`` is where a partition without
    progress starts when ``mm2py.start.timestamp`` is set: the offset ListOffsets gave for that time (-1: no
    record that late, so the end). ``loss`` is what is known of the partition's losses; its ``end`` is the
    highest end offset a run saw, which prices the lost tail of a re-created topic.
    """
    before = loss or LossState()
    if progress is None:
        if start_at is not None:
            start = latest if start_at < 0 else min(max(start_at, earliest), latest)
            return Resume(start, "start.timestamp", record=True, loss=before)
        start = latest if auto_offset_reset.strip().lower() in _LATEST else earliest
        return Resume(start, "auto.offset.reset", record=True, loss=before)
    position = progress + 1
    if position < earliest:
        first = max(position, before.counted_to)
        gap = (first, earliest - 1) if first < earliest else None
        lost = before.lost + (0 if gap is None else earliest - first)
        after = LossState(lost, max(before.counted_to, earliest), before.end)
        return Resume(earliest, "deleted", record=True, gap=gap, loss=after, position=position)
    if position > latest:
        first = max(position, before.counted_to)
        gap = (first, before.end - 1) if before.end > first else None
        lost = before.lost + (0 if gap is None else before.end - first)
        # The offsets of the new partition start again: what is counted and seen starts again with them.
        after = LossState(lost, earliest, -1)
        return Resume(earliest, "truncated", record=True, gap=gap, loss=after, position=position)
    return Resume(position, "progress", record=False, loss=before, position=position)


def lag_records(resume: Resume, latest: int) -> int:
    """Records a run started now would copy from this partition (markers included, as offsets count them)."""
    return max(0, latest - resume.start)

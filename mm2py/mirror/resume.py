"""Where a source partition resumes: the one rule ``run`` copies by and ``lag`` reports by.

MM2's task seeks to the stored progress + 1, or leaves the position to the consumer's ``auto.offset.reset``
when nothing is stored. mm2py adds what a run that comes back (cron, a restart, a standby taking over) needs:
a position taken from ``auto.offset.reset`` is recorded as progress at once, so the next run continues from it
instead of resetting again and skipping what was produced in between; and a source partition that no longer
holds the stored position (deleted by retention, or re-created/truncated) is said out loud and replicated from
what it holds now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# librdkafka's names for "start at the end"; anything else (earliest, smallest, beginning) starts at the start.
_LATEST = ("latest", "largest", "end")

Reason = Literal["progress", "auto.offset.reset", "deleted", "truncated"]


@dataclass(frozen=True)
class Resume:
    """Where copying of one partition starts, and why."""

    start: int
    reason: Reason
    record: bool  # the start is not stored as progress yet: write start - 1 now

    @property
    def warning(self) -> str | None:
        if self.reason == "deleted":
            return "offsets before {start} were deleted from the source before they were replicated"
        if self.reason == "truncated":
            return (
                "the source partition ends before the recorded progress: the topic was re-created or "
                "truncated; replicating it again from offset {start}"
            )
        return None


def resume_position(progress: int | None, earliest: int, latest: int, auto_offset_reset: str) -> Resume:
    """The offset the next copied record of a partition has.

    ``progress`` is the last replicated offset stored in ``mm2-offsets.<source>.internal`` (None when nothing
    is stored; -1 is what mm2py records for "start at offset 0", MM2 itself never writes it), ``earliest`` and
    ``latest`` the source partition's log start and end offsets.
    """
    if progress is None:
        start = latest if auto_offset_reset.strip().lower() in _LATEST else earliest
        return Resume(start, "auto.offset.reset", record=True)
    start = progress + 1
    if start < earliest:
        return Resume(earliest, "deleted", record=False)
    if start > latest:
        return Resume(earliest, "truncated", record=True)
    return Resume(start, "progress", record=False)


def lag_records(resume: Resume, latest: int) -> int:
    """Records a run started now would copy from this partition (markers included, as offsets count them)."""
    return max(0, latest - resume.start)

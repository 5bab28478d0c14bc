"""Group offset sync across every flow into one target (driver side).

A merged remote topic is fed by several flows; the offset committed for a group must be safe for all of them,
so the sync looks at the latest translations of every flow with the same target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import REFUSED, GroupOffset, merged_group_offsets, sync_group_offsets

log = logging.getLogger(__name__)


class GroupSyncCoordinator:
    """Commits translated group offsets per target cluster, from the flows' latest translations."""

    def __init__(self, pool: AdminPool) -> None:
        self.flows: list[tuple[FlowConfig, Callable[[], list[GroupOffset]]]] = []
        self.pool = pool
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}
        self._refused: set[tuple[str, str]] = set()  # (target, group) whose refusal was said

    def add(self, flow: FlowConfig, latest: Callable[[], list[GroupOffset]]) -> None:
        """A flow of the run and how to ask for its latest translations (each flow's sync adds itself)."""
        if flow.sync_group_offsets_enabled:
            with self._lock:
                self.flows.append((flow, latest))

    def maybe_sync(self, target: str, force: bool = False) -> None:
        flows = [(f, rows) for f, rows in self.flows if f.target == target]
        if not flows:
            return
        with self._lock:
            now = time.monotonic()
            if not force and now < self._next.get(target, 0.0):
                return
            first = flows[0][0]
            self._next[target] = now + first.sync_group_offsets_interval_seconds
            offsets = merged_group_offsets(row for _f, rows in flows for row in rows())
            outcome = sync_group_offsets(self.pool.admin(target, first), offsets)
        for group, what in outcome.items():
            if not what.startswith(REFUSED):
                log.info("group offset sync target=%s group=%s %s", target, group, what)
            elif (target, group) not in self._refused:  # once per group, not at every interval
                self._refused.add((target, group))
                log.warning("group offset sync target=%s group=%s %s", target, group, what)

    def sync_all(self) -> None:
        for target in sorted({f.target for f, _rows in self.flows}):
            self.maybe_sync(target, force=True)

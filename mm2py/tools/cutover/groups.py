"""Which groups a cut-over moves (driver side): shared by the flow's own topics (switch.py) and the copies that go
home (returns.py)."""

from __future__ import annotations

import re

from mm2py.config.flow import FlowConfig
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.mirror.filters import load_group_filter


def moving_groups(
    flow: FlowConfig, source: ClusterAdmin, pattern: re.Pattern[str] | None, topics: set[str]
) -> list[str]:
    """The source groups that move: those ``--groups`` matches (else those the flow checkpoints, MM2's filter)
    with a committed offset on one of ``topics``. Other groups have nothing to move, so their members
    (consumers of other topics) must not block the cut-over."""
    if pattern is not None:
        named = [g for g in source.list_groups() if pattern.fullmatch(g)]
    else:
        group_filter = load_group_filter(flow.group_filter_class, flow.plugin_config())
        named = [g for g in source.list_groups() if group_filter.should_replicate_group(g)]
    return [g for g in named if any(topic in topics for topic, _p in source.committed_offsets(g))]

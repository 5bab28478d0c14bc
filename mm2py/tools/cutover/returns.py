"""Groups that come home at a cut-over: on X, groups reading the other direction's copies (``Y.orders``) move to
the originals on Y when the cut-over of X->Y moves X's groups.

The case it is for: A->B was cut over, the applications ran on B, A came back and ``failback`` started B->A.
The groups that read A's records on B (``A.orders``, the remote topic of A->B) are still there when
``cutover --flow B->A`` returns the applications to A; on A those records are ``orders`` again. Each such group
resumes on A at the next record it has not read: A->B's offset syncs read backwards
(``OffsetMap.translate_back``), exact between dense syncs. A group that had read everything B got from A
resumes at the first record B never got: A's divergent tail, which it processes once, on A.

Under IdentityReplicationPolicy the reverse flow's remote topic has the topic's own name, so the copies cannot
be told from the originals by name: no group is moved back then (the flow's own translation covers ``orders``).
Driver side only.
"""

from __future__ import annotations

import logging
import re

from mm2py.config.flow import FlowConfig
from mm2py.control.admin_pool import AdminPool
from mm2py.control.checkpoints import FlowTranslator, GroupOffset
from mm2py.control.plan import build_plan
from mm2py.errors import Mm2pyError
from mm2py.tools.cutover.groups import moving_groups
from mm2py.tools.cutover.report import SourceRow

log = logging.getLogger(__name__)


def returning_rows(
    flow: FlowConfig, reverse: FlowConfig, pool: AdminPool, groups: re.Pattern[str] | None
) -> list[SourceRow]:
    """For the cut-over of ``flow`` (X->Y): the rows of X's groups that read ``reverse``'s (Y->X) remote topics,
    translated back to Y's own topics. None where ``reverse`` replicates nothing into X under its own names."""
    x = pool.admin(flow.source, flow)
    try:
        plan = build_plan([reverse], pool).flows[0]
    except Mm2pyError as exc:  # said, not hidden: a group reading its copies stays where it is on X
        log.warning("flow=%s: groups reading %s's copies are not moved back: %s", flow.name, reverse.name, exc)
        return []
    copies = {t.remote_topic: t.topic for t in plan.topics if t.remote_topic != t.topic}
    existing = x.list_topics()
    copies = {remote: topic for remote, topic in copies.items() if remote in existing}
    if not copies:
        return []
    translator = FlowTranslator(reverse, plan, pool.admin(reverse.source, reverse))
    rows = []
    for group in moving_groups(flow, x, groups, set(copies)):
        for (remote, partition), (offset, metadata) in sorted(x.committed(group).items()):
            if remote not in copies:
                continue
            topic = copies[remote]
            offsets = translator.maps.get((topic, partition))
            back = (
                offsets.translate_back(offset, translator.progress.get((topic, partition)))
                if offsets is not None
                else None
            )
            if back is None:
                continue  # no syncs: the reverse never copied this partition
            rows.append(SourceRow(flow.source, GroupOffset(group, remote, topic, partition, offset, back, metadata)))
    return rows

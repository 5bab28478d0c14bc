"""``mm2py verify``: compare what a flow replicated with what its source holds, record by record.

For every replicated partition the range is upstream offsets [first replicated, progress]. Both sides are
read window by window (at most ``window_records`` offsets of each side per window), so memory stays bounded
on partitions of any size. Every record is reduced to a fingerprint of (key, value, headers, timestamp);
each side gets an order-sensitive digest, and the records are matched to find what is missing, altered or
duplicated downstream.

Which downstream offsets hold *this* source's records comes from mm2py's dense offset syncs: between two
dense syncs of a one-to-one run the mapping is exact, and outside runs sit other sources' records (merged
topics) or copies from an interrupted task. Records are matched at the offset the syncs name first and by
content second, so a target that lost or gained a record is reported at that record, not as a shift of
everything after it. Where a partition has no dense syncs (Java MM2), records are matched by content only,
and the result says so. A record is reported as a duplicate when its copy lies within about one window of
the copy that counts: an interrupted copy task (at-least-once) leaves up to ``mm2py.range.max.records``
copies just before its retry's, so a larger ``--window-records`` finds all of a large batch's.
"""

from __future__ import annotations

from mm2py.tools.verify.flows import Method as Method
from mm2py.tools.verify.flows import PartitionVerification as PartitionVerification
from mm2py.tools.verify.flows import Status as Status
from mm2py.tools.verify.flows import verify_flows as verify_flows
from mm2py.tools.verify.matching import MAX_PROBLEMS as MAX_PROBLEMS
from mm2py.tools.verify.matching import Discrepancy as Discrepancy
from mm2py.tools.verify.matching import Fingerprint as Fingerprint
from mm2py.tools.verify.matching import Kind as Kind
from mm2py.tools.verify.matching import PartitionCheck as PartitionCheck
from mm2py.tools.verify.matching import Reader as Reader
from mm2py.tools.verify.matching import check_partition as check_partition
from mm2py.tools.verify.matching import fingerprint as fingerprint
from mm2py.tools.verify.windows import WINDOW_RECORDS as WINDOW_RECORDS
from mm2py.tools.verify.windows import Window as Window
from mm2py.tools.verify.windows import expected_downstream as expected_downstream
from mm2py.tools.verify.windows import plan_windows as plan_windows
from mm2py.tools.verify.windows import runs_from_points as runs_from_points

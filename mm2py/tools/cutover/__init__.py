"""``mm2py cutover``: moving a flow's consumer groups from its source to its target (``switch``), waiting for
the source's producers to stop (``quiet``), and the report of what was found and done (``report``).
``mm2py failover``: the same move when the source is lost, from what the target holds alone (``failover``), and
its recovery point and the groups' landings (``recovery``).

May import what ``mm2py.tools`` may: ``control``, ``config``, ``mirror``, ``librdkafka``, and ``tools.lag``;
the copy to lag 0 is handed in by the CLI, so the engine (and pyspark) stay out of this package.
"""

from __future__ import annotations

from mm2py.tools.cutover.report import CutoverReport, GroupMove, TopicCheck
from mm2py.tools.cutover.switch import CutoverOptions, cut_over, reset_mark

__all__ = ["CutoverOptions", "CutoverReport", "GroupMove", "TopicCheck", "cut_over", "reset_mark"]

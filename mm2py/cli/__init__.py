"""The command line: declares options, hands off to library code, renders results. No logic lives here.

``app`` (the Typer app and its one error boundary: every ``Mm2pyError`` becomes one line and its exit code),
``render``, ``lag_view``, ``verify_view``, ``cutover`` and ``failover`` (tables for people, JSON for scripts),
``cutover_commands`` (the cut-over commands: ``cutover``, ``failover``, ``failback``), ``options`` (the file
argument and option values several commands parse), ``live`` (a run's progress display) and ``endpoint``
(the metrics port as the options and the file ask for it).

May import every package below it: ``mm2py.engine`` for ``run`` only (``app`` imports it, and ``live`` its
stats, when that command runs, so the others start without pyspark), ``mm2py.tools``, ``mm2py.metrics``,
``mm2py.control``, ``mm2py.config``, ``mm2py.mirror``; and ``mm2py`` (its version).
"""

"""``mm2py``: the Typer app and its single error boundary.

Commands declare options and call library code. Only ``main()`` turns exceptions into one line on stderr
and an exit code (0 ok, 1 check failed, 2 usage or config error, 3 runtime failure), and every line printed
passes through the secret redactor first.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Annotated

import typer

from mm2py import __version__
from mm2py.cli import cutover_commands, render
from mm2py.cli.loading import learn_secrets as _learn_secrets
from mm2py.cli.loading import load_config as _load
from mm2py.cli.options import ConfigFile
from mm2py.cli.options import regex as _regex
from mm2py.cli.options import timestamp as _timestamp
from mm2py.config import MirrorMakerConfig, validate
from mm2py.config.spark_security import warn_if_spark_unprotected
from mm2py.control.plan import build_plan
from mm2py.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, Mm2pyError, UsageError
from mm2py.secrets import RedactingFilter

app = typer.Typer(
    name="mm2py",
    help="Kafka MirrorMaker 2, re-made in Python on Spark. Reads MM2's connect-mirror-maker.properties.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,  # locals would print passwords
)

_redactor = render.redactor
log = logging.getLogger("mm2py")
# Set by --verbose: an internal error (a bug) then shows its traceback, redacted, above the one line.
_show_traceback = False

FlowsOption = Annotated[str | None, typer.Option("--flows", help="Comma-separated flows, e.g. dc1->target,dc2->target")]


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Log at INFO level to stderr, and show the traceback of an internal error"
        ),
    ] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit")] = False,
) -> None:
    if version:
        render.out.print(f"mm2py {__version__}")
        raise typer.Exit(0)
    global _show_traceback
    _show_traceback = verbose
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)
    # librdkafka's connection chatter repeats what the one error line says; show it only when asked.
    logging.getLogger("mm2py.librdkafka").setLevel(logging.INFO if verbose else logging.CRITICAL)


@app.command("validate")
def validate_command(file: ConfigFile) -> None:
    """Check a properties file offline: every problem at once, as file:line key = value: reason."""
    mm = MirrorMakerConfig.from_file(file)
    _learn_secrets(mm)
    problems = validate(mm)
    render.print_problems(problems)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    flows = ", ".join(map(str, mm.enabled_flows())) or "none"
    render.out.print(f"{file}: {errors} error(s), {warnings} warning(s); enabled flows: {flows}", markup=False)
    raise typer.Exit(EXIT_USAGE if errors else EXIT_OK)


@app.command("plan")
def plan_command(
    file: ConfigFile,
    flows: FlowsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON")] = False,
) -> None:
    """Connect to the clusters; show what `run` would replicate, create or grow, and the features ACLs allow."""
    from mm2py.control.admin_pool import AdminPool
    from mm2py.control.rights import plan_rights
    from mm2py.control.topics import with_configs_not_synced

    loaded = _load(file, flows)
    first = loaded.flows[0]
    warn_if_spark_unprotected(first.spark_master, dict(first.spark_conf))  # what `run` would ship its tasks by
    pool = AdminPool()
    plan = with_configs_not_synced(list(loaded.flows), build_plan(list(loaded.flows), pool), pool)
    rights = plan_rights(list(loaded.flows), plan, pool)
    render.print_plan_json(plan, rights) if as_json else render.print_plan(plan, rights)


@app.command("run")
def run_command(
    file: ConfigFile,
    once: Annotated[bool, typer.Option("--once", help="Copy what the sources hold now, then exit (for cron)")] = False,
    flows: FlowsOption = None,
    clusters: Annotated[
        list[str] | None,
        typer.Option(
            "--clusters",
            metavar="ALIAS[,ALIAS]",
            help="Run only the flows whose target is one of these aliases (repeat the option or separate with commas), "
            "as connect-mirror-maker.sh --clusters does",
        ),
    ] = None,
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master (default mm2py.spark.master, else local[*])")
    ] = None,
    deploy_mode: Annotated[str | None, typer.Option("--deploy-mode", help="client or cluster")] = None,
    conf: Annotated[list[str] | None, typer.Option("--conf", help="Spark setting key=value (repeatable)")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=1,
            max=65535,
            help="Serve Prometheus /metrics, /health and /ready on this port while running "
            "(default mm2py.metrics.port; 0 there means none)",
        ),
    ] = None,
    from_timestamp: Annotated[
        str | None,
        typer.Option(
            "--from-timestamp",
            help="Partitions without progress start at their first record at or after this time (ISO 8601, UTC "
            "unless an offset is given, or epoch ms); overrides mm2py.start.timestamp",
        ),
    ] = None,
) -> None:
    """Replicate every enabled flow, one Spark job per flow: --once for cron, else until SIGTERM/SIGINT."""
    from mm2py.cli.endpoint import metrics_endpoint
    from mm2py.cli.live import ProgressView
    from mm2py.engine.run import run  # the engine (and pyspark) load only for this command
    from mm2py.metrics.registry import RunMetrics

    loaded = _load(file, flows, clusters)
    start_ms = _timestamp("--from-timestamp", from_timestamp)
    spark_conf: dict[str, str] = {}
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {item}: write key=value")
        spark_conf[key.strip()] = value.strip()
    metrics = RunMetrics()
    with metrics_endpoint(loaded, metrics_port, metrics), ProgressView() as view:
        stats = run(
            loaded,
            once=once,
            master=master,
            deploy_mode=deploy_mode,
            spark_conf=spark_conf,
            on_progress=view,
            metrics=metrics,
            from_timestamp_ms=start_ms,
        )
        view.summary(stats)


@app.command("lag")
def lag_command(
    file: ConfigFile,
    flows: FlowsOption = None,
    topics: Annotated[str | None, typer.Option("--topics", help="Only source topics matching this regex")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON (a list of rows)")] = False,
    prometheus: Annotated[
        bool, typer.Option("--prometheus", help="Print the Prometheus text format (node_exporter textfile collector)")
    ] = False,
    groups: Annotated[
        bool,
        typer.Option(
            "--groups",
            help="Lag of the consumer groups on the target on remote topics, as "
            "kafka-consumer-groups --describe shows it",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Refresh every --interval seconds until Ctrl-C, showing per row whether lag "
            "grew (↑), shrank (↓) or not (=); thresholds are highlighted, exit code 0",
        ),
    ] = False,
    interval: Annotated[
        float | None, typer.Option("--interval", min=0.1, help="Seconds between --watch refreshes (default 5)")
    ] = None,
    max_lag: Annotated[
        int | None,
        typer.Option(
            "--max-lag", help="Exit 1 if any partition (with --groups: any group partition) lags more records"
        ),
    ] = None,
    max_lag_seconds: Annotated[
        float | None, typer.Option("--max-lag-seconds", help="Exit 1 if any partition lags more seconds")
    ] = None,
    max_lost: Annotated[
        int | None,
        typer.Option("--max-lost", min=0, help="Exit 1 if any partition lost more records before they were replicated"),
    ] = None,
) -> None:
    """Replication lag per flow, topic and partition, in records and seconds, with each flow's heartbeat and
    checkpoint age (exit 1 over a threshold)."""
    from mm2py.cli import lag_view
    from mm2py.tools.lag import LagCheck

    fmt = lag_view.output_format(as_json, prometheus, watch)
    if interval is not None and not watch:
        raise UsageError("--interval needs --watch")
    if groups and max_lag_seconds is not None:
        raise UsageError("--max-lag-seconds does not apply to --groups (group lag is in records: use --max-lag)")
    loaded = _load(file, flows)
    if groups and max_lost is not None:
        raise UsageError("--max-lost does not apply to --groups (records lost are counted per source partition)")
    check = LagCheck(
        list(loaded.flows),
        _regex("--topics", topics),
        groups=groups,
        max_lag=max_lag,
        max_lag_seconds=max_lag_seconds,
        max_lost=max_lost,
    )
    if watch:
        lag_view.watch(check, 5.0 if interval is None else interval)
        return
    snapshot = check.run()
    lag_view.show(snapshot, fmt)
    if lag_view.report_over(snapshot):
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command("verify")
def verify_command(
    file: ConfigFile,
    flows: FlowsOption = None,
    topics: Annotated[str | None, typer.Option("--topics", help="Only source topics matching this regex")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON")] = False,
    window_records: Annotated[
        int,
        typer.Option(
            "--window-records",
            min=1,
            help="Records per side held at once: bounds memory, and how far from its "
            "original a duplicate is still recognised",
        ),
    ] = 50_000,
) -> None:
    """Compare source and target record by record over the replicated range (exit 1 on any mismatch)."""
    from mm2py.cli import verify_view
    from mm2py.tools.verify import verify_flows

    loaded = _load(file, flows)
    pattern = _regex("--topics", topics)
    rows = verify_flows(list(loaded.flows), topics=pattern, window_records=window_records)
    if as_json:
        render.print_json([r.to_json() for r in rows])
    else:
        verify_view.print_verification(rows)
    verify_view.print_problems(rows)
    if any(r.status == "mismatch" for r in rows):
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command("translate-offsets")
def translate_offsets_command(
    file: ConfigFile,
    group: Annotated[str, typer.Option("--group", help="Consumer group on the source cluster")],
    source: Annotated[str, typer.Option("--source", help="Source cluster alias")],
    target: Annotated[str, typer.Option("--target", help="Target cluster alias")],
    topics: Annotated[str | None, typer.Option("--topics", help="Only source topics matching this regex")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON")] = False,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="CSV for kafka-consumer-groups --reset-offsets --from-file")
    ] = False,
    execute: Annotated[
        bool, typer.Option("--execute", help="Commit to the target group (only if it has no active members)")
    ] = False,
) -> None:
    """Translate a group's committed source offsets to the target: exact where possible (dry run by default)."""
    from mm2py.control.admin_pool import AdminPool
    from mm2py.control.checkpoints import FlowTranslator, execute_translation

    if as_json and as_csv:
        raise UsageError("--json and --csv exclude each other")
    loaded = _load(file, f"{source}->{target}")
    flow = loaded.flows[0]
    pool = AdminPool()
    plan = build_plan([flow], pool).flows[0]
    translator = FlowTranslator(flow, plan, pool.admin(flow.source, flow))
    pattern = _regex("--topics", topics)
    wanted = [t.topic for t in plan.topics if pattern is None or pattern.fullmatch(t.topic)]
    rows = translator.translate(group, wanted)
    if as_json:
        render.print_json([r.to_json() for r in rows])
    elif as_csv:
        render.print_csv(rows)
    else:
        render.print_translation(group, flow.name, rows)
    if not rows:
        render.err.print(f"group {group} has no committed offsets on topics that {flow.name} replicates", markup=False)
    if execute:
        committed = execute_translation(pool.admin(flow.target, flow), group, rows)
        render.err.print(f"committed {committed} offset(s) for group {group} on {flow.target}", markup=False)


app.command("cutover")(cutover_commands.cutover_command)
app.command("failover")(cutover_commands.failover_command)
app.command("failback")(cutover_commands.failback_command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: the one error boundary."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactingFilter(_redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    global _show_traceback
    _show_traceback = False
    try:
        # Standalone mode: Typer prints usage errors itself (exit 2) and turns typer.Exit into SystemExit.
        app(args=argv)
    except Mm2pyError as exc:
        _fail(exc.exit_line())
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: still one line, still no secrets; the traceback only when asked
        if _show_traceback:
            sys.stderr.write(_redactor.redact("".join(traceback.format_exception(exc))))
        _fail(f"internal error: {type(exc).__name__}: {exc}" + ("" if _show_traceback else " (-v shows where)"))
        sys.exit(EXIT_RUNTIME)
    sys.exit(EXIT_OK)


def _fail(message: str) -> None:
    sys.stderr.write(f"mm2py: error: {_redactor.redact(message)}\n")
    sys.stderr.flush()

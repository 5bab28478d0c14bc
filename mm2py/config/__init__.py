"""Configuration: MM2 properties files read once into typed, frozen objects.

``load()`` is what commands call: it reads the file, validates all of it, stops at the first error (the
message says how many more there are), and returns the typed configs of the flows asked for.

``properties`` (Java properties, line numbers kept), ``mirror_maker`` (MirrorMakerConfig: ``A.`` and ``A->B.``
flattened), ``flow`` (FlowConfig), ``key_types``, ``keys`` and ``mm2py_keys`` (every key, MM2's types and
defaults), ``values`` (values parsed as Kafka's ConfigDef does), ``validate``, ``not_acted_on`` and ``problems``
(every problem of a file, one line each); ``client_keys`` reads each client's keys into the typed
``mm2py.client_settings`` both client stacks connect with.

May import: ``mm2py.mirror`` (the policy and filter classes a key names), ``mm2py.client_settings``,
``mm2py.librdkafka`` (a client's properties rendered for librdkafka, checked when the file is read).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mm2py.config.flow import ClientConfig, FlowConfig, build_flow_config
from mm2py.config.mirror_maker import Flow, MirrorMakerConfig
from mm2py.config.problems import Problem
from mm2py.config.validate import validate
from mm2py.errors import ConfigError, UsageError

__all__ = [
    "ClientConfig",
    "Flow",
    "FlowConfig",
    "LoadedConfig",
    "MirrorMakerConfig",
    "Problem",
    "flow_and_reverse",
    "load",
    "validate",
]


@dataclass(frozen=True)
class LoadedConfig:
    mm: MirrorMakerConfig
    flows: tuple[FlowConfig, ...]
    warnings: tuple[Problem, ...]
    clusters: tuple[str, ...] | None = None  # --clusters: this node writes only into these targets


def select_flows(
    mm: MirrorMakerConfig, wanted: Sequence[str] | None, clusters: Sequence[str] | None = None
) -> list[Flow]:
    """The enabled flows, or those of ``wanted`` (``--flows``), which must all be enabled.

    ``clusters`` (``--clusters``, as connect-mirror-maker.sh has it) keeps only flows whose *target* is one
    of them: a node placed near some clusters replicates into those. Given together, a flow named in
    ``--flows`` must also target one of ``--clusters``; saying both and getting neither is a usage error.
    """
    enabled = mm.enabled_flows()
    if not enabled:
        raise ConfigError(
            "no flow is enabled, so there is nothing to do",
            source=mm.source,
            allowed="enable one with A->B.enabled = true",
        )
    targets = _target_clusters(mm, clusters, enabled)
    if not wanted:
        return [f for f in enabled if targets is None or f.target in targets]
    chosen: list[Flow] = []
    for text in wanted:
        try:
            flow = Flow.parse(text)
        except ValueError as exc:
            raise UsageError(f"--flows: {exc}") from None
        if flow not in enabled:
            raise UsageError(
                f"--flows: {flow} is not an enabled flow of {mm.source} (enabled: {', '.join(map(str, enabled))})"
            )
        if targets is not None and flow.target not in targets:
            raise UsageError(
                f"--flows: {flow} targets {flow.target}, which is not among --clusters {', '.join(targets)}"
            )
        chosen.append(flow)
    return chosen


def _target_clusters(
    mm: MirrorMakerConfig, clusters: Sequence[str] | None, enabled: list[Flow]
) -> tuple[str, ...] | None:
    """The aliases of ``--clusters`` (each may be a comma list), checked; None when not given."""
    if clusters is None:
        return None
    names = tuple(dict.fromkeys(n for text in clusters for n in (x.strip() for x in text.split(",")) if n))
    if not names:
        raise UsageError(f"--clusters: name at least one cluster (clusters: {', '.join(mm.clusters)})")
    for name in names:
        if name not in mm.clusters:
            raise UsageError(f"--clusters {name}: not a cluster of {mm.source} (clusters: {', '.join(mm.clusters)})")
    if not any(f.target in names for f in enabled):
        # MM2 stops with "No source->target replication flows." here; say which flows there are.
        raise UsageError(
            f"--clusters {', '.join(names)}: no enabled flow targets "
            f"{'it' if len(names) == 1 else 'them'} (enabled: {', '.join(map(str, enabled))})"
        )
    return names


def load(
    path: str | os.PathLike[str],
    *,
    flows: Sequence[str] | None = None,
    clusters: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    select: bool = True,
) -> LoadedConfig:
    """Read, validate and type the file; raises ConfigError (exit 2) on the first error. ``select=False`` types
    no flow (a command that names its flows otherwise, as ``failback``, whose flow may be disabled by then)."""
    mm = MirrorMakerConfig.from_file(path, environ)
    problems = validate(mm)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        first = errors[0].to_error()
        if len(errors) > 1:
            first.reason += f" (and {len(errors) - 1} more errors: run mm2py validate {mm.source})"
        raise first
    chosen = select_flows(mm, flows, clusters) if select else []
    return LoadedConfig(
        mm,
        tuple(build_flow_config(mm, f) for f in chosen),
        tuple(p for p in problems if p.severity == "warning"),
        _target_clusters(mm, clusters, mm.enabled_flows()),
    )


def flow_and_reverse(loaded: LoadedConfig, text: str) -> tuple[FlowConfig, FlowConfig]:
    """``failback --flow A->B``: the typed configs of A->B and of its reverse B->A, which must be enabled (failback
    starts it). A->B itself may be disabled by then: the runbook tells users to keep it off while B is primary."""
    try:
        flow = Flow.parse(text)
    except ValueError as exc:
        raise UsageError(f"--flow: {exc}") from None
    mm = loaded.mm
    for alias in (flow.source, flow.target):
        if alias not in mm.clusters:
            raise UsageError(
                f"--flow {flow}: {alias} is not a cluster of {mm.source} (clusters: {', '.join(mm.clusters)})"
            )
    reverse = Flow(flow.target, flow.source)
    if reverse not in mm.enabled_flows():
        raise ConfigError(
            f"failback starts the reverse flow {reverse}, which is not enabled",
            source=mm.source,
            key=f"{reverse}.enabled",
            allowed=f"{reverse}.enabled = true",
        )
    return build_flow_config(mm, flow), build_flow_config(mm, reverse)

"""Reading the properties file for a command: the redactor learns every secret of the file before anything is
printed, then the file is loaded (validated, typed) and its warnings shown. Shared by every command."""

from __future__ import annotations

from pathlib import Path

from mm2py.cli import render
from mm2py.config import LoadedConfig, MirrorMakerConfig, load
from mm2py.secrets import Redactor


def learn_secrets(mm: MirrorMakerConfig) -> None:
    """Teach the redactor every secret of the file (raw and provider-resolved) before anything is printed."""
    render.redactor.learn(Redactor.from_properties(mm.raw.values()))
    render.redactor.learn(Redactor.from_properties(mm.resolved_values()))


def split_flows(flows: str | None) -> list[str] | None:
    return [f for f in (x.strip() for x in flows.split(",")) if f] if flows else None


def load_config(
    file: Path, flows: str | None, clusters: list[str] | None = None, *, select: bool = True
) -> LoadedConfig:
    """The file, validated; the flows ``flows`` names (else every enabled one), or none with ``select=False``."""
    mm = MirrorMakerConfig.from_file(file)
    learn_secrets(mm)
    loaded = load(file, flows=split_flows(flows), clusters=clusters, select=select)
    render.print_warnings(loaded.warnings)
    return loaded

"""``--clusters``: a node runs only the flows whose target it names, as connect-mirror-maker.sh --clusters."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from mm2py.config import load, select_flows
from mm2py.config.mirror_maker import Flow, MirrorMakerConfig
from mm2py.config.properties import parse_properties
from mm2py.errors import UsageError
from tests.harness.mm2py_cli import mm2py_argv

THREE = """\
clusters = east, west, central
east.bootstrap.servers = east:9092
west.bootstrap.servers = west:9092
central.bootstrap.servers = central:9092
east->west.enabled = true
west->east.enabled = true
east->central.enabled = true
west->central.enabled = true
"""


def mm2(text: str = THREE) -> MirrorMakerConfig:
    return MirrorMakerConfig(parse_properties(textwrap.dedent(text), "mm2.properties"), environ={})


def flows(*names: str) -> list[Flow]:
    return [Flow.parse(n) for n in names]


def test_without_clusters_every_enabled_flow_runs() -> None:
    assert select_flows(mm2(), None) == flows("east->west", "east->central", "west->east", "west->central")


def test_clusters_keeps_only_flows_into_the_named_targets() -> None:
    assert select_flows(mm2(), None, ["west"]) == flows("east->west")
    assert select_flows(mm2(), None, ["central"]) == flows("east->central", "west->central")


def test_clusters_may_be_repeated_or_comma_separated_with_the_same_result() -> None:
    repeated = select_flows(mm2(), None, ["west", "central"])
    commas = select_flows(mm2(), None, ["west, central"])
    assert repeated == commas == flows("east->west", "east->central", "west->central")


def test_flows_and_clusters_together_accept_flows_into_the_named_targets() -> None:
    assert select_flows(mm2(), ["west->central"], ["central"]) == flows("west->central")


def test_a_flow_outside_the_named_targets_is_a_usage_error_naming_both() -> None:
    with pytest.raises(UsageError) as caught:
        select_flows(mm2(), ["east->west"], ["central"])
    assert str(caught.value) == "--flows: east->west targets west, which is not among --clusters central"


def test_an_unknown_cluster_is_a_usage_error_naming_the_value_and_the_aliases() -> None:
    with pytest.raises(UsageError) as caught:
        select_flows(mm2(), None, ["west,nowhere"])
    assert str(caught.value) == ("--clusters nowhere: not a cluster of mm2.properties (clusters: east, west, central)")


def test_a_known_cluster_that_no_enabled_flow_targets_is_a_usage_error() -> None:
    text = THREE.replace("west->east.enabled = true\n", "")
    with pytest.raises(UsageError) as caught:
        select_flows(mm2(text), None, ["east"])
    assert "--clusters east: no enabled flow targets it" in str(caught.value)
    assert "east->west" in str(caught.value)


def test_an_empty_clusters_value_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="name at least one cluster"):
        select_flows(mm2(), None, [" , "])


def test_load_passes_clusters_to_the_typed_flows(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(THREE)
    loaded = load(path, clusters=["east"])
    assert [(f.source, f.target) for f in loaded.flows] == [("west", "east")]


def test_run_with_an_unknown_cluster_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(THREE)
    result = subprocess.run(
        [*mm2py_argv(), "run", str(path), "--once", "--clusters", "north"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"mm2py: error: --clusters north: not a cluster of {path} (clusters: east, west, central)"
    ]

"""examples/cron: the crontab line and systemd units run real `mm2py run` options and stop the way mm2py needs."""

from __future__ import annotations

import re
import shlex
from dataclasses import fields
from pathlib import Path

import pytest
import typer.main

from mm2py.cli.app import app
from mm2py.errors import EXIT_USAGE
from mm2py.executor.contract import CopySpec

CRON = Path(__file__).resolve().parents[2] / "examples" / "cron"


def unit(name: str) -> dict[str, dict[str, str]]:
    """A systemd unit file as {section: {key: value}} (the examples set each key once)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in (CRON / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        assert key.strip() not in current, f"{name}: {key} set twice"
        current[key.strip()] = value.strip()
    return sections


def seconds(value: str) -> float:
    units = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}
    found = re.fullmatch(r"(\d+)\s*([a-z]*)", value)
    assert found, value
    return int(found.group(1)) * units.get(found.group(2) or "s", 0)


def run_options(command: str) -> list[str]:
    """The options of an `mm2py run FILE ...` command line, each checked against the real run command."""
    words = shlex.split(command)
    at = words.index("run")
    assert words[at - 1].endswith("/mm2py")
    known = {
        opt
        for param in typer.main.get_command(app).commands["run"].params  # type: ignore[attr-defined]
        for opt in param.opts
    }
    options = [w for w in words[at + 1 :] if w.startswith("--")]
    assert set(options) <= known, set(options) - known
    return options


def test_continuous_service_signals_only_mm2py_and_waits_for_the_batch_in_flight() -> None:
    service = unit("mm2py.service")["Service"]
    assert "--once" not in run_options(service["ExecStart"])
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # the Spark JVM and workers must not get the SIGTERM
    # Long enough for a stalled target's two producer flushes (records, then progress) to time out.
    flush = next(f.default for f in fields(CopySpec) if f.name == "flush_timeout_s")
    assert isinstance(flush, float)
    assert seconds(service["TimeoutStopSec"]) >= 2 * flush


def test_continuous_service_restarts_after_failures_but_not_after_configuration_errors() -> None:
    service = unit("mm2py.service")["Service"]
    assert service["Restart"] == "on-failure"
    assert str(EXIT_USAGE) in service["RestartPreventExitStatus"].split()


def test_once_service_is_a_oneshot_run_once_started_by_the_timer() -> None:
    service = unit("mm2py-once.service")["Service"]
    assert service["Type"] == "oneshot"
    assert "--once" in run_options(service["ExecStart"])
    assert service["KillMode"] == "mixed"
    timer = unit("mm2py-once.timer")
    assert timer["Timer"]["Unit"] == "mm2py-once.service"
    assert (CRON / timer["Timer"]["Unit"]).is_file()
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.parametrize("name", ["mm2py.service", "mm2py-once.service"])
def test_services_run_as_an_unprivileged_user(name: str) -> None:
    assert unit(name)["Service"]["User"] not in ("", "root")


def test_crontab_line_runs_once_every_five_minutes_without_overlapping() -> None:
    lines = [
        line
        for line in (CRON / "mm2py.crontab").read_text().splitlines()
        if line.strip() and not line.startswith("#") and "=" not in line.split()[0]
    ]
    assert len(lines) == 1
    schedule, command = lines[0].split()[:5], " ".join(lines[0].split()[5:])
    assert schedule == ["*/5", "*", "*", "*", "*"]
    assert "flock -n" in command
    assert "--once" in run_options(command.split(">>")[0])

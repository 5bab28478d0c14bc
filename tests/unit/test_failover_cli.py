"""``mm2py failover`` at the command line without a broker: an unreachable target is a runtime failure (exit 3)
named in one line, a bad option value a usage error (exit 2). No JVM, nothing listening."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2py.cli.app import main

CONFIG = (
    "clusters = east, west\neast.bootstrap.servers = 127.0.0.1:1\nwest.bootstrap.servers = 127.0.0.1:1\n"
    "east->west.enabled = true\nadmin.timeout.ms = 1000\n"
)


def _failover(tmp_path: Path, *extra: str) -> int | str | None:
    config = tmp_path / "mm2.properties"
    config.write_text(CONFIG)
    with pytest.raises(SystemExit) as exit_:
        main(["failover", str(config), "--flow", "east->west", *extra])
    return exit_.value.code


def test_an_unreachable_target_exits_3_naming_the_target_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    assert _failover(tmp_path, "--dry-run") == 3
    took_s = time.monotonic() - started
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("mm2py: error: ") and "west" in line, line
    assert took_s < 30, f"{took_s:.1f} s to report an unreachable target"


def test_a_groups_pattern_that_is_not_a_regex_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _failover(tmp_path, "--groups", "billing(") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--groups billing(: not a valid regular expression" in line, line

"""Config providers as doors: ``${file:}`` and ``${dir:}`` read only under KIP-993's ``allowed.paths`` (Kafka's
rule: normalised absolute paths, matched component by component), and ``validate`` never prints a value a
provider gave, whatever the key. Real files in a temporary directory; no broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_validate import GOOD, lines, problems_of

FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIR = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("allowed", "allowed-not", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "s.properties").write_text(f"password = {name}-Secret-42\n", encoding="utf-8")
        (tmp_path / name / "password").write_text(f"{name}-Dir-Secret-42", encoding="utf-8")
    return tmp_path


def _file(allowed: str, reference: str) -> str:
    return GOOD + (
        f"config.providers = file\nconfig.providers.file.class = {FILE}\n"
        f"config.providers.file.param.allowed.paths = {allowed}\n"
        f"dc1.sasl.password = ${{file:{reference}:password}}\n"
    )


def test_a_file_under_allowed_paths_is_read(tree: Path) -> None:
    assert problems_of(_file(f"{tree}/other, {tree}/allowed", f"{tree}/allowed/s.properties")) == []
    assert problems_of(_file(str(tree), f"{tree}/allowed/../other/s.properties")) == []  # still under tree


@pytest.mark.parametrize(
    "reference",
    [
        "{tree}/other/s.properties",  # another directory
        "{tree}/allowed-not/s.properties",  # a name that starts with the allowed one is not under it
        "{tree}/allowed/../other/s.properties",  # '..' normalised away first, as Kafka does
        "allowed/s.properties",  # relative
    ],
)
def test_a_file_outside_allowed_paths_is_refused_in_one_line_naming_key_path_and_list(
    tree: Path, reference: str
) -> None:
    path = reference.format(tree=tree)
    problems = problems_of(_file(f"{tree}/allowed", path))
    assert len(problems) == 1, lines(problems)
    line = lines(problems)[0]
    assert line.startswith("error: mm2.properties:9 dc1.sasl.password = ")
    assert f"path {path} is outside config.providers.file.param.allowed.paths" in line
    assert line.endswith(f"(allowed: {tree}/allowed)"), line
    assert "Secret-42" not in line


def test_the_dir_provider_honours_allowed_paths_and_takes_file_names_only(tree: Path) -> None:
    def config(reference: str) -> str:
        return GOOD + (
            f"config.providers = dir\nconfig.providers.dir.class = {DIR}\n"
            f"config.providers.dir.param.allowed.paths = {tree}/allowed\n"
            f"dc1.ssl.key.password = ${{dir:{reference}}}\n"
        )

    assert problems_of(config(f"{tree}/allowed:password")) == []
    outside = lines(problems_of(config(f"{tree}/other:password")))
    assert len(outside) == 1 and f"path {tree}/other is outside" in outside[0], outside
    escaping = lines(problems_of(config(f"{tree}/allowed:../other/password")))
    assert len(escaping) == 1 and "'../other/password' is not the name of a file in" in escaping[0], escaping
    assert not any("Secret-42" in line for line in outside + escaping)


@pytest.mark.parametrize("entry", ["relative/dir", "/no/such/directory"])
def test_an_allowed_paths_entry_that_is_not_absolute_or_does_not_exist_is_an_error(tree: Path, entry: str) -> None:
    problems = problems_of(_file(entry, f"{tree}/allowed/s.properties"))
    text = "\n".join(lines(problems))
    assert f"config.providers.file.param.allowed.paths = {entry}: path '{entry}' is not valid" in text, text
    assert "(allowed: absolute paths that exist, separated by commas)" in text
    assert "is outside" in text  # and the provider reads nothing rather than everything


def test_validate_prints_no_value_a_provider_gave_whatever_the_key(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tree / "plain.properties"
    secrets.write_text("policy = Hunter2-policy\npattern = Hunter2-pattern(\nnumber = Hunter2-number\n")
    text = GOOD + (
        f"config.providers = file, env\nconfig.providers.file.class = {FILE}\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        f"dc1->target.replication.policy.class = ${{file:{secrets}:policy}}\n"
        f"dc1->target.topics = ${{file:{secrets}:pattern}}\n"
        f"dc1->target.emit.checkpoints.interval.seconds = ${{file:{secrets}:number}}\n"
        "dc1->target.tasks.max = ${env:TASKS}\n"
    )
    shown = "\n".join(lines(problems_of(text, {"TASKS": "Hunter2-env"})))
    assert "Hunter2" not in shown, shown
    # Each problem is still there, naming the reference as written.
    assert f"replication.policy.class = ${{file:{secrets}:policy}}: unknown ReplicationPolicy '[hidden]'" in shown
    assert f"topics = ${{file:{secrets}:pattern}}: is not a valid regular expression" in shown
    assert "emit.checkpoints.interval.seconds = ${file:" in shown and "tasks.max = ${env:TASKS}: is not" in shown

"""The layout rules (tests/layout_rules.py, run by ``make lint``) hold for the package and catch what they are
for; executors load no HTTP server; and the test tree itself collects (tests/unit and tests/integration are not
packages, so two test modules with one basename break collection)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.layout_rules import MAX_FUNCTION_LINES, MAX_MODULE_LINES, check, imports_of, module_name

REPO = Path(__file__).resolve().parents[2]


def test_test_modules_have_unique_basenames() -> None:
    names = Counter(p.name for p in Path(__file__).resolve().parents[1].rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_the_package_keeps_its_layout_rules() -> None:
    assert [str(v) for v in check(REPO / "mm2py")] == []


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "mm2py"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_an_import_cycle_is_found_through_a_third_module(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {
            "mirror/__init__.py": "",
            "mirror/a.py": "from mm2py.mirror import b\n",
            "mirror/b.py": "import mm2py.mirror.c\n",
            "mirror/c.py": "def f():\n    from mm2py.mirror.a import x\n",
        },
    )
    assert [v.rule for v in check(root)] == ["import cycle"]


def test_an_import_upwards_is_found(tmp_path: Path) -> None:
    root = package(tmp_path, {"mirror/__init__.py": "", "mirror/a.py": "from mm2py.engine.driver import FlowRunner\n"})
    (root / "engine").mkdir()
    (root / "engine" / "__init__.py").write_text("")
    (root / "engine" / "driver.py").write_text("FlowRunner = 1\n")
    violations = check(root)
    assert len(violations) == 1 and "imports mm2py.engine.driver" in violations[0].rule


def test_long_modules_and_functions_are_found(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    root = package(
        tmp_path,
        {"errors.py": f"def long():\n{body}\n" + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES)},
    )
    rules = sorted(v.rule for v in check(root))
    assert rules == [f"401 lines (at most {MAX_MODULE_LINES})", f"long is 81 lines (at most {MAX_FUNCTION_LINES})"]


def test_a_module_on_no_layer_is_named(tmp_path: Path) -> None:
    root = package(tmp_path, {"utils.py": ""})
    with pytest.raises(ValueError, match=r"mm2py\.utils is on no layer"):
        check(root)


@pytest.mark.parametrize("module", ["mm2py.executor.record_copy", "mm2py.executor.batch_copy"])
def test_a_copy_task_loads_neither_the_prometheus_client_nor_an_http_server(module: str) -> None:
    """Executors import the copy modules in fresh Python workers; the metrics server is the driver's."""
    probe = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout))
    assert module in loaded
    assert not {"prometheus_client", "http.server", "pyspark"} & loaded


def test_a_batch_path_copy_task_loads_no_librdkafka() -> None:
    """A batch-path Spark worker imports the task's entry (engine/spark.py's ``_copy_task``, which Spark pickles by
    reference) and the batch path: records, progress, offset syncs, resume and transactions all go through
    ``mm2py.wire``, so neither confluent-kafka nor the record path is loaded."""
    probe = "import sys, json, mm2py.engine.spark, mm2py.executor.batch_copy; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout))
    assert {"mm2py.engine.spark", "mm2py.executor.batch_copy", "mm2py.wire.sender"} <= loaded
    assert not {m for m in loaded if m.split(".")[0] == "confluent_kafka"}
    assert "mm2py.executor.record_copy" not in loaded and "mm2py.librdkafka.clients" not in loaded


def layout_bullets(architecture: str) -> dict[str, str]:
    """docs/architecture.md's module list: each bullet that starts with a path of the package, and its whole text."""
    section = architecture.split("\n## The modules, folder by folder", 1)[1].split("\n## ", 1)[0]
    bullets: dict[str, str] = {}
    for item in re.split(r"\n- ", section)[1:]:
        head = re.match(r"`(mm2py/[\w/.]*)`", item)
        if head:
            bullets[head.group(1)] = item
    return bullets


def test_the_module_list_names_every_module_of_the_package_and_no_other() -> None:
    """The module list (docs/architecture.md) is where a newcomer learns the tree, so it may neither miss a module
    nor name one that was moved or renamed: each folder's bullet names the modules in it (and in its sub-folders)
    by file name."""
    package = REPO / "mm2py"
    bullets = layout_bullets((REPO / "docs" / "architecture.md").read_text())
    folders = sorted(p for p in package.iterdir() if (p / "__init__.py").is_file())
    assert sorted(bullets) == sorted([f"mm2py/{f.name}" for f in folders] + ["mm2py/errors.py"])
    for folder in folders:
        named = set(re.findall(r"`(\w+\.py)`", bullets[f"mm2py/{folder.name}"]))
        present = {p.name for p in folder.rglob("*.py") if p.name != "__init__.py"}
        assert named == present, f"mm2py/{folder.name}: not named {present - named}, named but absent {named - present}"
    top_named = set(re.findall(r"`mm2py/(\w+\.py)`", bullets["mm2py/errors.py"]))
    assert top_named == {p.name for p in package.glob("*.py") if p.name != "__init__.py"}


def imported_mm2py_modules(folder: Path) -> set[str]:
    """Every ``mm2py`` module the package's modules import, at the top or inside functions (the layout rules'
    own reading of imports)."""
    package = REPO / "mm2py"
    known = {module_name(package, p) for p in package.rglob("*.py")}
    return set().union(*(imports_of(ast.parse(p.read_text()), known) for p in folder.rglob("*.py")))


@pytest.mark.parametrize("folder", sorted(p.name for p in (REPO / "mm2py").iterdir() if (p / "__init__.py").is_file()))
def test_each_package_docstring_names_what_it_may_import_and_the_package_imports_nothing_else(folder: str) -> None:
    """A package's face is where a reader learns its place; a "May import" line that lags behind the code misleads
    more than none. ``mm2py.errors``, ``mm2py.secrets``, ``mm2py.backoff`` and ``mm2py.kafka_errors`` are used by
    all and need no mention."""
    init = REPO / "mm2py" / folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import" in doc, f"mm2py/{folder}/__init__.py does not say what the package may import"
    allowed = set(re.findall(r"``(mm2py(?:\.\w+)*)``", doc.split("May import", 1)[1]))
    own = f"mm2py.{folder}"
    foreign = {
        m
        for m in imported_mm2py_modules(init.parent)
        if m != own
        and not m.startswith(own + ".")
        and m not in ("mm2py.errors", "mm2py.secrets", "mm2py.backoff", "mm2py.kafka_errors")
    }
    unnamed = {m for m in foreign if not any(m == a or (a != "mm2py" and m.startswith(a + ".")) for a in allowed)}
    assert not unnamed, f"{own} imports {sorted(unnamed)}, which its docstring's May import does not name"

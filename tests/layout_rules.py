"""The layout rules of the ``mm2py`` package, checked by ``make lint`` (``python -m tests.layout_rules``).

- no import cycle between modules, directly or through others (imports inside functions count too);
- no import upwards: every package sits on a layer and imports only from lower layers, or from itself;
- no module over 400 lines and no function over 80.

Why a script and not a linter rule: ruff and mypy know neither the package layers nor a module's length, and
these are the rules that keep the architecture readable from the folders (docs/architecture.md, *The modules,
folder by folder*).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

# From the bottom up; a unit is a package (or a module) of mm2py, the longest matching name wins ("mm2py" is the
# package's face alone, its __version__).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("mm2py", "mm2py.backoff", "mm2py.kafka_errors"),
    ("mm2py.errors", "mm2py.secrets", "mm2py.client_settings"),
    ("mm2py.mirror", "mm2py.metrics.measurement"),
    ("mm2py.librdkafka",),
    ("mm2py.config", "mm2py.wire"),
    ("mm2py.executor",),
    ("mm2py.control",),
    ("mm2py.metrics",),
    ("mm2py.tools",),
    ("mm2py.engine",),
    ("mm2py.cli",),
    ("mm2py.__main__",),
)


@dataclass(frozen=True)
class Violation:
    where: str
    rule: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> tuple[str, int]:
    """The unit a module belongs to and its layer (the longest unit name that is the module or its package)."""
    best = ("", -1, -1)
    for level, units in enumerate(LAYERS):
        for unit in units:
            inside = module == unit or (unit != "mm2py" and module.startswith(unit + "."))
            if inside and len(unit) > best[2]:
                best = (unit, level, len(unit))
    if best[1] < 0:
        raise ValueError(f"{module} is on no layer; add it to LAYERS in tests/layout_rules.py")
    return best[0], best[1]


def imports_of(tree: ast.AST, known: set[str]) -> set[str]:
    """The mm2py modules a module imports (``from mm2py.x import y`` counts y when it is a module)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in known:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & known
            found.update(submodules or {node.module})
    return found


def long_functions(tree: ast.AST) -> Iterator[tuple[str, int, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - start + 1
            if length > MAX_FUNCTION_LINES:
                yield node.name, node.lineno, length


def check(root: Path) -> list[Violation]:
    """Every violation in the package at ``root`` (the ``mm2py`` folder)."""
    files = {module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in files.items()}
    graph = {name: imports_of(tree, set(files)) - {name} for name, tree in trees.items()}
    violations: list[Violation] = []
    for name, path in files.items():
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            violations.append(Violation(str(path), f"{lines} lines (at most {MAX_MODULE_LINES})"))
        for function, line, length in long_functions(trees[name]):
            violations.append(
                Violation(f"{path}:{line}", f"{function} is {length} lines (at most {MAX_FUNCTION_LINES})")
            )
        unit, level = unit_of(name)
        for imported in sorted(graph[name]):
            other, other_level = unit_of(imported)
            if other != unit and other_level >= level:
                violations.append(
                    Violation(str(path), f"{name} (layer {level}) imports {imported} (layer {other_level})")
                )
    violations.extend(Violation(" -> ".join(cycle), "import cycle") for cycle in cycles(graph))
    return violations


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    root = Path(__file__).resolve().parents[1] / "mm2py"
    violations = check(root)
    for violation in violations:
        print(violation, file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

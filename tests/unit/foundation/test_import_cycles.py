"""No import cycles in almanac, and a function-local import only where a cycle is broken on purpose.

The graph holds every module's imports of almanac: the top-level ones and those inside functions,
but for a function-local import marked `# cycle: <a> -> <b>` (on its line or the line above), the
one way a cycle may stay, named so that a reader knows why the import hides there. A function-local
import may also be marked `# deferred: <why>` (the CLI's server and worker commands load the web
stack, the worker wasmtime, only when used): it stays in the graph, so it can never hide a cycle
(docs/decisions/0231-import-cycles.md). Imports under
`if TYPE_CHECKING:` never run and are left out. A cycle is a strongly connected part of the graph
with more than one module. A module's own package is not an edge of it (see `_ancestors`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.unit.foundation.test_architecture import ROOT, _absolute

_MODULES = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in ROOT.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, local: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement that runs, and whether it is inside a function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from ((n, local) for stmt in node.orelse for n, _ in _imports(ast.Module([stmt], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, local
        else:
            yield from _imports(node, local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _targets(path: Path, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The almanac modules an import statement loads (a `from package import module` names the module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        names = _absolute(path, node)
        names += [f"{names[0]}.{alias.name}" for alias in node.names] if node.module else []
    return {name for name in names if name in _MODULES}


def _ancestors(module: str) -> set[str]:
    """The module and the packages above it: Python imports those before the module's first line, so
    naming one (`from almanac.web.views import run_detail` in a module of that package) adds no edge."""
    parts = module.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts) + 1)}


def _marked(lines: list[str], node: ast.stmt, marker: str) -> bool:
    """Whether `# <marker>: ` is on the import's line, or on the comment line right above the import(s)."""
    first = node.lineno - 1
    while first > 0 and lines[first - 1].lstrip().startswith(("from ", "import ")):
        first -= 1  # a run of imports under one comment
    above = lines[first - 1] if first > 0 and lines[first - 1].lstrip().startswith("#") else ""
    return f"# {marker}: " in lines[node.lineno - 1] + above


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """module -> the modules it imports; and the function-local imports not marked as breaking a cycle."""
    graph: dict[str, set[str]] = {}
    unmarked = []
    for module, path in _MODULES.items():
        text = path.read_text()
        lines = text.splitlines()
        edges = graph.setdefault(module, set())
        for node, local in _imports(ast.parse(text)):
            targets = _targets(path, node) - _ancestors(module)
            if local and targets and _marked(lines, node, "cycle"):
                continue
            if local and targets and not _marked(lines, node, "deferred"):
                unmarked.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
            edges |= targets
    return graph, unmarked


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_function_local_import_without_the_cycle_it_breaks() -> None:
    _, unmarked = _graph()
    assert unmarked == [], "import at the top, or mark `# cycle: <a> -> <b>` where a cycle is broken on purpose"


def test_almanac_has_no_import_cycle() -> None:
    graph, _ = _graph()
    assert _cycles(graph) == []

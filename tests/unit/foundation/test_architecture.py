"""STYLE.md's dependency direction, checked by walking every import of the package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3] / "almanac"
# What each part may import from almanac (besides itself).
ALLOWED = {
    "sandbox": {"jsonsafe"},  # a leaf itself: the sandbox checks script values by the same rules as the API
    "platform": {"db", "errors", "settings", "jsonsafe", "sandbox"},  # the sandbox's pure part only: see below
    "tenants": {"db", "errors", "settings", "jsonsafe"},
    # Delivery reads the platform's outbox table; nothing in platform knows delivery exists.
    # It sends through egress (the one HTTP client and address guard) and keeps its signing
    # secrets encrypted with vault's key.
    "delivery": {"db", "errors", "settings", "platform", "jsonsafe", "egress", "vault"},
    # Outbound HTTP (the guard, the pinned transport, scripts' fetch) and secrets at rest.
    "egress": {"db", "errors", "settings"},
    "vault": {"db", "errors", "settings"},
}


def _absolute(path: Path, node: ast.ImportFrom) -> list[str]:
    """The absolute module names a `from ... import` names, relative forms (`from .. import db`) included."""
    if node.level == 0:
        return [node.module] if node.module else []
    package = list(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])  # e.g. ["almanac", "sandbox"]
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    if node.module:
        return [".".join([*base, node.module])]
    return [".".join([*base, alias.name]) for alias in node.names]  # `from . import x`: x may be a module


def _almanac_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = _absolute(path, node)
        else:
            continue
        found.update(name.split(".")[1] for name in names if name.startswith("almanac."))
    return found


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    """The sandbox uses only relative imports: the rule above must see through them."""
    path = ROOT / "sandbox" / "probe.py"
    tree = ast.parse("from ..platform import timer\nfrom .. import db\nfrom .runtime import Sandbox\n")
    modules = [name for node in tree.body for name in _absolute(path, node)]  # type: ignore[arg-type]
    assert modules == ["almanac.platform", "almanac.db", "almanac.sandbox.runtime"]


def test_parts_import_only_what_they_may() -> None:
    problems = []
    for part, allowed in ALLOWED.items():
        for path in (ROOT / part).rglob("*.py"):
            for imported in _almanac_imports(path) - allowed - {part}:
                problems.append(f"{path.relative_to(ROOT.parent)} imports almanac.{imported}")
    assert problems == []


# The run contract and the run buffer are pure Python (no wasmtime): the platform records the
# sandbox's one RunResult and lends a test's function the same buffer. Nothing else of the sandbox.
SANDBOX_FOR_PLATFORM = {"almanac.sandbox.contract", "almanac.sandbox.effects", "almanac.sandbox.capabilities",
                        "almanac.sandbox.limits"}


def test_the_platform_uses_only_the_sandboxs_contract() -> None:
    problems = []
    for path in (ROOT / "platform").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                _absolute(path, node) if isinstance(node, ast.ImportFrom) else []
            problems += [f"{path.name}: {n}" for n in names
                         if n.startswith("almanac.sandbox") and n not in SANDBOX_FOR_PLATFORM]
    assert problems == []


def test_the_contract_loads_without_wasmtime() -> None:
    import subprocess
    import sys

    code = ("import sys, almanac.platform.timer.scheduler, almanac.platform.store.record, almanac.sandbox.contract\n"
            "assert 'wasmtime' not in sys.modules, 'wasmtime loaded'")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_nothing_imports_web() -> None:
    offenders = [
        str(path.relative_to(ROOT.parent))
        for path in ROOT.rglob("*.py")
        if "web" not in path.relative_to(ROOT).parts[:1] and "web" in _almanac_imports(path)
        and path.name != "cli.py"  # the CLI starts the server: it is an edge, like web itself
    ]
    assert offenders == []


def test_no_module_is_too_long() -> None:
    long = [f"{p.relative_to(ROOT.parent)}: {n}" for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 550]
    assert long == []

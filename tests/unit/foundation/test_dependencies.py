"""Dependencies are honest: what almanac/ imports at run time is declared, and nothing else is.

Some runtime dependencies are never imported by name but are needed all the same: they are listed
in NEEDED_WITHOUT_IMPORT with the reason, so that adding one is a decision, not an accident.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]
NEEDED_WITHOUT_IMPORT = {
    "tzdata": "zoneinfo's time zone data on systems without /usr/share/zoneinfo",
    "python-multipart": "FastAPI parses the pages' form posts with it",
}


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_canonical(Requirement(spec).name) for spec in project["dependencies"]}


def _imported_top_levels() -> set[str]:
    names = set()
    for path in (ROOT / "almanac").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"almanac"}


def _imported_distributions() -> set[str]:
    owners = packages_distributions()
    missing = sorted(name for name in _imported_top_levels() if name not in owners)
    assert missing == [], f"imported but not installed: {missing}"
    return {_canonical(dist) for name in _imported_top_levels() for dist in owners[name]}


def test_everything_imported_at_run_time_is_declared() -> None:
    assert sorted(_imported_distributions() - _declared()) == []


def test_nothing_declared_that_is_not_needed_at_run_time() -> None:
    unused = _declared() - _imported_distributions() - {_canonical(n) for n in NEEDED_WITHOUT_IMPORT}
    assert sorted(unused) == []

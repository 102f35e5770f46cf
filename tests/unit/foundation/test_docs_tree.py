"""The user guide's generated parts are current: the decision records' index lists every record."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _tool(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_decision_index_lists_every_record() -> None:
    tool = _tool("decisions_index")
    page = (tool.FOLDER / "index.md").read_text()
    assert tool.spliced(page) == page, "run tools/decisions_index.py"
    assert len(tool.records()) >= 1

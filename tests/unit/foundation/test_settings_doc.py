"""Configuration has one door: every ALMANAC_* variable is a `Settings` field, and the guide's table is `Settings`."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _settings_table():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "tools" / "settings_table.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_guide_configuration_table_is_generated_from_settings() -> None:
    tool = _settings_table()
    page = tool.README.read_text()
    assert tool.spliced(page) == page, "the guide's table differs from Settings: run tools/settings_table.py --write"


def test_every_setting_is_described() -> None:
    from almanac.settings import Settings

    assert [name for name, field in Settings.model_fields.items() if not field.description] == []


def _reads_environment(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(alias.name in {"environ", "getenv"} for alias in node.names):
                lines.append(node.lineno)
    return lines


def test_only_settings_reads_the_environment() -> None:
    """Modules receive values; they do not read os.environ (STYLE.md, "Configuration has one door")."""
    offenders = {}
    for path in (ROOT / "almanac").rglob("*.py"):
        lines = _reads_environment(ast.parse(path.read_text()))
        if lines and path.name != "settings.py":
            offenders[str(path.relative_to(ROOT))] = lines
    assert offenders == {}

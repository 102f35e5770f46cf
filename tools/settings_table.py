"""Print, or write into the guide's configuration page, the table built from `almanac.settings.Settings`.

`python tools/settings_table.py` prints it; `--write` replaces the table between the page's
`<!-- settings:start -->` and `<!-- settings:end -->` markers. The test
`tests/unit/foundation/test_settings_doc.py` fails when the page and `Settings` differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from almanac.settings import Settings

README = Path(__file__).resolve().parents[1] / "docs" / "reference" / "configuration.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def _default(field) -> str:  # type: ignore[no-untyped-def]
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, Path):
        return f"`{value}`" if value.is_absolute() else f"`./{value}`"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"`{value}`" if isinstance(value, str) else str(value)


def table() -> str:
    prefix = Settings.model_config.get("env_prefix", "")
    lines = ["| variable | default | what it does |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        lines.append(f"| `{prefix}{name.upper()}` | {_default(field)} | {field.description} |")
    return "\n".join(lines)


def spliced(readme: str) -> str:
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        README.write_text(spliced(README.read_text()))
    elif "--check" in argv:
        if spliced(README.read_text()) != README.read_text():
            print(f"{README} differs from Settings: run tools/settings_table.py --write", file=sys.stderr)
            return 1
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

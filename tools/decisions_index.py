"""Write the list of decision records (docs/decisions/NNNN-*.md) into docs/decisions/index.md.

`python tools/decisions_index.py` writes it; `--check` exits 1 when the page is out of date
(`make docs` runs the check, and tests/unit/foundation/test_docs_tree.py too).
"""

from __future__ import annotations

import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "docs" / "decisions"
START, END = "<!-- records:start -->", "<!-- records:end -->"


def records() -> list[tuple[str, str]]:
    """(file name, title) of every record, in number order."""
    out = []
    for path in sorted(FOLDER.glob("[0-9][0-9][0-9][0-9]-*.md")):
        title = next((line[2:].strip() for line in path.read_text().splitlines() if line.startswith("# ")), path.stem)
        out.append((path.name, title))
    return out


def spliced(page: str) -> str:
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    listing = "\n".join(f"- [{title}]({name})" for name, title in records())
    return f"{head}{START}\n{listing}\n{END}{tail}"


def main(argv: list[str]) -> int:
    index = FOLDER / "index.md"
    page = index.read_text()
    if "--check" in argv:
        if spliced(page) != page:
            print("docs/decisions/index.md is out of date: run tools/decisions_index.py", file=sys.stderr)
            return 1
        return 0
    index.write_text(spliced(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

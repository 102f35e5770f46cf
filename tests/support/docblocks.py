"""The fenced blocks of the README and the guide, as the docs tests and the block checker read them.

A block a test runs carries a name on the line before its fence, `<!-- block: NAME -->`, and the
test fetches it with `block(page, name)`: the page shows exactly what the test runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_NAME = re.compile(r"^\s*<!--\s*block:\s*(?P<name>[\w.-]+)\s*-->\s*$")
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/guide/rules.md"
    line: int  # of the opening fence, 1-based
    lang: str
    name: str | None
    text: str  # the lines between the fences, with the fence's indentation removed

    @property
    def includes(self) -> list[str]:
        """The files the block includes (pymdownx.snippets), if it is nothing but includes."""
        lines = [line for line in self.text.splitlines() if line.strip()]
        found = [INCLUDE.match(line) for line in lines]
        return [m.group("path") for m in found if m] if lines and all(found) else []


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found, number = [], 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if not opening:
            number += 1
            continue
        indent, fence = len(opening.group("indent")), opening.group("fence")
        previous = next((line for line in reversed(lines[:number]) if line.strip()), "")
        named = _NAME.match(previous)
        end = number + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(line[indent:] for line in lines[number + 1:end])
        page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        found.append(Block(page, number + 1, opening.group("info").lower(),
                           named.group("name") if named else None, body + "\n"))
        number = end + 1
    return found


def block(page: str, name: str) -> str:
    """The text of the block named `name` on `page` (relative to the repository)."""
    matches = [b for b in blocks(ROOT / page) if b.name == name]
    assert len(matches) == 1, f"{page} has {len(matches)} blocks named {name!r}"
    return matches[0].text

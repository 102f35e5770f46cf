"""Every command and code sample in the README and the guide is run by a test, or says it is not.

A fenced block passes when it is (a) named (`<!-- block: NAME -->` on the line before it) and a
test fetches it by that name with `docblocks.block(page, NAME)`, (b) nothing but includes of files
under docs/examples/ that a test runs, or (c) tagged as something shown rather than run: output,
a document's shape, a synopsis, or another program's configuration.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import docblocks
from tests.support.docblocks import ROOT, Block

# Tags for what is shown, not run: an answer or a synopsis (`text`), a document's shape (`json`),
# another program's configuration (`nginx`).
SHOWN = {"text", "output", "json", "nginx"}
# `block("page.md", "name")`, or the same pair as a tuple a test hands to `block`.
_FETCHED = re.compile(r"""["']([\w./-]+\.md)["']\s*,\s*["']([\w.-]+)["']""")


def _fetched_by_tests() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        found.update(_FETCHED.findall(path.read_text()))
    return found


def _run_examples(fetched: set[tuple[str, str]]) -> set[str]:
    """Files of docs/examples/ that a test, or a block a test runs, names, or that such a file runs in turn."""
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("*.py"))
    sources += "\n".join(b.text for page in docblocks.pages() for b in docblocks.blocks(page)
                         if (b.page, b.name) in fetched)
    examples = {path.name: path.read_text() for path in (ROOT / "docs" / "examples").iterdir()}
    run = {name for name in examples if name in sources}
    while more := {name for name in examples if name not in run and any(name in examples[r] for r in run)}:
        run |= more
    return run


def problem(block: Block, fetched: set[tuple[str, str]], examples: set[str]) -> str | None:
    if block.lang in SHOWN:
        return None
    if block.includes:
        untested = [name for name in block.includes if name not in examples]
        return f"includes {untested}, which no test runs" if untested else None
    if block.name is None:
        return f"a `{block.lang or 'untagged'}` block that is neither named for a test, an include, nor tagged as shown"
    if (block.page, block.name) not in fetched:
        return f"block {block.name!r} is fetched by no test (docblocks.block({block.page!r}, {block.name!r}))"
    return None


def test_the_checker_refuses_an_unmarked_block_and_accepts_the_three_kinds(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\nrm -rf /\n```\n\n<!-- block: tour -->\n```sh\necho hi\n```\n\n"
                    "```sh\n--8<-- \"first-automation.sh\"\n```\n\n```nginx\nlisten 443;\n```\n")
    found = [Block("page.md", b.line, b.lang, b.name, b.text) for b in docblocks.blocks(page)]
    verdicts = [problem(b, {("page.md", "tour")}, {"first-automation.sh"}) for b in found]
    assert verdicts[0] is not None and verdicts[1:] == [None, None, None]
    assert problem(found[1], set(), set()) is not None  # named, but no test fetches it


def test_every_block_is_run_included_or_shown() -> None:
    fetched = _fetched_by_tests()
    examples = _run_examples(fetched)
    problems = [f"{b.page}:{b.line}: {p}" for page in docblocks.pages() for b in docblocks.blocks(page)
                if (p := problem(b, fetched, examples))]
    assert problems == [], "\n".join(problems)

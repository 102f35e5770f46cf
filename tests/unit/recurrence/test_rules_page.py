"""docs/guide/rules.md shows what the engine answers: every example there is previewed here.

Each example table on the page is preceded by `<!-- preview-now: INSTANT -->`, the moment the
page's previews were taken; each row names a rule and a zone and shows the description and the
first dates (or, in the refusals table, the error's code and message). This previews every row
with the pure `recurrence.preview` at that moment and compares, so the page cannot drift from the
engine. A failure prints the row the page should show.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from almanac import errors
from almanac.platform.recurrence.api import preview
from tests.support.docblocks import ROOT, block

PAGE = ROOT / "docs" / "guide" / "rules.md"
_NOW = re.compile(r"<!--\s*preview-now:\s*(\S+)\s*-->")


def when(instant: datetime, zone: str, offset: bool) -> str:
    local = instant.astimezone(ZoneInfo(zone))
    text = local.strftime("%a %-d %b %Y %H:%M") + (local.strftime(":%S") if local.second else "")
    return text + (" " + local.isoformat()[-6:] if offset else "")


def answer(rule: str, zone: str, now: datetime, offset: bool) -> list[str]:
    """The cells the page shows after the rule's and zone's: description and dates, or code and message."""
    try:
        found = preview(rule, zone, start=None, now=now, count=3)
    except errors.AlmanacError as refused:
        return [f"`{refused.code}`", str(refused)]
    return [found.description, "; ".join(when(d, zone, offset) for d in found.next)]


def _tables() -> list[tuple[datetime, list[str], list[list[str]]]]:
    """(preview moment, header cells, rows) of every table that follows a preview-now marker."""
    found: list[tuple[datetime, list[str], list[list[str]]]] = []
    now, table = None, []
    for line in [*PAGE.read_text().splitlines(), ""]:
        if marker := _NOW.search(line):
            now = datetime.fromisoformat(marker.group(1))
        elif line.startswith("|") and now:
            table.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif table and now:
            found.append((now, table[0], table[2:]))
            now, table = None, []
    return found


def _rows() -> list[tuple[datetime, bool, list[str]]]:
    return [(now, "offset" in " ".join(header), row) for now, header, rows in _tables() for row in rows]


def test_the_page_has_an_example_of_every_form() -> None:
    rules = [row[0] for _, _, row in _rows()]
    assert len(_tables()) >= 6 and len(rules) >= 25
    assert any(r.startswith("`FREQ=") for r in rules) and any(r.startswith("`@") for r in rules)
    assert any(re.match(r"`\d{4}-\d\d-\d\dT", r) for r in rules)  # a one-off


@pytest.mark.parametrize(("now", "offset", "row"), _rows(), ids=lambda v: v[0] if isinstance(v, list) else "")
def test_each_example_shows_what_the_engine_answers(now: datetime, offset: bool, row: list[str]) -> None:
    rule, zone, *shown = row
    expected = answer(rule.strip("`"), zone, now, offset)
    assert shown == expected, "the page should show: | " + " | ".join([rule, zone, *expected]) + " |"


def test_the_block_example_shows_what_the_engine_answers() -> None:
    rule = block("docs/guide/rules.md", "rules-block")
    now = datetime.fromisoformat("2026-03-02T07:00:00+00:00")
    description, dates = answer(rule, "Europe/Berlin", now, offset=False)
    shown = PAGE.read_text().split("<!-- block: rules-block -->", 1)[1].split("```text", 2)[2].split("```", 1)[0]
    assert shown.strip() == f"{description}\n{dates.replace('; ', chr(10))}"

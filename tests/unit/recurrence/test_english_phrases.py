"""Phrases from calendar apps' and schedulers' own wording (data/english_phrases.tsv): each is
understood whole, giving the dates python-dateutil gives for its hand-written rule and the
calendar clause written beside it, and its description reads back to the same dates and clause;
or it is refused with exactly the words it cannot use marked."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import pytest

from almanac.errors import InvalidRule
from almanac.platform.recurrence import describe, occurrences, preview
from almanac.platform.recurrence.api import parse
from almanac.platform.recurrence.engine import budget_scope
from almanac.platform.recurrence.model import CalendarClause

from .test_english_corpus import _oracle

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
PHRASES = Path(__file__).parent / "data" / "english_phrases.tsv"


class Case(NamedTuple):
    phrase: str
    expected: str
    calendar: CalendarClause | None
    source: str
    why: str


def _clause(text: str) -> CalendarClause | None:
    if text == "-":
        return None
    name, _, policy = text.rpartition("/")
    return CalendarClause(None if name == "*" else name, policy)  # type: ignore[arg-type]


def _cases() -> list[Case]:
    out = []
    for line in PHRASES.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        phrase, expected, calendar, source, *why = line.split("\t")
        out.append(Case(phrase, expected, _clause(calendar), source, "".join(why)))
    return out


CASES = _cases()
IDS = [f"{i:03d}-{c.phrase[:50]}" for i, c in enumerate(CASES)]


def test_the_corpus_is_large_and_says_why_it_refuses() -> None:
    assert len({c.phrase.lower() for c in CASES}) >= 150
    assert {c.source for c in CASES} >= {"gcal", "outlook", "rrulejs", "recurrent", "cronjob", "spec"}
    for case in CASES:
        refused = case.expected.startswith("!")
        assert refused == case.why.startswith("why: "), case.phrase


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_phrase(case: Case) -> None:
    if case.expected.startswith("!"):
        marked = case.expected[1:].strip()
        with pytest.raises(InvalidRule) as caught:
            preview(case.phrase, "UTC", start=None, now=NOW, count=5, min_interval_s=1)
        position, length = caught.value.details["position"], caught.value.details["length"]
        assert case.phrase[position:position + length] == marked, caught.value.message
        return
    got = preview(case.phrase, "UTC", start=None, now=NOW, count=5, min_interval_s=1)
    assert got.input_kind == "text"
    bounded = "COUNT" in case.expected or "UNTIL" in case.expected
    assert got.next == _oracle(case.expected, len(got.next) if bounded else 5), got.rrule
    assert parse(case.phrase, "UTC", now=NOW).calendar == case.calendar


@pytest.mark.parametrize("case", [c for c in CASES if not c.expected.startswith("!")],
                         ids=[i for i, c in zip(IDS, CASES) if not c.expected.startswith("!")])
def test_description_reads_back(case: Case) -> None:
    rec = parse(case.phrase, "Europe/Berlin", now=NOW)
    said = describe(rec)
    again = parse(said, "Europe/Berlin", start=rec.dtstart, now=rec.dtstart)
    assert again.calendar == rec.calendar, said
    with budget_scope(10_000_000):
        assert occurrences(again, after=rec.dtstart, count=12) == \
            occurrences(rec, after=rec.dtstart, count=12), said

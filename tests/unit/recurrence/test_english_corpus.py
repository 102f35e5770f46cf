"""The English corpus (data/english_corpus.txt): every phrase is understood
completely, giving the dates its hand-written rule gives in python-dateutil,
or refused with exactly the words not understood marked."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from dateutil.rrule import rrulestr

from almanac.errors import InvalidRule
from almanac.platform.recurrence import preview

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
CORPUS = Path(__file__).parent / "data" / "english_corpus.txt"


def _cases() -> list[tuple[str, str]]:
    out = []
    for line in CORPUS.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        phrase, _, expected = line.rpartition(" | ")
        out.append((phrase, expected.strip()))
    return out


CASES = _cases()


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 250
    assert len({p for p, _ in CASES}) == len(CASES)


def _oracle(expected: str, count: int) -> list[datetime]:
    """The first `count` dates of the hand-written rules, from dateutil."""
    start = "20261120T100700"  # the preview's default DTSTART: now, to the minute
    lines: list[str] = []
    for token in expected.replace(" + ", " ").split():
        if token.startswith("FREQ="):
            lines.append("RRULE:" + token)
    for sign, name in (("-", "EXDATE"), ("&", "RDATE")):
        parts = expected.split(f" {sign} ") if not expected.startswith(sign) else [""] + expected[2:].split(f" {sign} ")
        lines += [f"{name}:{p.split()[0]}" for p in parts[1:]]
    start = _interval_start(start, [line[6:] for line in lines if line.startswith("RRULE:")])
    text = "\n".join([f"DTSTART:{start}", *lines])
    found = rrulestr(text, forceset=True)
    wall = NOW.replace(tzinfo=None)
    return [d.replace(tzinfo=timezone.utc) for d in found.xafter(wall, count=count, inc=True)]


def _interval_start(start: str, rules: list[str]) -> str:
    """Where an English interval rule counts from: midnight for a sub-daily step, else the rules'
    first matching date at or after the start (the same rules with INTERVAL=1)."""
    if not any("INTERVAL=" in rule for rule in rules):
        return start
    if any(rule.startswith(("FREQ=HOURLY", "FREQ=MINUTELY", "FREQ=SECONDLY")) for rule in rules):
        return start[:9] + "000000"
    plain = "\n".join([f"DTSTART:{start}"] + ["RRULE:" + re.sub(r"INTERVAL=\d+;?", "", r).rstrip(";") for r in rules])
    first = rrulestr(plain, forceset=True).after(datetime.strptime(start, "%Y%m%dT%H%M%S"), inc=True)
    return first.strftime("%Y%m%dT%H%M%S")


@pytest.mark.parametrize(("phrase", "expected"), CASES, ids=[p for p, _ in CASES])
def test_phrase(phrase: str, expected: str) -> None:
    if expected.startswith("!"):
        marked = expected[1:].strip()
        with pytest.raises(InvalidRule) as caught:
            preview(phrase, "UTC", start=None, now=NOW, count=5, min_interval_s=1)
        position, length = caught.value.details["position"], caught.value.details["length"]
        assert phrase[position:position + length] == marked, caught.value.message
        return
    got = preview(phrase, "UTC", start=None, now=NOW, count=5, min_interval_s=1)
    assert got.input_kind == "text"
    want = _oracle(expected, len(got.next) if "COUNT" in expected or "UNTIL" in expected
                   or expected.startswith("&") else 5)
    assert got.next == want, got.rrule

"""English is understood whole or refused, and a refusal helps: it quotes the words it could not
use, offers the nearest phrasing it accepts made from the person's own words (and that phrasing
is itself accepted), and never answers in RRULE terms."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from almanac.errors import AlmanacError, InvalidRule, NeverFires
from almanac.platform.recurrence.api import parse, preview
from almanac.platform.recurrence.model import MAX_INPUT_BYTES
from almanac.platform.recurrence.text_hints import MAX_HINTED_CHARS

NOW = datetime(2026, 11, 20, 10, 7, tzinfo=timezone.utc)
RRULE_TERMS = re.compile(r"\b(FREQ|BY[A-Z]+|COUNT|INTERVAL|UNTIL|WKST|DTSTART|RRULE)\b")
HINT = re.compile(r'Did you mean "([^"]+)"\?')


@pytest.mark.parametrize(("text", "words", "meant"), [
    ("every tuesdy at 9", "tuesdy", "every Tuesday at 9"),
    ("last friday every month", "last", "the last Friday of every month"),
    ("every wensday at 10am", "wensday", "every Wednesday at 10am"),
    ("every day at 9.30", ".30", "every day at 9:30"),
    ("every day at 9 please", "please", "every day at 9"),
    ("the 2nd tuesday each month at 6pm", "2nd", "the 2nd Tuesday of every month at 6pm"),
    ("every satruday at noon", "satruday", "every Saturday at noon"),
    ("every 2 months in march starting", "starting", "every 2 months in March"),
    ("every day in decmber at 8", "in decmber at 8", "every day in December at 8"),
    ("on december 25 at 7am every year", "december", "every year on December 25 at 7am"),
    ("the last business day of every month in Germany at 17:00", "in germany at 17:00",
     "the last business day of every month at 17:00 in Germany"),
], ids=lambda v: v if " " not in v else None)
def test_a_refusal_quotes_the_words_and_suggests_the_nearest_phrasing(text: str, words: str,
                                                                      meant: str) -> None:
    with pytest.raises(InvalidRule) as refused:
        parse(text, "UTC", now=NOW)
    message = refused.value.message
    assert f'could not use "{words}"' in message.lower(), message
    hint = HINT.search(message)
    assert hint is not None and hint.group(1) == meant, message
    parse(hint.group(1), "UTC", now=NOW)  # what it suggests, it accepts


def test_the_words_it_could_not_use_are_the_ones_quoted() -> None:
    text = "every day fortnightly-ish"
    with pytest.raises(InvalidRule) as refused:
        parse(text, "UTC", now=NOW)
    details = refused.value.details
    marked = text[details["position"]:details["position"] + details["length"]]
    assert marked == "fortnightly-ish"
    assert 'could not use "fortnightly-ish"' in refused.value.message.lower()


def test_no_suggestion_is_made_up_when_nothing_near_is_accepted() -> None:
    with pytest.raises(InvalidRule) as refused:
        parse("every weekday at 9am except school holidays", "UTC", now=NOW)
    assert "Did you mean" not in refused.value.message
    assert 'Could not use "school holidays"' in refused.value.message


@pytest.mark.parametrize(("text", "words"), [
    ("every year on February 30", "february has no 30th"),
    ("on the 30th of february", "february has no 30th"),
    ("every month on the 31st in april", "april has no 31st"),
    ("the 6th monday of every month", "the 6th monday never happens"),
    ("every day at 9, only the 2nd occurrence in each day", "'only the 2nd occurrence'"),
    ("every monday until january 1, 2020", "the end (2020-01-01 23:59) is before the start"),
    ("every 2 weeks on the 5th", "a day of the month cannot go with a weekly rule"),
    ("every week on the 40th", "day 40 of the month is out of range"),
], ids=lambda v: v if " " not in v else None)
def test_english_refusals_never_speak_rrule(text: str, words: str) -> None:
    with pytest.raises(AlmanacError) as refused:
        preview(text, "UTC", start=None, now=NOW, count=3)
    assert isinstance(refused.value, (InvalidRule, NeverFires))
    assert words in refused.value.message.lower(), refused.value.message
    assert not RRULE_TERMS.search(refused.value.message), refused.value.message


def test_an_rrule_never_firing_is_still_told_in_rrule_terms() -> None:
    with pytest.raises(NeverFires, match="BYMONTHDAY=30 with BYMONTH=2"):
        preview("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "UTC", start=None, now=NOW, count=3)


def test_a_phrase_longer_than_a_rule_is_refused_without_a_suggestion() -> None:
    # mending every word of 4 KiB would take longer than a preview may; the words are still quoted
    text = ("every " + "tuesdy " * 600)[:MAX_INPUT_BYTES - 1]
    with pytest.raises(InvalidRule) as refused:
        parse(text, "UTC", now=NOW)
    assert refused.value.message.startswith('Could not use "tuesdy"')
    assert "Did you mean" not in refused.value.message
    short = "every " + "tuesdy " * 3 + "at 9"
    assert len(short) <= MAX_HINTED_CHARS

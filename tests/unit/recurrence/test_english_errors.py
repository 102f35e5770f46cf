"""A refusal of a rule typed in English answers in English: no RRULE part names (FREQ, BYMONTHDAY,
COUNT...) in the message, the same words the person used instead."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from almanac.errors import InvalidRule
from almanac.platform.recurrence.api import parse

NOW = datetime(2026, 11, 29, 8, tzinfo=timezone.utc)
RRULE_TERMS = re.compile(r"\b(FREQ|BY[A-Z]+|COUNT|INTERVAL|UNTIL|WKST|DTSTART)\b")


@pytest.mark.parametrize(("text", "words"), [
    ("every 2 weeks on the 5th", "a day of the month cannot go with a weekly rule"),
    ("every week on the 40th", "day 40 of the month is out of range: use 1 to 31"),
    ("every day at 9am for 0 times", "the number of times must be 1 or more, not 0"),
], ids=["monthday-in-weekly", "monthday-40", "zero-times"])
def test_an_english_rule_is_refused_in_english(text: str, words: str) -> None:
    with pytest.raises(InvalidRule) as refused:
        parse(text, "UTC", now=NOW)
    assert words in refused.value.message.lower(), refused.value.message
    assert not RRULE_TERMS.search(refused.value.message), refused.value.message


def test_an_rrule_is_still_refused_in_its_own_terms() -> None:
    with pytest.raises(InvalidRule, match="BYMONTHDAY cannot be used with FREQ=WEEKLY"):
        parse("FREQ=WEEKLY;BYMONTHDAY=5", "UTC", now=NOW)

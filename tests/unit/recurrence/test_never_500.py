"""No input makes the preview fail with anything but an AlmanacError (a 4xx
envelope): text built from the words and symbols of all four forms."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from almanac.errors import AlmanacError
from almanac.platform.recurrence import preview

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
_TOKENS = ["every", "each", "day", "days", "week", "month", "hour", "hours", "minutes", "at",
           "on", "the", "last", "first", "2nd", "other", "twice", "a", "daily", "weekday",
           "weekends", "monday", "fri", "mon-fri", "to", "from", "between", "and", ",", ";",
           "except", "holidays", "9am", "17:30", "noon", "10", "12", "0", "1.5", "-3", "in",
           "july", "until", "december", "1,", "2026", "times", "once", "*", "*/3", "1-5/2",
           "L", "5#3", "W", "H", "?", "@daily", "FREQ=DAILY", "RRULE:", "BYSETPOS=-1",
           "BYDAY=MO", "DTSTART;TZID=Europe/Berlin:20260329T023000", "\n", " ", "\r\n "]


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=9).map(" ".join),
       st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]))
def test_any_text_is_an_answer_or_a_4xx_refusal(text: str, zone: str) -> None:
    try:
        got = preview(text, zone, start=None, now=NOW, count=5)
    except AlmanacError as refused:
        assert refused.status < 500, refused
        return
    assert got.next == sorted(got.next)

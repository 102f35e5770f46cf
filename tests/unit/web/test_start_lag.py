"""Start lag as the run pages show it: a number with its unit, from the planned and the actual start."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from almanac.web.views.run_detail import lag_text, start_lag_ms

PLANNED = datetime(2026, 3, 29, 1, 59, 59, tzinfo=timezone.utc)


@pytest.mark.parametrize(("ms", "text"), [
    (None, "—"), (0, "0 ms"), (999, "999 ms"), (1000, "1.0 s"), (2500, "2.5 s"), (59_999, "59.9 s"),
    (60_000, "1 min 0 s"), (192_000, "3 min 12 s"), (7_500_000, "2 h 5 min"), (-40, "−40 ms"),
])
def test_lag_text(ms: int | None, text: str) -> None:
    assert lag_text(ms) == text


def test_start_lag_counts_from_the_planned_time_and_reads_naive_times_as_utc() -> None:
    assert start_lag_ms(PLANNED, None) is None
    assert start_lag_ms(PLANNED, PLANNED + timedelta(milliseconds=312)) == 312
    assert start_lag_ms(PLANNED.replace(tzinfo=None), PLANNED + timedelta(seconds=2)) == 2000

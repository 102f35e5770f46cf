"""The dashboard's numbers, as pure functions: per-day counts in the viewer's zone, percentiles, streaks."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from almanac.web.views import charts

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)


def test_days_are_the_viewers_and_statuses_fall_in_three_groups():
    tokyo = ZoneInfo("Asia/Tokyo")
    rows = [
        (datetime(2026, 11, 20, 14, 59, tzinfo=timezone.utc), "succeeded", 10),  # 23:59 on the 20th in Tokyo
        (datetime(2026, 11, 20, 15, 0, tzinfo=timezone.utc), "failed", 30),      # 00:00 on the 21st in Tokyo
        (datetime(2026, 11, 21, 1, 0, tzinfo=timezone.utc), "skipped", None),
        (datetime(2026, 11, 21, 2, 0, tzinfo=timezone.utc), "running", None),    # not finished: not counted
        (datetime(2026, 9, 1, tzinfo=timezone.utc), "succeeded", 5),             # outside the 30 days
    ]
    days = charts.per_day(rows, NOW, tokyo)
    assert len(days) == 30 and days[-1].day.isoformat() == "2026-11-21"
    assert days[-2].counts == {"succeeded": 1} and days[-1].counts == {"failed": 1, "other": 1}
    assert days[-1].durations == [30]  # a skipped run's duration is not a run's duration


def test_percentiles_are_nearest_rank():
    assert charts.percentile([], 50) is None
    assert charts.percentile([7], 95) == 7
    values = list(range(1, 101))
    assert charts.percentile(values, 50) == 50 and charts.percentile(values, 95) == 95
    assert charts.percentile([5, 1, 3, 2, 4], 50) == 3


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=200))
def test_p50_never_exceeds_p95_and_both_are_observed(values):
    p50, p95 = charts.percentile(values, 50), charts.percentile(values, 95)
    assert p50 <= p95 and p50 in values and p95 in values


def test_streak_counts_occurrences_once_and_stops_at_a_success():
    rows = [  # newest first: (run, occurrence, schedule, status, error)
        (10, 5, 1, "failed", "boom 3"),
        (9, 5, 1, "failed", "boom 3, attempt 1"),  # an earlier attempt of the same occurrence
        (8, None, 1, "running", None),
        (7, 4, 1, "skipped", None),                  # neither extends nor breaks
        (6, 3, 1, "timed_out", "slow"),
        (5, 2, 1, "succeeded", None),
        (4, 1, 1, "failed", "old"),                  # before the success: not in the streak
        (3, 7, 2, "succeeded", None),
        (2, 8, 2, "failed", "older"),
        (1, 9, 3, "memory_exceeded", "big"),
    ]
    failing = charts.failing_schedules(rows)
    assert [(f.schedule_id, f.streak, f.last_error, f.last_run_id) for f in failing] == [
        (1, 2, "boom 3", 10), (3, 1, "big", 1)]


def test_bars_stack_to_their_totals_under_a_round_maximum():
    rows = [(NOW, "succeeded", 1)] * 7 + [(NOW, "failed", 1)] * 3
    chart = charts.bar_chart(charts.per_day(rows, NOW, timezone.utc))
    assert chart["top"] == 10
    last = chart["bars"][-1]
    heights = {p["group"]: p["h"] for p in last["parts"]}
    full = chart["base"] - chart["top_y"]
    assert abs(sum(heights.values()) - full) < 0.2 and heights["succeeded"] > heights["failed"]
    assert all(not bar["parts"] for bar in chart["bars"][:-1])
    assert [charts.nice_max(v) for v in (0, 1, 3, 7, 10, 11, 420)] == [1, 1, 5, 10, 10, 20, 500]

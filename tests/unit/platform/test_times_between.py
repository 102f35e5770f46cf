"""RecurrenceRules.times_between: the missed times of a schedule, expanded only as far as needed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from almanac.platform import recurrence
from almanac.platform.store.planning import RecurrenceRules

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)


def _rule(text: str) -> str:
    return recurrence.parse(text, "UTC", start=T0, now=T0).canonical


def test_lists_every_missed_time_strictly_after_and_up_to_until() -> None:
    rules, canonical = RecurrenceRules(), _rule("every minute")
    got = rules.times_between(canonical, "text", T0, T0 + timedelta(minutes=10), cap=100)
    assert got == [T0 + timedelta(minutes=m) for m in range(1, 11)]


def test_stops_at_the_cap_and_at_until() -> None:
    rules, canonical = RecurrenceRules(), _rule("every minute")
    assert len(rules.times_between(canonical, "text", T0, T0 + timedelta(days=3), cap=2000)) == 2000
    assert rules.times_between(canonical, "text", T0, T0 + timedelta(seconds=30), cap=10) == []


def test_a_spent_rule_ends_the_search() -> None:
    rules, canonical = RecurrenceRules(), _rule("FREQ=MINUTELY;COUNT=3")
    assert rules.times_between(canonical, "rrule", T0, T0 + timedelta(days=1), cap=50) == [
        T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]

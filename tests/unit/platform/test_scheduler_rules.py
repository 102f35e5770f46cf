"""The scheduler's view of recurrence rules: strictly after, bounded, UTC."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from almanac.platform import recurrence
from almanac.platform.store.planning import RecurrenceRules

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def test_times_between_excludes_the_start_and_includes_the_end() -> None:
    rec = recurrence.parse("every minute", "Europe/Berlin", now=NOW)
    rules = RecurrenceRules()
    first = rules.next_after(rec.canonical, rec.input_kind, NOW)
    times = rules.times_between(rec.canonical, rec.input_kind, first, first + timedelta(minutes=3), 10)
    assert times == [first + timedelta(minutes=m) for m in (1, 2, 3)]
    assert all(t.tzinfo == timezone.utc for t in times)
    assert rules.times_between(rec.canonical, rec.input_kind, first, first + timedelta(minutes=30), 5)[-1] == \
        first + timedelta(minutes=5)


def test_a_one_off_rule_is_spent_after_its_instant() -> None:
    rec = recurrence.parse("2026-03-02T10:00:00Z", "UTC", now=NOW)
    rules = RecurrenceRules()
    when = rules.next_after(rec.canonical, rec.input_kind, NOW)
    assert when == datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
    assert rules.next_after(rec.canonical, rec.input_kind, when) is None

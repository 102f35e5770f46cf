"""A rule under a calendar, as the planner asks it: the next run after any time agrees with one
`roll` over the whole stream, and the calendar travels in the stored rule text."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from almanac.platform.recurrence import load, occurrences, parse
from almanac.platform.recurrence.business import Business, attach, detach, next_run_after, runs
from almanac.platform.recurrence.calendars import BusinessCalendar
from almanac.platform.recurrence.roll import roll

NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
# Christmas and a company shutdown after it: closures of one day, of a weekend, and of ten days.
CAL = BusinessCalendar.from_json({"name": "office", "country": "DE", "subdivision": "BY", "closed": [
    {"from": "2027-01-18", "to": "2027-01-27", "label": "inventory"}]})


def _truth(rule: str, policy: str, count: int = 400) -> list[datetime]:
    """Every run time, from one roll over the whole stream from the rule's start."""
    rec = parse(rule, "Europe/Berlin", now=NOW)
    found = occurrences(rec, after=NOW, count=count)
    return [r.when for r in roll(found, CAL, policy) if r.when is not None]  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["skip", "before", "after"])
@pytest.mark.parametrize("rule", ["every day at 10:00", "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=9;BYMINUTE=0",
                                  "0 8,17 * * *", "on the 25th of every month at 10"])
def test_next_run_after_any_time_agrees_with_one_roll_of_the_stream(rule: str, policy: str) -> None:
    truth = _truth(rule, policy)
    rec = parse(rule, "Europe/Berlin", now=NOW)
    business = Business(CAL, policy)  # type: ignore[arg-type]
    # As the claim asks: after each run time (the key), the next one.
    for before, expected in zip(truth, truth[1:60]):
        assert next_run_after(rec, business, before) == expected, before
    # As a replan asks: after any time between runs, the first run after it.
    for before, expected in zip(truth, truth[1:60]):
        middle = before + (expected - before) / 2
        assert next_run_after(rec, business, middle) == expected, middle


def test_before_never_gives_two_runs_on_one_day_and_keeps_one_run_per_original() -> None:
    rec = parse("every day at 10:00", "Europe/Berlin", now=NOW)
    business = Business(CAL, "before")
    seen, after = [], NOW
    for _ in range(80):
        after = next_run_after(rec, business, after)  # type: ignore[assignment]
        seen.append(after)
    days = [w.date() for w in seen]
    assert len(set(days)) == len(days)
    assert datetime(2026, 12, 24, 10, tzinfo=timezone(timedelta(hours=1))) in seen
    assert all(CAL.country and d.weekday() < 5 for d in days)


def test_runs_say_each_closed_date_once_with_its_reason() -> None:
    rec = parse("every day at 10:00", "Europe/Berlin", now=NOW)
    notes = [r.describe() for r in runs(rec, Business(CAL, "skip"), NOW)
             if r.action != "kept" and r.original.year == 2026 and r.original.month == 12
             and r.original.day in (24, 25, 26, 27)]
    assert notes == ["Fri 25 Dec 2026 skipped: Christmas Day",
                     "Sat 26 Dec 2026 skipped: Second Day of Christmas", "Sun 27 Dec 2026 skipped: weekend"]


def test_a_ten_day_closure_under_after_runs_once_the_day_after() -> None:
    rec = parse("every day at 10:00", "Europe/Berlin", now=NOW)
    business = Business(CAL, "after")
    first = next_run_after(rec, business, datetime(2027, 1, 15, 12, tzinfo=timezone.utc))
    second = next_run_after(rec, business, first)  # type: ignore[arg-type]
    assert first is not None and first.date().isoformat() == "2027-01-28"
    assert second is not None and second.date().isoformat() == "2027-01-29"


def test_the_calendar_travels_in_the_stored_text_and_load_ignores_it() -> None:
    rec = parse("every day at 10:00", "Europe/Berlin", now=NOW)
    stored = attach(rec.canonical, Business(CAL, "before"))
    assert stored.startswith(rec.canonical + "\nX-ALMANAC-CALENDAR;POLICY=BEFORE:")
    canonical, business = detach(stored)
    assert canonical == rec.canonical and business == Business(CAL, "before")
    assert load(stored, "text").canonical == rec.canonical
    assert detach(rec.canonical) == (rec.canonical, None)


def test_a_dense_rule_across_a_long_closure_costs_one_step_a_day(monkeypatch: pytest.MonkeyPatch) -> None:
    from almanac.platform.recurrence import business as module

    calls: list[datetime] = []
    real = module.occurrences

    def counting(rec, *, after, count):  # type: ignore[no-untyped-def]
        calls.append(after)
        return real(rec, after=after, count=count)

    monkeypatch.setattr(module, "occurrences", counting)
    shut = BusinessCalendar.from_json({"name": "shut", "closed": [
        {"from": "2026-12-01", "to": "2027-06-30", "label": "refit"}]})
    rec = parse("FREQ=SECONDLY", "UTC", now=NOW)
    first = next_run_after(rec, Business(shut, "after"), datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert first == datetime(2027, 7, 1, tzinfo=timezone.utc)  # one run the day after, at its first second
    assert len(calls) < 400  # a day at a time through 212 closed days and the 31 looked back on

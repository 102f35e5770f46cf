"""Schedules under business calendars, driven through the real scheduler with a manual clock, on
SQLite and PostgreSQL (the per-tenant claim, and on PostgreSQL the claim across tenants too): one run
per original occurrence, never two on one day, moved runs at their moved time."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from almanac.platform.timer.metrics import get_metrics
from almanac.platform.store.models import Run
from almanac.platform.store.planning import RecurrenceRules
from almanac.platform.recurrence.calendars import BusinessCalendar, is_business_day
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import Scheduler
from almanac.sandbox.contract import RunResult

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
END = datetime(2027, 1, 1, tzinfo=timezone.utc)
DE_BY = BusinessCalendar.from_json({"name": "DE-BY", "country": "DE", "subdivision": "BY"})


def _schedule(admin: Any, script_id: int, name: str, rule: str, **calendar: Any) -> dict[str, Any]:
    made = admin.post("/api/v1/schedules", json={"name": name, "script_id": script_id, "rule": rule,
                                                 "timezone": "Europe/Berlin", **calendar})
    assert made.status_code == 201, made.text
    return made.json()


def _drive(database: Any, slug: str, clock: Any, path: str) -> None:
    """Every hour from START to END: the clock moves, the scheduler claims and runs what is due."""
    store = SqlStore(database, RecurrenceRules(), lease_margin_s=120)
    scheduler = Scheduler(store, FunctionRunner(lambda source, event, caps: 1), clock, lambda: [],
                          metrics=get_metrics(CollectorRegistry()))
    while clock.now() < END:
        clock.advance(3600)
        if path == "tenant":
            scheduler.tick(slug)
            continue
        claims = store.due_index.claim_across(clock.now(), 100).claims
        if claims:
            store.due_index.finish_across([(c, RunResult("succeeded", output=1), clock.now(), clock.now()) for c in claims])


def _runs(database: Any, slug: str, schedule_id: int) -> list[datetime]:
    with database.tenant_session(slug) as s:
        rows = s.execute(select(Run).where(Run.schedule_id == schedule_id).order_by(Run.id)).scalars()
        return [r.scheduled_for.astimezone(BERLIN) for r in rows if r.status == "succeeded"]


@pytest.mark.parametrize("path", ["tenant", "across"])
def test_before_across_a_december_with_christmas_runs_once_per_original_occurrence(
        api: Any, database: Any, manual_clock: Any, backend: str, path: str) -> None:
    if path == "across" and backend != "postgresql":
        pytest.skip("the claim across tenants is PostgreSQL's")
    manual_clock.set(START)
    admin = api()
    script = admin.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;\n"}).json()["id"]
    payroll = _schedule(admin, script, "payroll", "on the 25th of every month at 10",
                        calendar="DE-BY", calendar_policy="before")
    daily = _schedule(admin, script, "daily", "every day at 10:00", calendar="DE-BY", calendar_policy="before")
    assert payroll["calendar"] == "DE-BY" and payroll["calendar_policy"] == "before"
    assert payroll["next_run_at"] == "2026-12-24T09:00:00Z"  # Christmas Day is a Friday: the Thursday before

    _drive(database, admin.tenant, manual_clock, path)

    assert _runs(database, admin.tenant, payroll["id"]) == [datetime(2026, 12, 24, 10, tzinfo=BERLIN)]
    days = [d.date() for d in _runs(database, admin.tenant, daily["id"])]
    business = [date(2026, 12, 1) + timedelta(days=i) for i in range(31)]
    business = [d for d in business if is_business_day(DE_BY, d)]
    assert days == business  # every business day once; Christmas and weekends moved onto a day that runs anyway
    assert date(2026, 12, 25) not in days and date(2026, 12, 26) not in days


def test_a_calendar_change_replans_the_schedules_that_name_it(api: Any, manual_clock: Any) -> None:
    manual_clock.set(START)
    admin = api()
    assert admin.put("/api/v1/calendars/office", json={"country": "DE"}).status_code == 201
    script = admin.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;\n"}).json()["id"]
    sch = _schedule(admin, script, "report", "every day at 10:00", calendar="office", calendar_policy="after")
    assert sch["next_run_at"] == "2026-12-01T09:00:00Z"
    closed = {"country": "DE", "closed": [{"first": "2026-12-01", "last": "2026-12-03", "label": "audit"}]}
    assert admin.put("/api/v1/calendars/office", json=closed).status_code == 200
    again = admin.get(f"/api/v1/schedules/{sch['id']}").json()
    assert again["next_run_at"] == "2026-12-04T09:00:00Z"
    nexts = admin.get(f"/api/v1/schedules/{sch['id']}/next?count=2").json()
    assert nexts["next"] == ["2026-12-04T10:00:00+01:00", "2026-12-07T10:00:00+01:00"]
    assert [n["note"] for n in nexts["calendar_notes"]][:2] == [
        "moved from Tue 1 Dec 2026 to Fri 4 Dec 2026: audit",
        "Wed 2 Dec 2026 skipped: audit; Fri 4 Dec 2026 already has a run"]


def test_schedule_calendar_fields_are_checked_and_patched(api: Any, manual_clock: Any) -> None:
    manual_clock.set(START)
    admin = api()
    script = admin.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;\n"}).json()["id"]
    base = {"name": "r", "script_id": script, "rule": "every day at 10:00", "timezone": "Europe/Berlin"}
    unknown = admin.post("/api/v1/schedules", json={**base, "calendar": "nowhere"})
    assert unknown.status_code == 422 and "nowhere" in unknown.json()["error"]["message"]
    bad_policy = admin.post("/api/v1/schedules", json={**base, "calendar": "DE", "calendar_policy": "sideways"})
    assert bad_policy.status_code == 422
    never = admin.post("/api/v1/schedules", json={**base, "rule": "every saturday at 10", "calendar": "DE"})
    assert never.status_code == 422 and never.json()["error"]["code"] == "never_fires"
    plain = admin.post("/api/v1/schedules", json=base).json()
    assert plain["calendar"] is None and plain["calendar_policy"] == "skip"
    patched = admin.patch(f"/api/v1/schedules/{plain['id']}", json={"calendar": "de", "calendar_policy": "after"})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["calendar"] == "DE" and body["calendar_policy"] == "after" and "X-ALMANAC" not in body["rrule"]
    assert "business day" in body["description"] and "DE" in body["description"]
    cleared = admin.patch(f"/api/v1/schedules/{plain['id']}", json={"calendar": None}).json()
    assert cleared["calendar"] is None and cleared["calendar_policy"] == "skip"
    batch = admin.post("/api/v1/schedules/batch", json={"schedules": [
        {**base, "calendar": "US-NY"}, {**base, "calendar": "nowhere"}]})
    assert batch.status_code == 422 and batch.json()["error"]["details"]["errors"][0]["index"] == 1
    made = admin.post("/api/v1/schedules/batch", json={"schedules": [{**base, "calendar": "US-NY"}]})
    assert made.status_code == 201 and made.json()["items"][0]["calendar"] == "US-NY"


def test_preview_says_what_the_calendar_did_to_each_date(api: Any, manual_clock: Any) -> None:
    manual_clock.set(START)
    viewer = api("viewer")
    answer = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "on the 25th of every month at 10", "timezone": "Europe/Berlin", "count": 3,
        "calendar": "DE-BY", "calendar_policy": "before"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["next"] == ["2026-12-24T10:00:00+01:00", "2027-01-25T10:00:00+01:00", "2027-02-25T10:00:00+01:00"]
    assert body["calendar"] == "DE-BY" and "DE-BY" in body["description"] and "before" in body["description"]
    assert body["calendar_notes"] == [{
        "original": "2026-12-25T10:00:00+01:00", "action": "moved", "when": "2026-12-24T10:00:00+01:00",
        "reason": "Christmas Day", "note": "moved from Fri 25 Dec 2026 to Thu 24 Dec 2026: Christmas Day"}]
    plain = viewer.post("/api/v1/recurrence/preview", json={"rule": "every day at 10", "count": 2}).json()
    assert plain["calendar"] is None and plain["calendar_notes"] == []


def test_preview_refuses_a_rule_the_calendar_leaves_nothing_of_and_says_an_unknown_year(api: Any) -> None:
    viewer = api("viewer")
    never = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "every sunday at 10", "calendar": "US", "calendar_policy": "skip"})
    assert never.status_code == 422 and never.json()["error"]["code"] == "never_fires"
    far = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "every weekday at 10", "start": "2150-01-01T00:00:00Z", "calendar": "DE"})
    assert far.status_code == 422 and "holidays unknown for 2150" in far.json()["error"]["message"]
    unknown = viewer.post("/api/v1/recurrence/preview", json={"rule": "every day at 10", "calendar": "nowhere"})
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "validation_error"


def test_the_calendar_the_rule_s_english_names_fills_the_fields_and_a_disagreement_is_refused(
        database: Any, make_tenant: Any) -> None:
    from dataclasses import replace

    from almanac.errors import InvalidRule
    from almanac.platform.service import calendar_store
    from almanac.platform.recurrence import parse
    from almanac.platform.recurrence.model import CalendarClause

    slug = make_tenant()
    rec = replace(parse("every day at 10", "Europe/Berlin", now=START), calendar=CalendarClause("DE", "before"))
    with database.tenant_session(slug) as s:
        business = calendar_store.named(s, rec, None, None, START)
        assert business is not None and business.calendar.name == "DE" and business.policy == "before"
        assert calendar_store.named(s, rec, "de", "before", START) is not None  # the same, said twice
        with pytest.raises(InvalidRule, match="calendar 'DE' but the calendar field says 'US'"):
            calendar_store.named(s, rec, "US", None, START)
        with pytest.raises(InvalidRule, match="calendar_policy says 'after'"):
            calendar_store.named(s, rec, None, "after", START)
        plain = calendar_store.named(s, replace(rec, calendar=None), None, None, START)
        assert plain is None


def test_english_business_words_through_the_api_name_their_calendar_or_are_refused(api: Any) -> None:
    """English that names a place fills the calendar; English that speaks of business days or
    holidays without naming one is refused unless the calendar field names it: never a silent guess."""
    viewer = api("viewer")
    named = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "every weekday at 9am except holidays in Germany", "timezone": "Europe/Berlin",
        "start": "2026-12-23T00:00:00", "count": 3})
    assert named.status_code == 200, named.text
    body = named.json()
    assert body["calendar"] == "DE" and "DE" in body["description"]
    assert [d[:10] for d in body["next"]] == ["2026-12-23", "2026-12-24", "2026-12-28"]  # 25th, 26th: holidays
    for rule in ("every business day at 8", "every day at 10 except holidays"):
        refused = viewer.post("/api/v1/recurrence/preview", json={"rule": rule, "timezone": "Europe/Berlin"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_rule"
        assert "names no calendar" in refused.json()["error"]["message"]
    given = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "every business day at 8", "timezone": "Europe/Berlin", "calendar": "DE-BY",
        "start": "2027-01-05T00:00:00", "count": 2})
    assert given.status_code == 200, given.text
    assert [d[:10] for d in given.json()["next"]] == ["2027-01-05", "2027-01-07"]  # 6 Jan: Epiphany in Bavaria
    # The calendar is said once, in words the rule builder reads back to the same rule and calendar.
    assert given.json()["description"] == "every business day at 8:00 AM except holidays in DE-BY (Europe/Berlin)"
    payroll = viewer.post("/api/v1/recurrence/preview", json={
        "rule": "on the 25th of every month at 10, or the business day before if it is not a business day in DE-BY",
        "timezone": "Europe/Berlin"}).json()
    assert payroll["description"] == ("every month on the 25th at 10:00 AM, or the business day before if it is "
                                      "not a business day in DE-BY (Europe/Berlin)")

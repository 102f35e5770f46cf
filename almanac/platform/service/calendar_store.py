"""A tenant's business calendars (SPEC section 5): stored by name, built-in by place, used by schedules.

A name the tenant has stored means that calendar. Otherwise a name that is a country code or
COUNTRY-SUBDIVISION the holiday library knows ("DE", "DE-BY", "US-NY") is a built-in calendar:
that place's public holidays with a Saturday-Sunday weekend, so "except holidays in Germany"
needs no setup. A stored calendar of such a name takes its place for that tenant.

Schedules carry a snapshot of their calendar in their rule text (recurrence/business.py); a
change of a stored calendar rewrites the snapshot of every schedule naming it and replans them
in the same transaction. Every query runs in the caller's tenant schema.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import lru_cache
from typing import Any

import holidays
import holidays.registry
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from almanac.errors import Conflict, InvalidRule, NotFound, ValidationError
from almanac.platform import recurrence
from almanac.platform.store import planning
from almanac.platform.store.models import Calendar, Schedule
from almanac.platform.recurrence.business import Business, attach, detach
from almanac.platform.recurrence.calendars import BusinessCalendar
from almanac.platform.recurrence.roll import check_policy, ensure_fires_with_calendar

MAX_CALENDARS = 100
# The API's closed entries say first/last; the stored value (BusinessCalendar's JSON) says from/to.
_API_TO_CORE = {"first": "from", "last": "to", "label": "label"}


def builtin(name: str) -> BusinessCalendar | None:
    """The built-in calendar of a place name ("DE", "de-by"), or None when it names no place."""
    country, _, subdivision = name.partition("-")
    if not country.isalpha() or len(country) > 3:
        return None
    try:
        return BusinessCalendar.from_json({"name": name.upper(), "country": country,
                                           "subdivision": subdivision or None})
    except ValidationError:
        return None


def find(session: Session, name: str) -> tuple[BusinessCalendar, Calendar | None]:
    """The calendar `name` means for this tenant and its row (None: built-in), or NotFound."""
    row = session.get(Calendar, name) if len(name) <= 64 else None
    if row is not None:
        return find_row(row)
    cal = builtin(name)
    if cal is None:
        raise NotFound(f"There is no calendar {name[:64]!r}: store one, or name a place such as DE or US-NY.")
    return cal, None


def find_row(row: Calendar) -> tuple[BusinessCalendar, Calendar]:
    """A stored row's calendar, and the row."""
    return BusinessCalendar.from_json(json.loads(row.body)), row


def for_schedule(session: Session, name: str | None, policy: str) -> Business | None:
    """The Business a schedule's fields name; an unknown calendar is a 422 (validation_error)."""
    checked = check_policy(policy)
    if name is None:
        return None
    try:
        cal, _ = find(session, name)
    except NotFound as exc:
        raise ValidationError(exc.message, details={"field": "calendar"}) from None
    return Business(cal, checked)


def listing(session: Session) -> list[Calendar]:
    return list(session.execute(select(Calendar).order_by(Calendar.name)).scalars())


def parse_body(name: str, body: dict[str, Any]) -> BusinessCalendar:
    """The calendar an API body describes (closed entries as {first, last?, label?})."""
    closed = body.get("closed", [])
    if isinstance(closed, list):
        closed = [{_API_TO_CORE.get(k, k): v for k, v in item.items()} if isinstance(item, dict) else item
                  for item in closed]
    data = {**body, "name": name, "closed": closed}
    return BusinessCalendar.from_json({k: v for k, v in data.items() if v is not None or k == "country"})


def put(session: Session, rules: planning.Rules, cal: BusinessCalendar, *, now: datetime,
        by: str) -> tuple[Calendar, bool, list[int]]:
    """Create or replace a stored calendar; (row, created, ids of the schedules replanned).

    Refused with NeverFires when a schedule naming it would never fire under the new calendar.
    """
    row = session.get(Calendar, cal.name)
    created = row is None
    if row is None:
        if (session.scalar(select(func.count()).select_from(Calendar)) or 0) >= MAX_CALENDARS:
            raise ValidationError(f"A tenant may keep at most {MAX_CALENDARS} calendars.")
        row = Calendar(name=cal.name)
        session.add(row)
    row.body, row.updated_at, row.updated_by = json.dumps(cal.to_json()), now, by[:200]
    session.flush()
    return row, created, replan_users(session, rules, cal, now)


def replan_users(session: Session, rules: planning.Rules, cal: BusinessCalendar, now: datetime) -> list[int]:
    """Give every schedule naming `cal` its new snapshot and replan it; their ids."""
    users = list(session.execute(select(Schedule).where(Schedule.calendar == cal.name)).scalars())
    for sch in users:
        canonical, _ = detach(sch.rrule)
        business = Business(cal, check_policy(sch.calendar_policy))
        rec = recurrence.load(canonical, sch.input_kind)
        ensure_fires_with_calendar(rec, cal, business.policy, max(now, rec.dtstart))
        sch.rrule, sch.version, sch.updated_at = attach(canonical, business), sch.version + 1, now
        planning.replan_schedule(session, sch, now, rules)
    return [sch.id for sch in users]


def remove(session: Session, name: str) -> None:
    """Delete a stored calendar; Conflict while a schedule names it."""
    row = session.get(Calendar, name) if len(name) <= 64 else None
    if row is None:
        raise NotFound(f"The tenant has no stored calendar {name[:64]!r}." +
                       (" Built-in place calendars cannot be deleted." if builtin(name) else ""))
    used = session.execute(select(Schedule.name).where(Schedule.calendar == name).limit(3)).scalars().all()
    if used:
        raise Conflict(f"Schedules use calendar {name!r} ({', '.join(used)}); change or delete them first.")
    session.delete(row)
    session.flush()


# -- a schedule's calendar ----------------------------------------------------------------


def named(session: Session, rec: Any, calendar: str | None, policy: str | None, now: datetime
          ) -> Business | None:
    """The calendar a schedule runs under: its `calendar` field, else the one its rule's English
    names ("except holidays in Germany"); InvalidRule when both are given and disagree, a 422 for an
    unknown calendar, NeverFires when no occurrence survives it."""
    clause = getattr(rec, "calendar", None) if rec.input_kind == "text" else None
    if clause is not None:
        calendar, policy = _with_clause(clause, calendar, policy)
    business = for_schedule(session, calendar, policy or "skip")
    if business is not None:
        # From the rule's start when it lies ahead: the check looks a bounded horizon from there.
        ensure_fires_with_calendar(rec, business.calendar, business.policy, max(now, rec.dtstart))
    return business


def _with_clause(clause: Any, calendar: str | None, policy: str | None) -> tuple[str, str]:
    """The calendar and policy when the rule's English speaks of business days: the fields may
    repeat what it says, never contradict it; English that names no calendar ("every business
    day", "except holidays") needs the `calendar` field, since guessing one would be silent."""
    if clause.name is not None and calendar is not None and calendar.upper() != clause.name.upper():
        raise InvalidRule(f"The rule says calendar {clause.name!r} but the calendar field says "
                          f"{calendar[:64]!r}; give one of them, or the same in both.")
    if policy is not None and policy != clause.policy:
        raise InvalidRule(f"The rule says {clause.policy!r} for days that are not business days but "
                          f"calendar_policy says {policy!r}; give one of them, or the same in both.")
    chosen = calendar or clause.name
    if chosen is None:
        raise InvalidRule("The rule speaks of business days or holidays but names no calendar: say where "
                          "(\"except holidays in Germany\", \"in DE-BY\") or choose a calendar.")
    return chosen, clause.policy


def upcoming(sch: Schedule, now: datetime, count: int) -> list[recurrence.Rolled]:
    """The schedule's next `count` runs at or after `now`, and what its calendar did on the way."""
    canonical, business = detach(sch.rrule)
    rec = recurrence.load(canonical, sch.input_kind)
    if business is None:
        return [recurrence.Rolled(w, "kept", w) for w in recurrence.occurrences(rec, after=now, count=count)]
    return recurrence.business.first_runs(rec, business, now, count)


def schedule_fields(rec: Any, business: Business | None) -> dict[str, Any]:
    """A schedule's columns for its rule under `business`: the stored rule text, the calendar's
    name (a built-in one as the library writes it: "DE-BY") and the policy."""
    return {"rrule": attach(rec.canonical, business), "calendar": business.calendar.name if business else None,
            "calendar_policy": business.policy if business else "skip"}



# -- what pages offer ---------------------------------------------------------------------


@lru_cache(maxsize=1)
def places() -> tuple[tuple[str, str], ...]:
    """(code, English name) of every country the holiday library knows, by name."""
    supported = holidays.list_supported_countries()
    named = {entry[1]: re.sub(r"(?<=[a-z])(?=[A-Z])", " ", entry[0]) for entry in holidays.registry.COUNTRIES.values()}
    return tuple(sorted(((code, named.get(code, code)) for code in supported if len(code) == 2),
                        key=lambda pair: pair[1]))


def subdivisions(country: str) -> tuple[str, ...]:
    """The subdivision codes the library knows for `country` (none for an unknown country)."""
    return tuple(str(s) for s in holidays.list_supported_countries().get(country.upper(), ()))

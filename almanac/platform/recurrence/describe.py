"""English for any canonical recurrence, in a grammar `parse_text` reads back.

Covers what rrule.js `toText` covers and what it gives up on: every FREQ
and INTERVAL, weekday lists, numbered weekdays (from either end), month
days (negative too), year days, week numbers, BYSETPOS, times of day,
COUNT, UNTIL, RDATE/EXDATE and the time zone. Times that DTSTART supplies
are written out ("every day at 9:00 AM"), so the text says when it fires.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from .engine import Plan, compile_plan
from .calendars import place_code
from .model import CalendarClause, Recurrence, Rule
from .zones import get_zone, to_instant, to_wall, utc_key
from .words import FREQ_UNIT, clock, datetime_text, day_name, join, month_name, ordinal

_WEEKDAYS = frozenset(range(5))
_PERIOD = {"YEARLY": "year", "MONTHLY": "month", "WEEKLY": "week", "DAILY": "day",
           "HOURLY": "hour", "MINUTELY": "minute", "SECONDLY": "second"}


def describe(rec: Recurrence) -> str:
    """E.g. "every weekday at 9:00 AM (Europe/Berlin)"."""
    parts = [describe_rule(r, compile_plan(r, rec.start_wall)) for r in rec.rules]
    text = "; and ".join(parts)
    zone = get_zone(rec.timezone)
    extra = [d for d in rec.rdates if not (not rec.rules and utc_key(d) == utc_key(rec.dtstart))]
    if not rec.rules:
        text = "once on " + datetime_text(rec.start_wall)
    if extra:
        text += "; and also on " + join([_instant_text(d, zone) for d in extra])
    if rec.exdates:
        text += "; except on " + join([_instant_text(d, zone) for d in rec.exdates])
    if rec.calendar is not None:
        text = _with_calendar(text, rec.calendar)
    return f"{text} ({rec.timezone})"


_EDGE = re.compile(r"every month on weekdays at ([^,;]+), only the (last|1st) occurrence in each month")
_MOVES = {"before": "the business day before", "after": "the next business day"}


def _with_calendar(text: str, clause: CalendarClause) -> str:
    """The calendar, said last for the whole rule, in words `parse_text` reads back:
    "every business day at 8:00 AM", "... except holidays in DE-BY", "the last business day
    of every month at 5:00 PM in DE"."""
    where = f" in {calendar_words(clause.name)}" if clause.name else ""
    edge = _EDGE.match(text)
    if edge and {"last": "before", "1st": "after"}[edge.group(2)] == clause.policy:
        which = "last" if edge.group(2) == "last" else "first"
        head = f"the {which} business day of every month at {edge.group(1)}"
        rest = text[edge.end():]
        if not rest and (not where or place_code(clause.name or "") == clause.name):
            return head + where
        text = head + rest
    if clause.policy == "skip":
        if text.startswith("every weekday "):
            text = "every business day " + text[len("every weekday "):]
        return text + " except holidays" + where
    return f"{text}, or {_MOVES[clause.policy]} if it is not a business day{where}"


def calendar_words(name: str) -> str:
    """A place's code as it is; a tenant's calendar by name, quoted where the name alone would
    read as a place ("germany" is the tenant's calendar, not Germany's holidays)."""
    code = place_code(name)
    if code == name or (code is None and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name)):
        return name
    return f'the "{name}" calendar'


def _instant_text(when: datetime, zone: ZoneInfo) -> str:
    """A date on the rule's wall clock, or in UTC where that clock cannot name it (the second pass
    of a repeated hour), so that the description names the same instant."""
    wall = to_wall(when, zone).replace(fold=0)
    if utc_key(to_instant(wall, zone)) == utc_key(when):
        return datetime_text(wall)
    return datetime_text(when.astimezone(timezone.utc).replace(tzinfo=None)) + " UTC"


def describe_rule(rule: Rule, plan: Plan) -> str:
    return _describe_rule(rule, plan) + _phase(rule, plan)


def _phase(rule: Rule, plan: Plan) -> str:
    """Where an INTERVAL counts from, so that the text read back from any start gives the same
    dates: "every 2 weeks on Monday, starting November 30, 2026 at 9:00 AM"."""
    return f", starting {datetime_text(plan.anchor)}" if rule.interval > 1 else ""


def _describe_rule(rule: Rule, plan: Plan) -> str:
    ranged = _as_range(rule, plan)
    if ranged is not None:
        return ranged + _ends(rule)
    out = [_head(rule, plan)]
    out += _day_clauses(rule, plan)
    out += _time_clauses(rule, plan)
    text = "".join(out)
    if rule.bysetpos:
        which = join([ordinal(p) for p in rule.bysetpos])
        noun = "occurrence" if len(rule.bysetpos) == 1 else "occurrences"
        text += f", only the {which} {noun} in each {_PERIOD[rule.freq]}"
    weeks_matter = rule.freq == "WEEKLY" and (rule.interval > 1 or rule.bysetpos)
    if rule.wkst != 0 and (weeks_matter or rule.byweekno):
        text += f" (weeks start on {day_name(rule.wkst)})"
    return text + _ends(rule)


def _ends(rule: Rule) -> str:
    text = ""
    if rule.count is not None:
        text += ", once" if rule.count == 1 else f", {rule.count} times"
    if rule.until is not None:
        text += ", until " + datetime_text(rule.until)
    return text


def _as_range(rule: Rule, plan: Plan) -> str | None:
    """"every 5 minutes from 3:00 PM to 3:55 PM on weekdays": times of day in
    even steps, on plain days, read as a range rather than a list."""
    daily = rule.freq == "DAILY" or (rule.freq == "WEEKLY" and _plain_days_head(rule, plan))
    if not daily or rule.interval != 1 or rule.bysetpos or plan.days.nth:
        return None
    if rule.bymonthday or rule.byyearday or rule.byweekno or len(plan.seconds) != 1:
        return None
    size = len(plan.hours) * len(plan.minutes)
    if not 3 <= size <= 1440:
        return None
    times = sorted(h * 3600 + m * 60 + plan.seconds[0] for h in plan.hours for m in plan.minutes)
    steps = {b - a for a, b in zip(times, times[1:])}
    if len(steps) != 1:
        return None
    step = steps.pop()
    every = _every_span(step)
    first, last = times[0], times[-1]
    text = (f"{every} from {clock(first // 3600, first // 60 % 60, first % 60)} "
            f"to {clock(last // 3600, last // 60 % 60, last % 60)}")
    if rule.byday:
        days = sorted(plan.days.plain)
        text += " on " + ("weekdays" if set(days) == _WEEKDAYS else join([day_name(d) for d in days]))
    if rule.bymonth:
        text += " in " + join([month_name(m) for m in rule.bymonth])
    return text


def _every_span(seconds: int) -> str:
    if seconds % 3600 == 0:
        n, unit = seconds // 3600, "hour"
    else:
        n, unit = seconds // 60, "minute"
    return f"every {unit}" if n == 1 else f"every {n} {unit}s"


def _is_weekdays(rule: Rule, plan: Plan) -> bool:
    only_days = not (rule.bymonth or rule.bymonthday or rule.byyearday or rule.byweekno)
    return (rule.freq in ("WEEKLY", "DAILY") and rule.interval == 1 and only_days
            and plan.days.plain == _WEEKDAYS and not plan.days.nth)


def _plain_days_head(rule: Rule, plan: Plan) -> bool:
    """"every Monday and Friday": weekly, every week, weekdays only."""
    only_days = not (rule.bymonth or rule.bymonthday or rule.byyearday or rule.byweekno)
    return rule.freq == "WEEKLY" and rule.interval == 1 and only_days and not plan.days.nth


def _nth_head(rule: Rule, plan: Plan) -> bool:
    """"the last Friday of every month"."""
    return (rule.freq == "MONTHLY" and bool(rule.byday) and not plan.days.plain
            and not (rule.bymonth or rule.bymonthday or rule.bysetpos))


def _head(rule: Rule, plan: Plan) -> str:
    if _is_weekdays(rule, plan):
        return "every weekday"
    if _plain_days_head(rule, plan):
        return "every " + join([day_name(d) for d in sorted(plan.days.plain)])
    unit = FREQ_UNIT[rule.freq]
    every = f"every {unit}" if rule.interval == 1 else f"every {rule.interval} {unit}s"
    if _nth_head(rule, plan):
        return f"the {_nth_list(plan)} of {every}"
    return every


def _nth_list(plan: Plan) -> str:
    items = sorted(plan.days.nth, key=lambda p: (p[0] < 0, abs(p[0]), p[1]))
    return join([f"{ordinal(n)} {day_name(wd)}" for n, wd in items])


def _day_clauses(rule: Rule, plan: Plan) -> list[str]:
    out = []
    yearly_date = rule.freq == "YEARLY" and len(plan.days.months) == 1 and not (
        rule.byday or rule.byyearday or rule.byweekno) and all(d > 0 for d in plan.days.monthdays)
    if yearly_date:
        month = month_name(next(iter(plan.days.months)))
        days = join([str(d) for d in sorted(plan.days.monthdays)])
        return [f" on {month} {days}"]
    if rule.bymonth:
        out.append(" in " + join([month_name(m) for m in rule.bymonth]))
    if rule.byweekno:
        noun = "week" if len(rule.byweekno) == 1 else "weeks"
        out.append(f" in the {_ordinals(rule.byweekno)} {noun} of the year")
    if rule.byyearday:
        noun = "day" if len(rule.byyearday) == 1 else "days"
        out.append(f" on the {_ordinals(rule.byyearday)} {noun} of the year")
    if plan.days.monthdays and (rule.bymonthday or rule.freq in ("YEARLY", "MONTHLY")):
        last_is_negative = any(day < 0 for day in plan.days.monthdays)
        # "on the last" alone reads as a word missing: a monthly rule ending in "last" says "day"
        tail = " day of the month" if rule.freq != "MONTHLY" else (" day" if last_is_negative else "")
        out.append(f" on the {_ordinals(tuple(plan.days.monthdays))}{tail}")
    has_days = plan.days.plain or plan.days.nth
    if has_days and not _is_weekdays(rule, plan) and not _plain_days_head(rule, plan) \
            and not _nth_head(rule, plan):
        missing = sorted(set(range(7)) - plan.days.plain)
        if rule.freq in ("DAILY", "HOURLY", "MINUTELY") and not plan.days.nth and 1 <= len(missing) <= 2:
            out.append(" except on " + join([day_name(d) for d in missing]))
        else:
            out.append(" on " + _byday_text(rule, plan))
    return out


def _ordinals(values: tuple[int, ...] | list[int]) -> str:
    items = sorted(values, key=lambda n: (n < 0, abs(n)))
    return join([ordinal(n) for n in items])


def _byday_text(rule: Rule, plan: Plan) -> str:
    items = []
    if plan.days.plain == _WEEKDAYS:
        items.append("weekdays")
    else:
        items += [day_name(d) for d in sorted(plan.days.plain)]
    if plan.days.nth:
        items.append("the " + _nth_list(plan))
    text = join(items)
    if plan.days.nth and rule.freq == "YEARLY" and plan.days.nth_in_year:
        text += " of the year"
    return text


def _time_clauses(rule: Rule, plan: Plan) -> list[str]:
    if rule.freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY"):
        return [" at " + _times(plan.hours, plan.minutes, plan.seconds)]
    out = []
    if rule.byhour:
        out.append(" during " + _numbers("hour", rule.byhour))
    # A minute or second left to DTSTART is omitted only when it is :00.
    if rule.freq == "HOURLY":
        if plan.minutes != (0,) or plan.seconds != (0,) or rule.byminute or rule.bysecond:
            out.append(" at " + _numbers("minute", plan.minutes))
            if plan.seconds != (0,) or rule.bysecond:
                out.append(" and " + _numbers("second", plan.seconds))
        return out
    if rule.freq == "MINUTELY":
        if rule.byminute:
            out.append(" during " + _numbers("minute", rule.byminute))
        if plan.seconds != (0,) or rule.bysecond:
            out.append(" at " + _numbers("second", plan.seconds))
        return out
    if rule.byminute:
        out.append(" during " + _numbers("minute", rule.byminute))
    if rule.bysecond:
        out.append(" on " + _numbers("second", rule.bysecond))
    return out


def _times(hours: tuple[int, ...], minutes: tuple[int, ...], seconds: tuple[int, ...]) -> str:
    size = len(hours) * len(minutes) * len(seconds)
    if size <= 12:
        return join([clock(h, m, s) for h in hours for m in minutes for s in seconds])
    return (_numbers("hour", hours) + ", " + _numbers("minute", minutes) + ", "
            + _numbers("second", seconds))


def _numbers(noun: str, values: tuple[int, ...]) -> str:
    plural = noun + ("s" if len(values) > 1 else "")
    return f"{plural} {join([str(v) for v in values])}"


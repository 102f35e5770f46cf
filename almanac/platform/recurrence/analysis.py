"""Never-fires and too-frequent checks: static analysis, then a bounded search.

The static checks give the person a precise reason for the common
impossible rules (Feb 30, a 6th Monday, BYSETPOS past the set, an INTERVAL
whose steps never land on the BY values). Whatever they cannot decide, the
bounded search in `expand.py` decides: it looks one full period of the rule
(400 Gregorian years combined with the INTERVAL, never past year 9999)
beyond the start, so finding nothing there proves the rule never fires.
"""

from __future__ import annotations

import math
from datetime import datetime

from almanac.errors import NeverFires, TooFrequent

from .engine import Plan, compile_plan
from .model import UNIT_SECONDS, WEEKDAYS, Recurrence, Rule
from .occurrences import occurrences, to_instant
from .zones import get_zone

_MONTH_NAMES = ("January February March April May June July August September "
                "October November December").split()
_DAY_NAMES = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_MAX_LEN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_GAP_LOOK = 400  # occurrences inspected for the shortest gap


def static_reason(rule: Rule, plan: Plan) -> str | None:
    """Why `rule` can never produce anything, if a cheap check can tell."""
    for check in (_monthday_vs_month, _nth_weekday, _setpos, _monthly_interval, _grid):
        reason = check(rule, plan)
        if reason:
            return reason
    return None


def _monthday_vs_month(rule: Rule, plan: Plan) -> str | None:
    days, months = plan.days.monthdays, plan.days.months or set(range(1, 13))
    if not days:
        return None
    if any(abs(d) <= _MAX_LEN[m - 1] for d in days for m in months):
        return None
    shown = ",".join(map(str, sorted(days)))
    if len(months) == 1:
        m = next(iter(months))
        name = _MONTH_NAMES[m - 1]
        return (f"BYMONTHDAY={shown} with BYMONTH={m} never happens: "
                f"{name} has at most {_MAX_LEN[m - 1]} days.")
    return f"BYMONTHDAY={shown} never happens in the months the rule allows."


def _nth_weekday(rule: Rule, plan: Plan) -> str | None:
    nth = plan.days.nth
    if not nth or plan.days.plain or plan.days.nth_in_year:
        return None
    if all(abs(n) > 5 for n, _ in nth):
        n, wd = min(nth, key=lambda p: abs(p[0]))
        return (f"A month has at most 5 {_DAY_NAMES[wd]}s, so BYDAY={n}{WEEKDAYS[wd]} "
                "never happens.")
    return None


def _setpos(rule: Rule, plan: Plan) -> str | None:
    if not plan.setpos:
        return None
    days = _max_days_per_period(plan)
    size = days * len(plan.hours) * len(plan.minutes) * len(plan.seconds)
    if plan.freq in UNIT_SECONDS:
        size = _expansion_size(plan)
    if all(abs(p) > size for p in plan.setpos):
        p = min(plan.setpos, key=abs)
        period = {"YEARLY": "year", "MONTHLY": "month", "WEEKLY": "week", "DAILY": "day",
                  "HOURLY": "hour", "MINUTELY": "minute", "SECONDLY": "second"}[plan.freq]
        return (f"BYSETPOS={p} asks for occurrence {abs(p)} of each {period}, "
                f"but a {period} has at most {size}.")
    return None


def _max_days_per_period(plan: Plan) -> int:
    f = plan.days
    cap = {"YEARLY": 371 if f.weeknos else 366, "MONTHLY": 31, "WEEKLY": 7, "DAILY": 1}[plan.freq]
    per_weekday = {"YEARLY": 53, "MONTHLY": 5, "WEEKLY": 1, "DAILY": 1}[plan.freq]
    if plan.freq == "YEARLY" and f.months:
        per_weekday = min(53, 5 * len(f.months))
    if f.plain or f.nth:
        cap = min(cap, per_weekday * len(f.plain) + len(f.nth))
    if f.monthdays and plan.freq in ("MONTHLY", "DAILY"):
        cap = min(cap, len(f.monthdays))
    if f.yeardays:
        cap = min(cap, len(f.yeardays))
    return cap


def _expansion_size(plan: Plan) -> int:
    if plan.freq == "HOURLY":
        return len(plan.minutes) * len(plan.seconds)
    return len(plan.seconds) if plan.freq == "MINUTELY" else 1


def _monthly_interval(rule: Rule, plan: Plan) -> str | None:
    if plan.freq != "MONTHLY" or not rule.bymonth or plan.interval % 12 == 1:
        return None
    step = math.gcd(plan.interval, 12)
    start = plan.anchor.month
    reached = [m for m in range(1, 13) if (m - start) % step == 0]
    if set(reached) & set(rule.bymonth):
        return None
    names = " and ".join(_MONTH_NAMES[m - 1] for m in reached[:3])
    return (f"With FREQ=MONTHLY;INTERVAL={plan.interval} starting in {_MONTH_NAMES[start - 1]}, "
            f"the rule only reaches {names}{'...' if len(reached) > 3 else ''}, "
            f"never BYMONTH={','.join(map(str, rule.bymonth))}.")


def _grid(rule: Rule, plan: Plan) -> str | None:
    """Steps of S seconds from DTSTART only reach times t with t = t0 (mod S):
    compare that with the weekday and time-of-day values the rule allows."""
    if plan.freq == "DAILY":
        if plan.interval % 7 or not plan.days.plain or plan.days.nth:
            return None
        if plan.anchor.weekday() in plan.days.plain:
            return None
        return (f"With FREQ=DAILY;INTERVAL={plan.interval} every step lands on a "
                f"{_DAY_NAMES[plan.anchor.weekday()]}, which BYDAY does not allow.")
    if plan.freq not in UNIT_SECONDS:
        return None
    unit = UNIT_SECONDS[plan.freq]
    step = plan.interval * unit
    a = plan.anchor
    t0 = (a.toordinal() * 86400 + a.hour * 3600 + a.minute * 60 + a.second) // unit * unit
    modulus = math.gcd(step, 7 * 86400)
    if modulus <= unit:
        return None
    weekdays = plan.days.plain or frozenset(range(7))
    starts = _period_starts(plan, modulus)
    # ordinal 1 is a Monday: (ordinal - 1) * 86400 is a week position
    target = (t0 - 86400) % modulus
    if any((86400 * wd + p) % modulus == target for wd in weekdays for p in starts):
        return None
    return (f"With FREQ={plan.freq};INTERVAL={plan.interval} from DTSTART "
            f"{a:%a %H:%M:%S}, the steps never land on the hours, minutes or weekdays "
            "that the BY parts allow.")


def _period_starts(plan: Plan, modulus: int) -> set[int]:
    """Seconds of the day where an allowed period starts, modulo `modulus`."""
    found = {(3600 * h) % modulus for h in plan.hours}
    if plan.freq != "HOURLY":
        found = {(x + 60 * m) % modulus for x in found for m in plan.minutes}
    if plan.freq == "SECONDLY":
        found = {(x + s) % modulus for x in found for s in plan.seconds}
    return found


# ---------------------------------------------------------------- never fires


def ensure_fires(rec: Recurrence, now: datetime) -> None:
    """NeverFires, with the reason, unless something fires at or after `now`."""
    plans = [compile_plan(r, rec.start_wall) for r in rec.rules]
    reasons = [static_reason(r, p) for r, p in zip(rec.rules, plans)]
    future_dates = [d for d in rec.rdates if to_instant(d, get_zone(rec.timezone)) >= now]
    if rec.rules and all(reasons) and not future_dates:
        raise NeverFires(str(reasons[0]))
    if occurrences(rec, after=now, count=1):
        return
    raise NeverFires(_why_not(rec, now, [r for r in reasons if r]))


def _why_not(rec: Recurrence, now: datetime, reasons: list[str]) -> str:
    zone = get_zone(rec.timezone)
    if not rec.rules:
        return f"It fires only at {rec.dtstart:%Y-%m-%d %H:%M %Z}, which is in the past."
    for rule in rec.rules:
        if rule.until is not None and to_instant(rule.until, zone) < now:
            if rule.until < rec.start_wall:
                return (f"UNTIL ({rule.until:%Y-%m-%d %H:%M}) is before the start "
                        f"({rec.start_wall:%Y-%m-%d %H:%M}), so the rule never fires.")
            return f"The rule ended at UNTIL ({rule.until:%Y-%m-%d %H:%M}), before now."
        if rule.count is not None:
            return f"All {rule.count} occurrences (COUNT={rule.count}) are before now."
    if reasons:
        return reasons[0]
    return ("The rule has no occurrence in a full cycle of the calendar "
            "(400 years combined with its INTERVAL) after now, so it never fires.")


# ---------------------------------------------------------------- too frequent


def ensure_min_interval(rec: Recurrence, now: datetime, min_interval_s: int) -> None:
    """TooFrequent if two occurrences can be closer than `min_interval_s`.

    First a lower bound on the gap from the rule's structure; only when
    that bound is below the minimum are real occurrences inspected, and the
    refusal names two that are too close.
    """
    if min_interval_s <= 1:
        return
    bounds = [_gap_bound(p) for p in (compile_plan(r, rec.start_wall) for r in rec.rules)]
    if len(rec.rules) <= 1 and not rec.rdates and all(b >= min_interval_s for b in bounds):
        return
    found = occurrences(rec, after=now, count=_GAP_LOOK)
    for a, b in zip(found, found[1:]):
        seconds = (b - a).total_seconds()
        if seconds < min_interval_s:
            raise TooFrequent(
                f"It fires at {a:%Y-%m-%d %H:%M:%S} and again {_span(seconds)} later; "
                f"the minimum interval is {_span(min_interval_s)}."
            )


def _gap_bound(plan: Plan) -> float:
    """A lower bound on the seconds between two occurrences of one rule."""
    if plan.freq in UNIT_SECONDS:
        step = plan.interval * UNIT_SECONDS[plan.freq]
        inner = _inner_times(plan)
        gaps = [b - a for a, b in zip(inner, inner[1:])]
        return min(gaps + [step - (inner[-1] - inner[0])])
    return _product_gap(plan.hours, plan.minutes, plan.seconds)


def _product_gap(hours: tuple[int, ...], minutes: tuple[int, ...], seconds: tuple[int, ...]) -> int:
    """Shortest gap between consecutive times of hours x minutes x seconds
    (wrapping to the next day), without building the up to 86400 times."""
    def diffs(values: tuple[int, ...]) -> list[int]:
        return [b - a for a, b in zip(values, values[1:])]

    span = (hours[-1] - hours[0]) * 3600 + (minutes[-1] - minutes[0]) * 60 + seconds[-1] - seconds[0]
    gaps = [86400 - span]
    gaps += diffs(seconds)
    gaps += [60 * d - (seconds[-1] - seconds[0]) for d in diffs(minutes)]
    gaps += [3600 * d - 60 * (minutes[-1] - minutes[0]) - (seconds[-1] - seconds[0])
             for d in diffs(hours)]
    return min(gaps)


def _inner_times(plan: Plan) -> list[int]:
    if plan.freq == "HOURLY":
        return sorted(60 * m + s for m in plan.minutes for s in plan.seconds)
    return sorted(plan.seconds) if plan.freq == "MINUTELY" else [0]


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds % 3600 == 0 and seconds >= 3600:
        n, unit = seconds // 3600, "hour"
    elif seconds % 60 == 0 and seconds >= 60:
        n, unit = seconds // 60, "minute"
    else:
        n, unit = seconds, "second"
    return f"{n} {unit}{'s' if n != 1 else ''}"


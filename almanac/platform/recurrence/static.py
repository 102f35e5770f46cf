"""Static checks: reasons a rule can never fire, found without searching.

They give the person a precise reason for the common impossible rules
(Feb 30, a 6th Monday, BYSETPOS past the set, an INTERVAL whose steps
never land on the BY values); the expansion also skips rules they reject,
so no search is spent on them.
"""

from __future__ import annotations

import math

from .engine import Plan
from .model import UNIT_SECONDS, WEEKDAYS, Rule

_MONTH_NAMES = ("January February March April May June July August September "
                "October November December").split()
_DAY_NAMES = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_MAX_LEN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


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
    if plan.freq in UNIT_SECONDS:
        size = _expansion_size(plan)
    else:
        size = _max_days_per_period(plan) * len(plan.hours) * len(plan.minutes) * len(plan.seconds)
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
    nths = len(f.nth)  # a numbered weekday (1MO, -1FR) happens at most once in its month or year
    if plan.freq == "YEARLY" and f.months:
        per_weekday = min(53, 5 * len(f.months))
        if not f.nth_in_year:  # with BYMONTH it is numbered within each month (RFC 5545)
            nths *= len(f.months)
    if f.plain or f.nth:
        cap = min(cap, per_weekday * len(f.plain) + nths)
    if f.monthdays and plan.freq in ("MONTHLY", "DAILY"):
        cap = min(cap, len(f.monthdays))
    if f.monthdays and plan.freq == "YEARLY":
        cap = min(cap, len(f.monthdays) * len(f.months or range(12)))
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

"""Never-fires and too-frequent checks: static analysis, then a bounded search.

The static checks give the person a precise reason for the common
impossible rules (Feb 30, a 6th Monday, BYSETPOS past the set, an INTERVAL
whose steps never land on the BY values). Whatever they cannot decide, the
bounded search in `expand.py` decides: it looks one full period of the rule
(400 Gregorian years combined with the INTERVAL, never past year 9999)
beyond the start, so finding nothing there proves the rule never fires.
"""

from __future__ import annotations

from datetime import datetime, timezone

from almanac.errors import NeverFires, TooFrequent

from .engine import Plan, compile_plan
from .model import UNIT_SECONDS, Recurrence
from .occurrences import occurrences, to_instant
from .static import static_reason
from .zones import get_zone
_GAP_LOOK = 400  # occurrences inspected for the shortest gap


# ---------------------------------------------------------------- never fires


def ensure_fires(rec: Recurrence, now: datetime) -> None:
    """NeverFires, with the reason, unless something fires at or after `now`."""
    plans = [compile_plan(r, rec.start_wall) for r in rec.rules]
    reasons = [static_reason(r, p) for r, p in zip(rec.rules, plans)]
    future_dates = [d for d in rec.rdates if d >= now]
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
        seconds = (b.astimezone(timezone.utc) - a.astimezone(timezone.utc)).total_seconds()  # not by wall
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


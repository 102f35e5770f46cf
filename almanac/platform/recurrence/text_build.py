"""Turning what the English grammar read (`Draft`) into rules: "twice a
day", "except", time ranges as the times of their grid, and one rule per
group of hours that share their minutes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .model import Rule, freq_rank
from .parse_rrule import format_rule, parse_rule
from .zones import get_zone


class Refusal(Exception):
    """Words the grammar cannot read: chunk[start:end]."""

    def __init__(self, message: str, start: int, end: int) -> None:
        super().__init__(message)
        self.message, self.start, self.end = message, start, end


@dataclass
class Draft:
    freq: str | None = None
    interval: int = 1
    parts: dict[str, object] = field(default_factory=dict)
    times: list[tuple[int, int, int]] = field(default_factory=list)
    span: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
    per_period: int | None = None
    not_days: set[int] = field(default_factory=set)
    not_months: set[int] = field(default_factory=set)
    sub_unit: str | None = None  # "minute" when "every 1.5 hours" became 90 minutes
    policy: str | None = None  # a business-day head: "skip", or "before"/"after" for the last/first


def finish(d: Draft, chunk: str) -> tuple[list[Rule], dict[str, int]]:
    _apply_per_period(d, chunk)
    _apply_excepts(d)
    base = Rule(d.freq or "DAILY", interval=d.interval)
    base = replace(base, **{k: _sorted(v) for k, v in d.parts.items()})  # type: ignore[arg-type]
    if d.span is not None:
        return [_checked(r) for r in _span_rules(base, d, chunk)], {}
    if d.times and base.freq in ("HOURLY", "MINUTELY", "SECONDLY"):
        raise Refusal("A time of day does not go with 'every hour' or 'every N minutes'; use "
                      "'from 9am to 5pm' or 'starting at 9am'.", 0, len(chunk))
    align: dict[str, int] = {}
    unit = {"MINUTELY": ("minute", 60), "HOURLY": ("hour", 24)}.get(base.freq)
    if unit and 1 < base.interval and unit[1] % base.interval == 0 and not d.times:
        align[unit[0]] = base.interval
    elif base.freq in ("HOURLY", "MINUTELY", "SECONDLY") and 1 < base.interval:
        align["day"] = 1  # "every 1.5 hours", "every 7 hours": counted from midnight, not the typing
    return [_checked(with_defaults(r)) for r in with_times(base, d.times)], align


def with_defaults(rule: Rule) -> Rule:
    """What English leaves unsaid, fixed rather than taken from the moment it was typed: no time of
    day is 00:00 (a sub-daily rule starts on the hour or minute), no day of the month is the 1st,
    a week with no weekday is Monday, a year with no date is January 1st."""
    rank = freq_rank(rule.freq)
    out: dict[str, object] = {}
    if rank <= freq_rank("DAILY") and not rule.byhour:
        out["byhour"] = (0,)
    if rank <= freq_rank("HOURLY") and not rule.byminute:
        out["byminute"] = (0,)
    if rank <= freq_rank("MINUTELY") and not rule.bysecond:
        out["bysecond"] = (0,)
    days_named = rule.byday or rule.bymonthday or rule.byyearday or rule.byweekno
    if rule.freq == "WEEKLY" and not days_named:
        out["byday"] = ((0, 0),)
    if rule.freq == "MONTHLY" and not days_named:
        out["bymonthday"] = (1,)
    if rule.freq == "YEARLY" and not days_named:
        out["bymonthday"] = (1,)
        if not rule.bymonth:
            out["bymonth"] = (1,)
    return replace(rule, **out)  # type: ignore[arg-type]


def _apply_per_period(d: Draft, chunk: str) -> None:
    n = d.per_period
    if n is None:
        return
    if d.times:
        if len(set(d.times)) != n:
            raise Refusal(f"{n} times a day, but {len(set(d.times))} times are given.", 0,
                          len(chunk))
        d.freq = "DAILY"
        return
    size, unit = (60, "MINUTELY") if d.freq == "HOURLY" else (24, "HOURLY")
    if size % n:
        raise Refusal(f"{n} times cannot be spread evenly; give the times.", 0, len(chunk))
    d.freq, d.interval = unit, size // n


def _apply_excepts(d: Draft) -> None:
    if d.not_days:
        days = d.parts.get("byday") or tuple((0, i) for i in range(7))
        # parts' values are typed object (they are mixed); byday is always a tuple of (ordinal, day)
        d.parts["byday"] = tuple(p for p in days if p[1] not in d.not_days)  # type: ignore[attr-defined]
        if d.freq is None:
            d.freq = "DAILY"
    if d.not_months:
        months = d.parts.get("bymonth") or tuple(range(1, 13))
        # bymonth is always a tuple of month numbers
        d.parts["bymonth"] = tuple(m for m in months if m not in d.not_months)  # type: ignore[attr-defined]
    for key in ("byday", "bymonth"):
        if key in d.parts and not d.parts[key]:
            raise Refusal("Nothing is left after 'except'.", 0, 0)


def _span_rules(base: Rule, d: Draft, chunk: str) -> list[Rule]:
    """"every 15 minutes from 9am to 5pm": the times of the grid within the span."""
    step = {"HOURLY": 3600, "MINUTELY": 60, "SECONDLY": 1}.get(base.freq)
    if step is None or d.times:
        raise Refusal("A time range needs 'every hour' or 'every N minutes' before it.",
                      0, len(chunk))
    (h0, m0, s0), (h1, m1, s1) = d.span  # type: ignore[misc]
    start, end = h0 * 3600 + m0 * 60 + s0, h1 * 3600 + m1 * 60 + s1
    times = [(t // 3600, t // 60 % 60, t % 60) for t in range(start, end + 1, step * base.interval)]
    days = "DAILY"
    if any(n for n, _ in base.byday) or base.bysetpos:
        days = "MONTHLY"
    if base.byweekno or base.byyearday:
        days = "YEARLY"
    return with_times(replace(base, freq=days, interval=1), times)


def _sorted(value: object) -> object:
    return tuple(sorted(set(value))) if isinstance(value, tuple) else value


def with_times(rule: Rule, times: list[tuple[int, int, int]]) -> list[Rule]:
    """Rules whose union is exactly `times` on the rule's days: hours with the
    same minutes and seconds share one rule (9:00-16:45 every 15 minutes and
    17:00 are two rules, not 33)."""
    if not times:
        return [rule]
    by_hour: dict[int, set[tuple[int, int]]] = {}
    for h, m, s in set(times):
        by_hour.setdefault(h, set()).add((m, s))
    groups: dict[frozenset[tuple[int, int]], list[int]] = {}
    for h, clocks in sorted(by_hour.items()):
        groups.setdefault(frozenset(clocks), []).append(h)
    out = []
    for shared, hours in groups.items():
        minutes = sorted({m for m, _ in shared})
        seconds = sorted({s for _, s in shared})
        if len(shared) == len(minutes) * len(seconds):
            out.append(replace(rule, byhour=tuple(hours), byminute=tuple(minutes),
                               bysecond=tuple(seconds)))
        else:
            out += [replace(rule, byhour=tuple(hours), byminute=(m,), bysecond=(s,))
                    for m, s in sorted(shared)]
    return sorted(out, key=lambda r: (r.byhour, r.byminute, r.bysecond))


def _checked(rule: Rule) -> Rule:
    """Run the rule through the RFC 5545 reader for its range and combination checks."""
    text = format_rule(replace(rule, until=None), get_zone("UTC"))
    checked = parse_rule(text, 0, "UTC")
    return replace(checked, until=rule.until)

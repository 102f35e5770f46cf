"""cron expressions (5 fields, or 6 with seconds first, and the @ forms) as RRULEs.

Mapping: FREQ is the finest time field left as `*` (SECONDLY, MINUTELY,
HOURLY); when every time field is pinned, FREQ comes from the day fields
(DAILY, WEEKLY with BYDAY, MONTHLY with BYMONTHDAY, BYMONTH as a limit).
Pinned fields become BY lists. `*/n` on the finest field, when n divides
its range, becomes INTERVAL=n with DTSTART on a multiple of n, so
`*/15 * * * *` reads "every 15 minutes". When both day-of-month and
day-of-week are restricted, cron fires on a day matching either: that is
two rules (RFC 5545 allows several RRULE lines; their union is the set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .model import Rule
from .parse_rrule import fail

_ALIASES = {
    "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_DOWS = "SUN MON TUE WED THU FRI SAT".split()
_FIELD = re.compile(r"^[0-9A-Za-z*?/,#L-]+$")
# name, low, high, base (values repeat every `base`)
_SPECS = {
    "second": (0, 59), "minute": (0, 59), "hour": (0, 23),
    "day of month": (1, 31), "month": (1, 12), "day of week": (0, 7),
}


@dataclass
class Field:
    name: str
    star: bool          # `*` or `?` or `*/n`: unrestricted for cron's day OR rule
    values: tuple[int, ...]
    step: int | None    # n of a plain `*/n`
    last: bool = False  # `L` in day of month
    nth: tuple[tuple[int, int], ...] = ()  # `FRI#3`, `5L` in day of week


def looks_like_cron(text: str) -> bool:
    text = text.strip()
    if text.lower() in _ALIASES:
        return True
    parts = text.split()
    return len(parts) in (5, 6) and all(_FIELD.match(p) for p in parts) and any(
        c.isdigit() or c == "*" for c in parts[0]
    )


def parse_cron(text: str) -> tuple[list[Rule], dict[str, int]]:
    """Rules for `text`, and how to round DTSTART ({"minute": 15} etc.)."""
    stripped = text.strip()
    lead = len(text) - len(text.lstrip())
    if stripped.startswith("@"):
        if stripped.lower() not in _ALIASES:
            raise fail(f"Unknown cron shortcut {stripped!r}.", lead)
        return parse_cron(_ALIASES[stripped.lower()])
    fields = _split(text)
    if len(fields) not in (5, 6):
        raise fail(f"A cron expression has 5 or 6 fields, not {len(fields)}.", lead)
    names = list(_SPECS) if len(fields) == 6 else list(_SPECS)[1:]
    parsed = {n: _field(n, tok, pos) for n, (tok, pos) in zip(names, fields)}
    if "second" not in parsed:
        parsed["second"] = Field("second", False, (0,), None)
    return _to_rules(parsed)


def _split(text: str) -> list[tuple[str, int]]:
    return [(m.group(0), m.start()) for m in re.finditer(r"\S+", text)]


def _field(name: str, token: str, pos: int) -> Field:
    low, high = _SPECS[name]
    token_u = token.upper()
    if token_u in ("*", "?"):
        return Field(name, True, tuple(range(low, high + 1)), None)
    if name == "day of month" and token_u == "L":
        return Field(name, False, (), None, last=True)
    if name == "day of week" and ("#" in token_u or token_u.endswith("L")):
        return _nth_weekday(token_u, pos)
    values: set[int] = set()
    at = pos
    for item in token_u.split(","):
        values |= _item(name, item, at, low, high)
        at += len(item) + 1
    if name == "day of week":
        values = {v % 7 for v in values}
    m = re.fullmatch(r"\*/(\d+)", token_u)
    return Field(name, token_u.startswith("*"), tuple(sorted(values)), int(m.group(1)) if m else None)


def _item(name: str, item: str, pos: int, low: int, high: int) -> set[int]:
    rng, _, step_s = item.partition("/")
    step = 1
    if step_s:
        if not step_s.isdigit() or int(step_s) == 0:
            raise fail(f"The step in {item!r} ({name}) must be a positive number.", pos)
        step = int(step_s)
    if rng == "*":
        a, b = low, high
    elif "-" in rng:
        a_s, b_s = rng.split("-", 1)
        a, b = _value(name, a_s, pos, low, high), _value(name, b_s, pos, low, high)
    else:
        a = _value(name, rng, pos, low, high)
        b = high if step_s else a
    if a > b:
        if name != "day of week":
            raise fail(f"The range {item!r} ({name}) runs backwards.", pos)
        return {v % 7 for v in range(a, b + 8, step)}
    return set(range(a, b + 1, step))


def _value(name: str, text: str, pos: int, low: int, high: int) -> int:
    names = _MONTHS if name == "month" else _DOWS if name == "day of week" else []
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not text.isdigit():
        raise fail(f"{text!r} is not a valid {name} value.", pos)
    value = int(text)
    if not low <= value <= high:
        raise fail(f"{value} is out of range for the {name} field ({low}-{high}).", pos)
    return value


def _nth_weekday(token: str, pos: int) -> Field:
    found = []
    for item in token.split(","):
        m = re.fullmatch(r"([A-Z]{3}|[0-7])(?:#([1-5])|(L))", item)
        if not m:
            raise fail(f"{item!r} is not like FRI#3 or 5L.", pos)
        wd = _value("day of week", m.group(1), pos, 0, 7) % 7
        found.append((int(m.group(2)) if m.group(2) else -1, (wd - 1) % 7))
    return Field("day of week", False, (), None, nth=tuple(found))


def _to_rules(f: dict[str, Field]) -> tuple[list[Rule], dict[str, int]]:
    dom, dow, month = f["day of month"], f["day of week"], f["month"]
    times = {"second": "SECONDLY", "minute": "MINUTELY", "hour": "HOURLY"}
    freq, interval, align = None, 1, {}
    # A numbered weekday needs FREQ=MONTHLY, so then every time field is a list.
    for unit in () if dow.nth else ("second", "minute", "hour"):
        fld = f[unit]
        if fld.star and (fld.step is None or fld.step == 1):
            freq = times[unit]
            break
        if fld.step and (60 if unit != "hour" else 24) % fld.step == 0 and _coarser_star(f, unit):
            freq, interval, align = times[unit], fld.step, {unit: fld.step}
            break
    base = Rule(freq or "DAILY", interval=interval, bymonth=() if month.star else month.values)
    base = _with_times(base, f, freq, bool(dow.nth))
    day_rules = _day_rules(base, dom, dow, freq is None)
    return day_rules, align


def _coarser_star(f: dict[str, Field], unit: str) -> bool:
    order = ["second", "minute", "hour"]
    return all(f[u].star and f[u].step is None for u in order[order.index(unit) + 1:])


def _with_times(rule: Rule, f: dict[str, Field], freq: str | None, every: bool) -> Rule:
    out = {}
    for unit, key in (("hour", "byhour"), ("minute", "byminute"), ("second", "bysecond")):
        fld = f[unit]
        if every:
            out[key] = fld.values
            continue
        if fld.star and (fld.step is None or freq is not None and _grid_unit(freq) == unit):
            continue
        out[key] = fld.values
    return replace(rule, **out)


def _grid_unit(freq: str) -> str:
    return {"SECONDLY": "second", "MINUTELY": "minute", "HOURLY": "hour"}[freq]


def _day_rules(base: Rule, dom: Field, dow: Field, pinned: bool) -> list[Rule]:
    days = tuple((n, wd) for n, wd in dow.nth) or tuple((0, (v - 1) % 7) for v in dow.values)
    monthdays = (-1,) if dom.last else dom.values
    by_dom = replace(base, bymonthday=monthdays, freq="MONTHLY" if pinned else base.freq)
    if dow.nth:
        by_dow = replace(base, byday=days, freq="MONTHLY")
    else:
        by_dow = replace(base, byday=days, freq="WEEKLY" if pinned else base.freq)
    if dom.star and dow.star:
        return [base]
    if dom.star:
        return [by_dow]
    if dow.star:
        return [by_dom]
    return [by_dom, by_dow]

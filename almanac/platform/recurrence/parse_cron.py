"""cron expressions (5 fields, or 6 with seconds first, and the @ forms) as RRULEs.

Semantics are croniter's (checked differentially in the tests): ranges,
lists, steps in every field (`*/n`, `a-b/n`, `a/n` = a to the field's end),
ranges that wrap (`22-2` hours, `FRI-MON`), names, `?` as `*`, 0 and 7 both
Sunday, and the day rule: when both day fields are restricted (anything but
`*` or `?`), a day matching either fires. Extensions: `L` in the day of
month (the last day) and `DOW#n` / `LDOW` (the n-th / last weekday of the
month) are supported with croniter's dates; `W`, `LW`, `nL`, `L` as a day
of week, hashed `H` fields and a seventh (year) field are refused, naming
the token and where it starts.

Mapping: FREQ is the finest time field that takes every value (SECONDLY,
MINUTELY, HOURLY); when none does, FREQ comes from the day fields (DAILY,
WEEKLY with BYDAY, MONTHLY with BYMONTHDAY, BYMONTH as a limit). Every
other field becomes a BY list. A plain `*/n` on the finest field, when n
divides its range and the coarser time fields are `*`, becomes INTERVAL=n
with DTSTART on a multiple of n (`align`), so `*/15 * * * *` reads "every
15 minutes" and still fires at :00, :15, :30, :45 whatever the start. Day
of month OR day of week is two rules (their union is the set).
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
_FIELD = re.compile(r"^[0-9A-Za-z*?/,#()-]+$")
# name: (low, high) of the values written; day of week allows 7 for Sunday
_SPECS = {
    "second": (0, 59), "minute": (0, 59), "hour": (0, 23),
    "day of month": (1, 31), "month": (1, 12), "day of week": (0, 7),
}
_ITEM = re.compile(r"^(\*|[0-9A-Z]+)(?:-([0-9A-Z]+))?(?:/(\d*))?$")


@dataclass
class Field:
    name: str
    star: bool          # `*` or `?`: unrestricted for cron's day OR rule
    values: tuple[int, ...]
    step: int | None    # n of a plain `*/n`
    last: bool = False  # `L` in day of month
    nth: tuple[tuple[int, int], ...] = ()  # `FRI#3`, `L5` in day of week (n, cron weekday)
    raw: str = ""

    @property
    def full(self) -> bool:
        low, high = _SPECS[self.name]
        return len(self.values) == high - low + 1 or (
            self.name == "day of week" and len(self.values) == 7)


def looks_like_cron(text: str) -> bool:
    text = text.strip()
    if text.lower() in _ALIASES:
        return True
    parts = text.split()
    if len(parts) not in (5, 6, 7) or not all(_FIELD.match(p) for p in parts):
        return False
    stars = sum(1 for p in parts if "*" in p or "?" in p)
    return stars >= 2 or all(re.fullmatch(r"[0-9*/,-]+", p) for p in parts[:2])


def parse_cron(text: str) -> tuple[list[Rule], dict[str, int]]:
    """Rules for `text`, and how to round DTSTART ({"minute": 15} etc.)."""
    stripped = text.strip()
    lead = len(text) - len(text.lstrip())
    if stripped.startswith("@"):
        if stripped.lower() not in _ALIASES:
            raise _refuse(f"Unknown cron shortcut {stripped!r}.", stripped, lead)
        return parse_cron(_ALIASES[stripped.lower()])
    fields = _split(text)
    if len(fields) == 7:
        token, pos = fields[6]
        raise _refuse(f"A year field ({token!r}, field 7) is not supported: use 5 or 6 fields.",
                      token, pos)
    if len(fields) not in (5, 6):
        raise fail(f"A cron expression has 5 or 6 fields, not {len(fields)}.", lead)
    names = list(_SPECS) if len(fields) == 6 else list(_SPECS)[1:]
    parsed = {n: replace(_field(n, tok, pos), raw=tok) for n, (tok, pos) in zip(names, fields)}
    if "second" not in parsed:
        parsed["second"] = Field("second", False, (0,), None)
    dom, dow = parsed["day of month"], parsed["day of week"]
    if dow.nth and not dom.star:
        token, pos = fields[len(fields) - 1]
        raise _refuse(f"{token!r} cannot be combined with a day of month ({dom.name} "
                      "must be * or ?).", token, pos)
    return _to_rules(parsed)


def _refuse(message: str, token: str, pos: int):  # -> InvalidRule
    return fail(message, pos, length=len(token), token=token)


def _split(text: str) -> list[tuple[str, int]]:
    return [(m.group(0), m.start()) for m in re.finditer(r"\S+", text)]


def _field(name: str, token: str, pos: int) -> Field:
    token_u = token.upper()
    if token_u in ("*", "?"):
        low, high = _SPECS[name]
        high = 6 if name == "day of week" else high
        return Field(name, True, tuple(range(low, high + 1)), None)
    _unsupported(name, token_u, pos)
    if name == "day of week" and ("#" in token_u or token_u.startswith("L")):
        return _nth_weekday(token_u, pos)
    values: set[int] = set()
    last = False
    at = pos
    for item in token_u.split(","):
        if name == "day of month" and item == "L":
            last = True
        else:
            values |= _item(name, item, at)
        at += len(item) + 1
    if name == "day of week":
        values = {v % 7 for v in values}
    m = re.fullmatch(r"\*/(\d+)", token_u)
    return Field(name, False, tuple(sorted(values)), int(m.group(1)) if m else None, last=last)


def _unsupported(name: str, token: str, pos: int) -> None:
    """Refuse the extensions croniter does not share, naming the token."""
    at = pos
    for item in token.split(","):
        why = None
        bare = re.sub("|".join(_MONTHS + _DOWS), "0", item)  # THU has an H, JUL an L
        if bare.startswith("H"):
            why = "hashed values (H) are not supported"
        elif name == "day of month" and "W" in bare:
            why = "W and LW (nearest weekday) are not supported"
        elif "L" in bare and not (name == "day of month" and item == "L") and not (
                name == "day of week" and re.fullmatch(r"L[0-7]", bare)):
            why = ("only L (last day of the month) and L5 (last Friday) are supported"
                   if name in ("day of month", "day of week") else "L is not allowed here")
        elif "#" in item and name != "day of week":
            why = "# is only allowed in the day of week"
        if why:
            raise _refuse(f"{item!r} in the {name} field: {why}.", item, at)
        at += len(item) + 1


def _item(name: str, item: str, pos: int) -> set[int]:
    low, high = _SPECS[name]
    top = 6 if name == "day of week" else high
    m = _ITEM.match(item)
    if not m:
        raise _refuse(f"{item!r} is not a valid {name} value.", item, pos)
    first, second, step_s = m.groups()
    step = 1
    if step_s is not None:
        if not step_s or int(step_s) == 0:
            raise _refuse(f"The step in {item!r} ({name}) must be a positive number.", item, pos)
        step = int(step_s)
    if first == "*":
        if second is not None:
            raise _refuse(f"{item!r} is not a valid {name} value.", item, pos)
        a, b = low, top
    else:
        a = _value(name, first, pos, item)
        b = _value(name, second, pos, item) if second is not None else (top if step_s else a)
    if a <= b:
        return set(range(a, b + 1, step))
    size = 7 if name == "day of week" else high - low + 1   # a range that wraps around
    return {low + (v - low) % size for v in range(a, b + size + 1, step)}


def _value(name: str, text: str, pos: int, item: str) -> int:
    names = _MONTHS if name == "month" else _DOWS if name == "day of week" else []
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not text.isdigit():
        raise _refuse(f"{text!r} is not a valid {name} value.", item, pos)
    value = int(text)
    low, high = _SPECS[name]
    if not low <= value <= high:
        raise _refuse(f"{value} is out of range for the {name} field ({low}-{high}).", item, pos)
    return value


def _nth_weekday(token: str, pos: int) -> Field:
    found = []
    at = pos
    for item in token.split(","):
        m = re.fullmatch(r"([A-Z]{3}|[0-7])#([1-5])|L([A-Z]{3}|[0-7])", item)
        if not m:
            raise _refuse(f"{item!r}: a numbered weekday is like FRI#3 or L5, and cannot be "
                          "mixed with plain weekdays.", item, at)
        day = m.group(1) or m.group(3)
        wd = _value("day of week", day, at, item) % 7
        found.append((int(m.group(2)) if m.group(2) else -1, (wd - 1) % 7))
        at += len(item) + 1
    return Field("day of week", False, (), None, nth=tuple(found))


def _to_rules(f: dict[str, Field]) -> tuple[list[Rule], dict[str, int]]:
    dom, dow, month = f["day of month"], f["day of week"], f["month"]
    times = {"second": "SECONDLY", "minute": "MINUTELY", "hour": "HOURLY"}
    freq, interval, align, grid = None, 1, {}, None
    # A numbered weekday needs FREQ=MONTHLY, so then every time field is a list.
    for unit in () if dow.nth else ("second", "minute", "hour"):
        fld = f[unit]
        if fld.full:
            freq = times[unit]
            break
        if fld.step and (60 if unit != "hour" else 24) % fld.step == 0 and _coarser_star(f, unit):
            freq, interval, align, grid = times[unit], fld.step, {unit: fld.step}, unit
            break
    base = Rule(freq or "DAILY", interval=interval, bymonth=() if month.full else month.values)
    base = _with_times(base, f, freq, grid, bool(dow.nth))
    return _day_rules(base, dom, dow, freq is None), align


def _coarser_star(f: dict[str, Field], unit: str) -> bool:
    order = ["second", "minute", "hour"]
    return all(f[u].full for u in order[order.index(unit) + 1:])


def _with_times(rule: Rule, f: dict[str, Field], freq: str | None, grid: str | None,
                every: bool) -> Rule:
    out = {}
    for unit, key in (("hour", "byhour"), ("minute", "byminute"), ("second", "bysecond")):
        fld = f[unit]
        if not every and (unit == grid or (fld.full and freq is not None)):
            continue
        out[key] = fld.values
    return replace(rule, **out)


def _day_rules(base: Rule, dom: Field, dow: Field, pinned: bool) -> list[Rule]:
    days = tuple((n, wd) for n, wd in dow.nth) or tuple((0, (v - 1) % 7) for v in dow.values)
    monthdays = tuple(sorted(set(dom.values) | ({-1} if dom.last else set())))
    by_dom = replace(base, bymonthday=monthdays, freq="MONTHLY" if pinned else base.freq)
    if dow.nth:
        by_dow = replace(base, byday=days, freq="MONTHLY")
    else:
        by_dow = replace(base, byday=days, freq="WEEKLY" if pinned else base.freq)
    dom_full, dow_full = dom.full and not dom.last, dow.full and not dow.nth
    # croniter: a day field that takes every value counts as `*` when the
    # other day field's text has a `*` in it (`*/2`), else as a restriction.
    dom_star = dom.star or (dom_full and "*" in dow.raw)
    dow_star = dow.star or (dow_full and "*" in dom.raw)
    if dom_star and dow_star:
        return [base]
    if dom_star:
        return [base if dow_full else by_dow]
    if dow_star:
        return [base if dom_full else by_dom]
    if dom_full or dow_full:  # one side matches every day, so the union does too
        return [base]
    return [by_dom, by_dow]

"""English rules: our own grammar first (it reads every `describe` output and
the common phrasings), then the `recurrent` library for the rest.

`recurrent` alone drops parts it does not know ("the last Friday of every
month at noon" loses the time, "the 3rd last Tuesday" its ordinal), so the
grammar here covers those, and a phrase neither reader fully understands is
refused with the position where reading stopped rather than half-obeyed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Callable

from .model import Rule
from .parse_rrule import fail, parse_rule
from .words import (DAY_NAMES, MONTH_NAMES, ORDINAL_RE, TIME_RE, UNIT_FREQ, WORD_NUMBERS,
                    read_ordinal, read_time, split_list)

_DAY = r"(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)"
_MONTH = r"(?:" + "|".join(MONTH_NAMES) + r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
_LIST = r"(?:{item})(?:(?:,\s*|\s+and\s+|\s*&\s*)(?:{item}))*"
_UNIT = r"(?:year|month|week|day|hour|minute|second)s?"
_NUMS = r"\d+(?:(?:,\s*|\s+and\s+)\d+(?! times))*"
_ADVERBS = {"yearly": "YEARLY", "annually": "YEARLY", "monthly": "MONTHLY", "weekly": "WEEKLY",
            "daily": "DAILY", "hourly": "HOURLY"}


@dataclass
class Draft:
    freq: str | None = None
    interval: int = 1
    parts: dict[str, object] = field(default_factory=dict)
    times: list[tuple[int, int, int]] = field(default_factory=list)


def _day_index(word: str) -> int:
    word = word.rstrip("s") if word.endswith("days") else word
    return next(i for i, d in enumerate(DAY_NAMES) if d.startswith(word[:3]))


def _month_index(word: str) -> int:
    return next(i + 1 for i, m in enumerate(MONTH_NAMES) if m.startswith(word[:3]))


def parse_text(text: str, now_wall: datetime) -> tuple[list[Rule], dict[str, int], datetime | None]:
    """(rules, DTSTART rounding, one-off time) for an English phrase."""
    clean = _normalise(text)
    if clean.startswith("once on "):
        return [], {}, _once(clean[8:], text)
    rules: list[Rule] = []
    align: dict[str, int] = {}
    for chunk in clean.split("; and "):
        found, stop = _grammar(chunk)
        if found is None:
            found = _recurrent(chunk, now_wall)
        if found is None:
            raise fail(f"Cannot understand the rule from {chunk[stop:stop + 30]!r} on.",
                       _position(text, chunk, stop))
        rules += found[0]
        align.update(found[1])
    return rules, align, None


def _normalise(text: str) -> str:
    clean = re.sub(r"\s+", " ", text.strip().lower())
    clean = re.sub(r"\s*\([a-z_]+(?:/[a-z0-9_+-]+)*\)$", "", clean)  # the "(Europe/Berlin)" suffix
    return clean.rstrip(". ")


def _position(text: str, chunk: str, stop: int) -> int:
    at = text.lower().find(chunk[stop:stop + 10].strip())
    return max(at, 0)


def _once(rest: str, text: str) -> datetime:
    m = re.fullmatch(rf"(?:\w+, )?({_MONTH}) (\d{{1,2}}), (\d{{4}}) at ({TIME_RE})", rest)
    clock = read_time(m.group(4)) if m else None
    if not m or clock is None:
        raise fail("Cannot read the date after 'once on'.", 8)
    try:
        return datetime(int(m.group(3)), _month_index(m.group(1)), int(m.group(2)), *clock)
    except ValueError:
        raise fail("That date does not exist.", 8) from None


# ---------------------------------------------------------------- grammar


def _grammar(chunk: str) -> tuple[tuple[list[Rule], dict[str, int]] | None, int]:
    draft = Draft()
    pos = _read_head(chunk, draft)
    if pos is None:
        return None, 0
    while pos < len(chunk):
        for reader in _CLAUSES:
            nxt = reader(chunk, pos, draft)
            if nxt is not None:
                pos = nxt
                break
        else:
            return None, pos
    return _finish(draft, chunk)


def _m(pattern: str, chunk: str, pos: int) -> re.Match[str] | None:
    return re.compile(pattern).match(chunk, pos)


def _read_head(chunk: str, d: Draft) -> int | None:
    if m := _m(r"(?:on )?the (" + _LIST.format(item=ORDINAL_RE + " " + _DAY) + r") of every (?:(\d+|other) )?months?", chunk, 0):
        d.freq, d.interval = "MONTHLY", _count(m.group(2))
        d.parts["byday"] = _nth_days(m.group(1))
        return m.end()
    if m := _m(r"(?:every|each) weekday|weekdays", chunk, 0):
        d.freq, d.parts["byday"] = "WEEKLY", tuple((0, i) for i in range(5))
        return m.end()
    if m := _m(r"(?:every|each|on) (" + _LIST.format(item=_DAY) + r")(?![a-z])", chunk, 0):
        d.freq, d.parts["byday"] = "WEEKLY", tuple((0, _day_index(w)) for w in split_list(m.group(1)))
        return m.end()
    if m := _m(r"(?:every|each) (?:(\d+|other|second|third|fourth|fifth) )?(" + _UNIT + r")(?![a-z])", chunk, 0):
        d.freq, d.interval = UNIT_FREQ[m.group(2).rstrip("s")], _count(m.group(1))
        return m.end()
    if m := _m(r"(yearly|annually|monthly|weekly|daily|hourly)", chunk, 0):
        d.freq = _ADVERBS[m.group(1)]
        return m.end()
    return None


def _count(word: str | None) -> int:
    if not word:
        return 1
    return WORD_NUMBERS[word] if word in WORD_NUMBERS else int(word)


def _nth_days(text: str) -> tuple[tuple[int, int], ...]:
    out = []
    for item in split_list(text):
        m = re.fullmatch(rf"({ORDINAL_RE}) ({_DAY})", item)
        if not m:
            raise fail(f"Cannot read {item!r} as a weekday like 'last Friday'.", 0)
        out.append((read_ordinal(m.group(1)), _day_index(m.group(2))))
    return tuple(out)


def _clause_months(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r" (?:in|of|during) (" + _LIST.format(item=_MONTH) + r")(?![a-z])", chunk, pos)
    if not m:
        return None
    d.parts["bymonth"] = tuple(_month_index(w) for w in split_list(m.group(1)))
    return m.end()


def _clause_date(chunk: str, pos: int, d: Draft) -> int | None:
    """"on February 29", "on December 24 and 31"."""
    m = _m(rf" on ({_MONTH}) ({_NUMS})(?![a-z0-9:])", chunk, pos)
    if not m:
        return None
    d.parts["bymonth"] = (_month_index(m.group(1)),)
    d.parts["bymonthday"] = tuple(int(x) for x in split_list(m.group(2)))
    if d.freq in (None, "YEARLY"):
        d.freq = "YEARLY"
    return m.end()


def _clause_ordinals(chunk: str, pos: int, d: Draft) -> int | None:
    """"on the 1st and last", "on the 100th day of the year", "in the 20th week of the year"."""
    m = _m(r" (on|in) the (" + _LIST.format(item=ORDINAL_RE + r"(?! " + _DAY + ")") + r")(?: (days?|weeks?))?"
           r"(?: of (?:the|each|every) (month|year))?(?![a-z])", chunk, pos)
    if not m:
        return None
    values = tuple(read_ordinal(x) for x in split_list(m.group(2)))
    noun, scope = (m.group(3) or "day").rstrip("s"), m.group(4) or "month"
    key = "byweekno" if noun == "week" else "byyearday" if scope == "year" else "bymonthday"
    d.parts[key] = values
    return m.end()


def _clause_days(chunk: str, pos: int, d: Draft) -> int | None:
    item = rf"(?:weekdays|weekends|(?:the )?{ORDINAL_RE} {_DAY}|{_DAY})"
    m = _m(r" on (" + _LIST.format(item=item) + r")(?: of (?:the|every|each) (month|year))?(?![a-z])", chunk, pos)
    if not m:
        return None
    days: list[tuple[int, int]] = []
    for word in split_list(m.group(1)):
        word = word.removeprefix("the ")
        if word == "weekdays":
            days += [(0, i) for i in range(5)]
        elif word == "weekends":
            days += [(0, 5), (0, 6)]
        elif " " in word:
            days += _nth_days(word)
        else:
            days.append((0, _day_index(word)))
    d.parts["byday"] = tuple(days)
    return m.end()


def _clause_at_times(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r" (?:at|@) (" + _LIST.format(item=TIME_RE) + r")(?![a-z0-9])", chunk, pos)
    if not m:
        return None
    for item in split_list(m.group(1)):
        clock = read_time(item)
        if clock is None:
            raise fail(f"{item!r} is not a time of day.", pos)
        d.times.append(clock)
    return m.end()


def _clause_numbers(chunk: str, pos: int, d: Draft) -> int | None:
    """"at minutes 0 and 30", "during hours 9 and 17", "on seconds 0 and 30",
    and the long form "at hours 9 and 17, minutes 0 and 30, seconds 0"."""
    m = _m(rf"(?:,| and| at| during| on) (hour|minute|second)s? ({_NUMS})(?![0-9])", chunk, pos)
    if not m:
        return None
    values = tuple(sorted({int(x) for x in split_list(m.group(2))}))
    limit = {"hour": 23, "minute": 59, "second": 59}[m.group(1)]
    if any(v > limit for v in values):
        raise fail(f"{m.group(1)} values must be 0..{limit}.", pos)
    d.parts["by" + m.group(1)] = values
    return m.end()


def _clause_setpos(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r",? only the (" + _LIST.format(item=ORDINAL_RE) + r") occurrences? (?:in|of) (?:each|every) " + _UNIT, chunk, pos)
    if not m:
        return None
    d.parts["bysetpos"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))
    return m.end()


def _clause_count(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r",? (?:for )?(\d+) times|, once", chunk, pos)
    if not m:
        return None
    d.parts["count"] = int(m.group(1) or 1)
    return m.end()


def _clause_until(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf",? until ({_MONTH}) (\d{{1,2}}),? (\d{{4}})(?: at ({TIME_RE}))?", chunk, pos)
    if not m:
        return None
    clock = read_time(m.group(4)) if m.group(4) else (23, 59, 59)
    try:
        d.parts["until"] = datetime(int(m.group(3)), _month_index(m.group(1)), int(m.group(2)),
                                    *(clock or (23, 59, 59)))
    except ValueError:
        raise fail("The UNTIL date does not exist.", pos) from None
    return m.end()


def _clause_wkst(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf" \(weeks start on ({_DAY})\)", chunk, pos)
    if not m:
        return None
    d.parts["wkst"] = _day_index(m.group(1))
    return m.end()


_CLAUSES: list[Callable[[str, int, Draft], int | None]] = [
    _clause_date, _clause_months, _clause_days, _clause_ordinals, _clause_at_times,
    _clause_numbers, _clause_setpos, _clause_count, _clause_until, _clause_wkst,
]


def _finish(d: Draft, chunk: str) -> tuple[tuple[list[Rule], dict[str, int]] | None, int]:
    parts = dict(d.parts)
    if d.freq == "DAILY" and "byday" in parts and d.interval == 1:
        pass
    base = Rule(d.freq or "DAILY", interval=d.interval)
    base = replace(base, **{k: _sorted(v) for k, v in parts.items()})  # type: ignore[arg-type]
    align: dict[str, int] = {}
    unit = {"MINUTELY": ("minute", 60), "HOURLY": ("hour", 24)}.get(base.freq)
    if unit and 1 < base.interval and unit[1] % base.interval == 0 and not d.times:
        align[unit[0]] = base.interval
    rules = [_checked(r, chunk) for r in _with_times(base, d.times)]
    return (rules, align), len(chunk)


def _sorted(value: object) -> object:
    return tuple(sorted(set(value))) if isinstance(value, tuple) else value


def _with_times(rule: Rule, times: list[tuple[int, int, int]]) -> list[Rule]:
    """One rule when the times are every hour x minute x second combination,
    else one rule per time (their union is exactly the times given)."""
    if not times:
        return [rule]
    hours, minutes, seconds = (sorted({t[i] for t in times}) for i in range(3))
    if len(set(times)) == len(hours) * len(minutes) * len(seconds):
        return [replace(rule, byhour=tuple(hours), byminute=tuple(minutes), bysecond=tuple(seconds))]
    return [replace(rule, byhour=(h,), byminute=(m,), bysecond=(s,)) for h, m, s in sorted(set(times))]


def _checked(rule: Rule, chunk: str) -> Rule:
    """Run the rule through the RFC 5545 reader for its range and combination checks."""
    from .parse_rrule import format_rule
    from .zones import get_zone

    text = format_rule(replace(rule, until=None), get_zone("UTC"))
    checked = parse_rule(text, 0, "UTC")
    return replace(checked, until=rule.until)


# ---------------------------------------------------------------- recurrent


# recurrent's time grows faster than linearly with the text (0.6 s for 2 KiB),
# and phrases people type are short: longer ones get only our grammar.
_RECURRENT_MAX_CHARS = 100


def _recurrent(chunk: str, now_wall: datetime) -> tuple[list[Rule], dict[str, int]] | None:
    if len(chunk) > _RECURRENT_MAX_CHARS:
        return None
    try:
        from recurrent.event_parser import RecurringEvent

        event = RecurringEvent(now_date=now_wall)
        out = event.parse(chunk)
    except Exception:  # the library raises many kinds on odd input
        return None
    if not event.is_recurring or not isinstance(out, str):
        return None
    line = next((x for x in out.splitlines() if x.startswith("RRULE:")), None)
    if line is None:
        return None
    try:
        rule = parse_rule(line[6:], 0, "UTC")
    except Exception:
        return None
    return [rule], {}

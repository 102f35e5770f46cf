"""The English grammar: a head ("every 2 weeks", "the last Friday of every
month", "twice a day") then clauses, each a row of a table (a pattern and
what it sets). The reader must consume every character of the phrase; the
first words no row reads are refused (`Refusal`, with their span), so nothing
is dropped or guessed. To teach it a phrasing, add a row.

Choices where English is loose (README, "Recurrence: English"): bare numbers
in a list of times are hours on the 24-hour clock ("at 10, 12 and 17");
"between 9 and 5" reads the smaller end as afternoon (9:00 to 17:00); time
ranges include both ends; "every 2 hours starting at 9am" runs from 9:00 to
the end of each day; "twice a day" alone is every 12 hours from midnight;
"biweekly" and "bimonthly" are refused as ambiguous. A business-day head
("every business day", "the last business day of every month") gives weekdays
and the policy a business calendar applies; the calendar itself is read by
`parse_text`, from the end of the phrase.
"""

from __future__ import annotations

import re
from typing import Callable

from .model import Rule
from .text_build import Draft, Refusal, finish
from .words import (DAY, MONTH, ORDINAL_RE, RANGE_TO as _TO, TIME_RE, UNIT_FREQ, WEEKDAY_PAIRS as _WEEKDAYS,
                    WEEKEND_PAIRS as _WEEKEND, WORD_NUMBERS, day_index, month_index, read_days as _days,
                    read_months as _months, read_ordinal, read_time, split_list)

_SEP = r"(?:,\s*|\s+and\s+|,\s+and\s+|\s*&\s*)"
_LIST = r"(?:{item})(?:" + _SEP + r"(?:{item}))*"
_DAY_ITEM = rf"(?:{DAY}{_TO}{DAY}|{DAY})"
_MONTH_ITEM = rf"(?:{MONTH}{_TO}{MONTH}|{MONTH})"
_UNIT = r"(?:year|month|week|day|hour|minute|second)s?"
_NUMS = r"\d+(?:(?:,\s*|\s+and\s+)\d+(?! times))*"
_CLOCK = rf"(?:{TIME_RE}|\d{{1,2}}(?![0-9]| times))"
_COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, **WORD_NUMBERS}
_N = r"(?:\d+(?:\.\d+)?|" + "|".join(_COUNT_WORDS) + ")"
_ADVERBS = {"yearly": ("YEARLY", 1), "annually": ("YEARLY", 1), "monthly": ("MONTHLY", 1),
            "weekly": ("WEEKLY", 1), "daily": ("DAILY", 1), "hourly": ("HOURLY", 1),
            "quarterly": ("MONTHLY", 3), "fortnightly": ("WEEKLY", 2),
            "every fortnight": ("WEEKLY", 2), "every quarter": ("MONTHLY", 3)}
_SMALLER = {"hour": ("minute", 60), "minute": ("second", 60)}


def read_rules(chunk: str) -> tuple[list[Rule], dict[str, int], str | None]:
    """The rules `chunk` says, the DTSTART rounding, and the business-day policy its head
    names ("every business day": skip); or Refusal."""
    d = Draft()
    pos = _lead(chunk, d)
    pos = _head(chunk, pos, d)
    while pos < len(chunk):
        for reader in CLAUSES:
            nxt = reader(chunk, pos, d)
            if nxt is not None:
                pos = nxt
                break
        else:
            raise Refusal(f"Cannot understand {chunk[pos:].strip()[:40]!r}.", pos, len(chunk))
    rules, align = finish(d, chunk)
    return rules, align, d.policy


def _m(pattern: str, chunk: str, pos: int) -> re.Match[str] | None:
    return re.compile(pattern).match(chunk, pos)


def _number(word: str, start: int, end: int) -> int:
    if word in _COUNT_WORDS:
        return _COUNT_WORDS[word]
    if not word.isdigit() or int(word) < 1:
        raise Refusal(f"{word!r} is not a whole number of 1 or more.", start, end)
    return int(word)


# ---------------------------------------------------------------- head


def _lead(chunk: str, d: Draft) -> int:
    """"at 9am every day": times may come first."""
    m = _m(rf"(?:at|@) ({_LIST.format(item=_CLOCK)}) (?=every|each|on|daily|weekdays)", chunk, 0)
    if not m:
        return 0
    d.times += _clocks(m.group(1), m.start(1), m.end(1))
    return m.end() - 1


def _head(chunk: str, pos: int, d: Draft) -> int:
    lead = " ?" if pos else ""
    for pattern, handler in _HEADS:
        m = _m(lead + "(?:" + pattern + r")(?![a-z0-9])", chunk, pos)
        if m:
            handler(m, d)
            return m.end()
    start, end = _unknown_word(chunk, pos)
    raise Refusal("Cannot understand the rule: start like 'every day', 'every 2 weeks on "
                  "Monday' or 'the last Friday of every month'.", start, end)


def _unknown_word(chunk: str, pos: int) -> tuple[int, int]:
    """The word a failed head stumbled on: past 'every'/'the' and a number."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", chunk[pos:])]
    words = [(a + pos, b + pos) for a, b in words]
    i = 0
    if i < len(words) - 1 and chunk[slice(*words[i])] in ("every", "each", "on", "the"):
        i += 1
    qualifier = re.fullmatch(rf"other|{_N}", chunk[slice(*words[i])]) if words else None
    if qualifier and i < len(words) - 1:
        i += 1
    return words[i] if words else (pos, len(chunk))


def _h_nth_weekday(m: re.Match[str], d: Draft) -> None:
    d.freq, d.interval = "MONTHLY", _every(m.group(2))
    d.parts["byday"] = _WEEKDAYS
    d.parts["bysetpos"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))


def _h_once_per(m: re.Match[str], d: Draft) -> None:
    """"once a week": every week, on the defaults (Monday, the 1st, January 1st, 00:00)."""
    d.freq = UNIT_FREQ[m.group(1)]


def _h_day_number(m: re.Match[str], d: Draft) -> None:
    """Outlook's "day 15 of every month"."""
    d.freq, d.interval = "MONTHLY", _every(m.group(2))
    d.parts["bymonthday"] = tuple(int(x) for x in split_list(m.group(1)))


def _h_nth_day(m: re.Match[str], d: Draft) -> None:
    d.freq, d.interval = "MONTHLY", _every(m.group(2))
    d.parts["bymonthday"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))


def _h_nth_list_day(m: re.Match[str], d: Draft) -> None:
    d.freq, d.interval = "MONTHLY", _every(m.group(3))
    wd = day_index(m.group(2))
    d.parts["byday"] = tuple((read_ordinal(x), wd) for x in split_list(m.group(1)))


def _h_nth_days(m: re.Match[str], d: Draft) -> None:
    d.freq, d.interval = "MONTHLY", _every(m.group(2))
    d.parts["byday"] = _days(m.group(1))


def _h_weekdays(m: re.Match[str], d: Draft) -> None:
    d.freq = "WEEKLY"
    d.parts["byday"] = _WEEKEND if "weekend" in m.group(0) else _WEEKDAYS


def _h_business_days(m: re.Match[str], d: Draft) -> None:
    d.freq, d.parts["byday"], d.policy = "WEEKLY", _WEEKDAYS, "skip"


def _h_edge_business_day(m: re.Match[str], d: Draft) -> None:
    """"the last business day of every month": the last weekday, moved back to the business day
    before when the calendar closes it (the first: forward). Exact only at the ends of the month:
    "the 2nd business day" would need the count to skip holidays, which no RRULE can say."""
    which = read_ordinal(m.group(1))
    if which not in (1, -1):
        raise Refusal("Only the first or the last business day of a month can be named; "
                      "say 'the first business day of every month'.", m.start(1), m.end(1))
    d.freq, d.interval = "MONTHLY", _every(m.group(2))
    d.parts["byday"], d.parts["bysetpos"] = _WEEKDAYS, (which,)
    d.policy = "after" if which == 1 else "before"


def _h_days(m: re.Match[str], d: Draft) -> None:
    d.freq, d.parts["byday"] = "WEEKLY", _days(m.group(1))


def _h_nth_week_days(m: re.Match[str], d: Draft) -> None:
    word = re.sub(r"(st|nd|rd|th)$", "", m.group(1)) if m.group(1)[0].isdigit() else m.group(1)
    d.freq, d.interval = "WEEKLY", _every(word)
    d.parts["byday"] = _days(m.group(2))


def _h_times_per(m: re.Match[str], d: Draft) -> None:
    word = m.group(1).removesuffix(" times")
    d.per_period = {"once": 1, "twice": 2}.get(word) or _every(word)
    d.freq = "HOURLY" if "hour" in m.group(2) else "DAILY"


def _h_every(m: re.Match[str], d: Draft) -> None:
    unit = m.group(2).rstrip("s")
    amount = m.group(1) or "1"
    if "." in amount:
        if unit not in _SMALLER or not float(amount) * _SMALLER[unit][1] == int(float(amount) * 60):
            raise Refusal(f"'every {amount} {unit}s' is not a whole number of "
                          "smaller units; say it in minutes or seconds.", m.start(1), m.end(2))
        unit, factor = _SMALLER[unit]
        d.interval = int(float(amount) * factor)
        d.sub_unit = unit
    else:
        amount = re.sub(r"(?<=\d)(st|nd|rd|th)$", "", amount)  # "every 3rd day"
        d.interval = _number(amount, m.start(1), m.end(1)) if m.group(1) else 1
    d.freq = UNIT_FREQ[unit]


def _h_adverb(m: re.Match[str], d: Draft) -> None:
    word = m.group(0).strip()
    if word in ("quarterly", "every quarter"):  # the calendar's quarters, whenever it is typed
        d.freq, d.interval = "YEARLY", 1
        d.parts.setdefault("bymonth", (1, 4, 7, 10))
        return
    d.freq, d.interval = _ADVERBS[word]


def _h_ambiguous(m: re.Match[str], d: Draft) -> None:
    word = m.group(0).strip()
    raise Refusal(f"{word!r} is ambiguous (twice a {word[2:-2]} or every two {word[2:-2]}s?): "
                  "say which.", m.start(0) + (m.group(0) != word), m.end(0))


def _every(word: str | None) -> int:
    if not word:
        return 1
    return _COUNT_WORDS[word] if word in _COUNT_WORDS else int(word)


def _h_nth_day_of_named_months(m: re.Match[str], d: Draft) -> None:
    """"the 15th of January and July": every year, on those days of those months."""
    d.freq = "YEARLY"
    d.parts["bymonthday"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))
    d.parts["bymonth"] = _months(m.group(2))


def _h_nth_weekday_of_named_months(m: re.Match[str], d: Draft) -> None:
    """"the first Monday of January, April, July and October": every year, within those months."""
    d.freq = "YEARLY"
    wd = day_index(m.group(2))
    d.parts["byday"] = tuple((read_ordinal(x), wd) for x in split_list(m.group(1)))
    d.parts["bymonth"] = _months(m.group(3))


_OF_MONTHS = r" of (?:every|each|the) (?:(\d+|other) )?months?"
_OF_NAMED = rf" of ({_LIST.format(item=_MONTH_ITEM)})"
# "the last Friday of every month", and as people type it: without "the", "every last Friday of the month"
_THE = r"(?:on |every |each )?(?:the )?"
_HEADS: list[tuple[str, Callable[[re.Match[str], Draft], None]]] = [
    (rf"{_THE}({ORDINAL_RE}) business days?{_OF_MONTHS}", _h_edge_business_day),
    (r"(?:every|each|on) business days?|business days", _h_business_days),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE)}) weekdays?{_OF_MONTHS}", _h_nth_weekday),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE)})(?: days?)?{_OF_MONTHS}", _h_nth_day),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE + ' ' + DAY)}){_OF_MONTHS}", _h_nth_days),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE)}) ({DAY}){_OF_MONTHS}", _h_nth_list_day),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE)}) ({DAY}){_OF_NAMED}", _h_nth_weekday_of_named_months),
    (rf"{_THE}({_LIST.format(item=ORDINAL_RE)})(?: days?)?{_OF_NAMED}", _h_nth_day_of_named_months),
    (rf"(?:on )?days? ({_NUMS}){_OF_MONTHS}", _h_day_number),
    (r"once (?:a|per) (week|month|year)", _h_once_per),
    (r"(?:every|each|on) (?:weekday|weekend)s?|weekdays|weekends", _h_weekdays),
    (rf"(?:every|each|on) ({_LIST.format(item=_DAY_ITEM)})", _h_days),
    (rf"(?:every|each) (other|second|third|fourth|\d+(?:st|nd|rd|th)?) ({_LIST.format(item=DAY)})",
     _h_nth_week_days),
    (rf"({_LIST.format(item=_DAY_ITEM)})", _h_days),
    (rf"(once|twice|(?:{'|'.join(_COUNT_WORDS)}|\d+) times) "
     r"(a day|daily|per day|an hour|per hour)", _h_times_per),
    (r"bi-?weekly|bi-?monthly", _h_ambiguous),
    (r"every fortnight|every quarter|yearly|annually|monthly|weekly|daily|hourly|quarterly"
     r"|fortnightly", _h_adverb),
    # "every 3rd day" as rrule's "every third day"; "every 2nd week" stays refused (which week?)
    (rf"(?:every|each) (?:({_N}|\d+(?:st|nd|rd|th)(?= days?\b)) )?({_UNIT})", _h_every),
]


# ---------------------------------------------------------------- clauses


def _clocks(text: str, start: int, end: int) -> list[tuple[int, int, int]]:
    """The times of a list that starts at chunk[start]; a bad one is marked."""
    out, cursor = [], 0
    for item in split_list(text):
        cursor = text.find(item, cursor)
        clock = read_time(item)
        if clock is None:
            raise Refusal(f"{item!r} is not a time of day.", start + cursor,
                          start + cursor + len(item))
        out.append(clock)
        cursor += len(item)
    return out


def _c_date(chunk: str, pos: int, d: Draft) -> int | None:
    """"on February 29", "on December 24 and 31", "on the 5th of March"."""
    m = _m(rf" on ({MONTH}) ({_NUMS})(?![a-z0-9:])", chunk, pos)
    if m:
        month, days = m.group(1), m.group(2)
    elif m := _m(rf" on the ({_LIST.format(item=ORDINAL_RE)}) of ({MONTH})(?![a-z])", chunk, pos):
        month, days = m.group(2), m.group(1)
    else:
        return None
    d.parts["bymonth"] = (month_index(month),)
    d.parts["bymonthday"] = tuple(read_ordinal(x) if not x.isdigit() else int(x)
                                  for x in split_list(days))
    if d.freq in (None, "YEARLY"):
        d.freq = "YEARLY"
    return m.end()


def _c_months(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf" (?:in|of|during|from) ({_LIST.format(item=_MONTH_ITEM)})(?![a-z])", chunk, pos)
    if not m:
        return None
    d.parts["bymonth"] = _months(m.group(1))
    return m.end()


def _c_last_weekday(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf" on the ({_LIST.format(item=ORDINAL_RE)}) weekdays?(?: of (?:the|each|every) month)?"
           r"(?![a-z])", chunk, pos)
    if not m:
        return None
    d.parts["byday"] = _WEEKDAYS
    d.parts["bysetpos"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))
    return m.end()


def _c_days(chunk: str, pos: int, d: Draft) -> int | None:
    item = rf"(?:weekdays|weekends|(?:the )?{ORDINAL_RE} {DAY}|{_DAY_ITEM})"
    m = _m(rf" (?:on|every) ({_LIST.format(item=item)})(?: of (?:the|every|each) (month|year))?"
           r"(?![a-z])", chunk, pos)
    if not m:
        return None
    d.parts["byday"] = _days(m.group(1))
    return m.end()


def _c_ordinals(chunk: str, pos: int, d: Draft) -> int | None:
    """"on the 1st and last", "on the 100th day of the year", "in the 20th week of the year"."""
    m = _m(r" (on|in) the (" + _LIST.format(item=ORDINAL_RE + r"(?! " + DAY + ")") +
           r")(?: (days?|weeks?))?(?: of (?:the|each|every) (month|year))?(?![a-z])", chunk, pos)
    if not m:
        return None
    values = tuple(read_ordinal(x) for x in split_list(m.group(2)))
    noun = (m.group(3) or "day").rstrip("s")
    # "every year on the 100th day" counts in the year; "every year on the 5th" is still a month day
    scope = m.group(4) or ("year" if d.freq == "YEARLY" and m.group(3) else "month")
    key = "byweekno" if noun == "week" else "byyearday" if scope == "year" else "bymonthday"
    d.parts[key] = values
    return m.end()


def _c_at_times(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf" (?:at|@) ({_LIST.format(item=_CLOCK)})(?![a-z0-9:])", chunk, pos)
    if not m:
        return None
    d.times += _clocks(m.group(1), m.start(1), m.end(1))
    return m.end()


def _c_span(chunk: str, pos: int, d: Draft) -> int | None:
    """"from 9am to 5pm", "between 9 and 5", "starting at 8:30"."""
    m = _m(rf" (?:from|between) ({_CLOCK}) (?:to|and|until|till|-) ({_CLOCK})(?![a-z0-9:])",
           chunk, pos)
    if m:
        a, b = read_time(m.group(1)), read_time(m.group(2))
        if a is None or b is None:
            raise Refusal("Not a time of day.", pos + 1, m.end())
        bare = re.fullmatch(r"\d{1,2}", m.group(2)) and re.fullmatch(r"\d{1,2}", m.group(1))
        if bare and b < a and b[0] < 12:  # "between 9 and 5": 9:00 to 17:00
            b = (b[0] + 12, b[1], b[2])
        if b < a:
            raise Refusal("The range ends before it starts.", pos + 1, m.end())
        d.span = (a, b)
        return m.end()
    m = _m(rf" starting (?:at|from) ({_CLOCK})(?![a-z0-9:])", chunk, pos)
    if not m:
        return None
    a = read_time(m.group(1))
    if a is None:
        raise Refusal("Not a time of day.", pos + 1, m.end())
    d.span = (a, (23, 59, 59))
    return m.end()


def _c_numbers(chunk: str, pos: int, d: Draft) -> int | None:
    """"at minutes 0 and 30", "during hours 9 and 17", "on seconds 0 and 30"."""
    m = _m(rf"(?:,| and| at| during| on) (hour|minute|second)s? ({_NUMS})(?![0-9])", chunk, pos)
    if not m:
        return None
    values = tuple(sorted({int(x) for x in split_list(m.group(2))}))
    limit = {"hour": 23, "minute": 59, "second": 59}[m.group(1)]
    if any(v > limit for v in values):
        raise Refusal(f"{m.group(1)} values must be 0..{limit}.", pos + 1, m.end())
    d.parts["by" + m.group(1)] = values
    return m.end()


def _c_setpos(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r",? only the (" + _LIST.format(item=ORDINAL_RE) + r") occurrences? (?:in|of) "
           r"(?:each|every) " + _UNIT, chunk, pos)
    if not m:
        return None
    d.parts["bysetpos"] = tuple(read_ordinal(x) for x in split_list(m.group(1)))
    return m.end()


def _c_count(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r",? (?:for )?(\d+) times|, once", chunk, pos)
    if not m:
        return None
    d.parts["count"] = int(m.group(1) or 1)
    return m.end()


def _c_until(chunk: str, pos: int, d: Draft) -> int | None:
    from datetime import datetime

    m = _m(rf",? until ({MONTH}) (\d{{1,2}}),? (\d{{4}})(?: at ({TIME_RE}))?", chunk, pos)
    if not m:
        return None
    clock = read_time(m.group(4)) if m.group(4) else (23, 59, 59)
    try:
        d.parts["until"] = datetime(int(m.group(3)), month_index(m.group(1)), int(m.group(2)),
                                    *(clock or (23, 59, 59)))
    except ValueError:
        raise Refusal("The end date does not exist.", pos + 1, m.end()) from None
    return m.end()


def _c_wkst(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(rf" \(weeks start on ({DAY})\)", chunk, pos)
    if not m:
        return None
    d.parts["wkst"] = day_index(m.group(1))
    return m.end()


def _c_every_day(chunk: str, pos: int, d: Draft) -> int | None:
    """"at 9am every day", "every hour every day": says nothing new."""
    m = _m(r" (?:every day|each day|daily)(?![a-z])", chunk, pos)
    if not m or d.freq not in ("DAILY", "HOURLY", "MINUTELY", "SECONDLY"):
        return None
    return m.end()


def _c_except(chunk: str, pos: int, d: Draft) -> int | None:
    m = _m(r",? (?:except|but not|excluding)(?: on| in| during)?", chunk, pos)
    if not m:
        return None
    days = _m(rf" ({_LIST.format(item=rf'(?:weekdays|weekends|{_DAY_ITEM})')})(?![a-z])",
              chunk, m.end())
    if days:
        d.not_days |= {wd for n, wd in _days(days.group(1))}
        return days.end()
    months = _m(rf" ({_LIST.format(item=_MONTH_ITEM)})(?![a-z])", chunk, m.end())
    if months:
        d.not_months |= set(_months(months.group(1)))
        return months.end()
    if not chunk[m.end():].strip():
        raise Refusal("'except' needs weekdays or months after it.", m.start(), m.end())
    raise Refusal(f"Cannot leave out {chunk[m.end():].strip()[:30]!r}: only weekdays, "
                  "months or, at the end, holidays can follow 'except'.", m.end(), len(chunk))


def _c_day_numbers(chunk: str, pos: int, d: Draft) -> int | None:
    """Google Calendar's "monthly on day 20"."""
    m = _m(rf" on days? ({_NUMS})(?![0-9a-z:])", chunk, pos)
    if not m or d.freq != "MONTHLY":
        return None
    d.parts["bymonthday"] = tuple(int(x) for x in split_list(m.group(1)))
    return m.end()


def _c_weekday_note(chunk: str, pos: int, d: Draft) -> int | None:
    """Google Calendar's "every weekday (Monday to Friday)": says nothing new."""
    m = _m(r" \((?:monday|mon)(?: to |-| - )(?:friday|fri)\)", chunk, pos)
    if not m or d.parts.get("byday") != _WEEKDAYS:
        return None
    return m.end()


def _c_on_the_hour(chunk: str, pos: int, d: Draft) -> int | None:
    """"every hour on the hour": at minute 0."""
    m = _m(r" on the hour(?![a-z])", chunk, pos)
    if not m or d.freq != "HOURLY":
        return None
    d.parts["byminute"], d.parts["bysecond"] = (0,), (0,)
    return m.end()


CLAUSES: list[Callable[[str, int, Draft], int | None]] = [
    _c_on_the_hour, _c_day_numbers, _c_weekday_note, _c_date, _c_months, _c_last_weekday, _c_days, _c_ordinals, _c_at_times, _c_span,
    _c_numbers, _c_setpos, _c_count, _c_until, _c_wkst, _c_every_day, _c_except,
]

"""English words shared by `describe` (writing) and `parse_text` (reading)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Callable

DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august",
               "september", "october", "november", "december")
UNITS = ("year", "month", "week", "day", "hour", "minute", "second")
UNIT_FREQ = dict(zip(UNITS, ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY",
                             "SECONDLY")))
FREQ_UNIT = {v: k for k, v in UNIT_FREQ.items()}
WORD_NUMBERS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "other": 2}


def ordinal(n: int) -> str:
    """1 -> 1st, -1 -> last, -3 -> 3rd last."""
    if n == -1:
        return "last"
    if n < 0:
        return f"{ordinal(-n)} last"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def clock(h: int, m: int, s: int) -> str:
    """9:00 AM, 12:00 PM (noon), 12:00 AM (midnight), 9:00:30 AM."""
    half = "AM" if h < 12 else "PM"
    shown = h % 12 or 12
    secs = f":{s:02d}" if s else ""
    return f"{shown}:{m:02d}{secs} {half}"


def day_name(wd: int) -> str:
    return DAY_NAMES[wd].capitalize()


def month_name(m: int) -> str:
    return MONTH_NAMES[m - 1].capitalize()


def date_text(d: datetime) -> str:
    return f"{month_name(d.month)} {d.day}, {d.year}"


def datetime_text(d: datetime) -> str:
    return f"{date_text(d)} at {clock(d.hour, d.minute, d.second)}"


# ---------------------------------------------------------------- reading

ORDINAL_RE = r"(?:(?:\d+(?:st|nd|rd|th)|first|second|third|fourth|fifth)(?: to)?(?: last)?|last)"
TIME_RE = (r"(?:noon|midnight|\d{1,2}(?::\d{2}){0,2}\s*(?:am|pm|a\.m\.?|p\.m\.?)"
           r"|\d{1,2}:\d{2}(?::\d{2})?)")


def read_ordinal(text: str) -> int:
    text = text.strip().replace(" to last", " last")
    if text == "last":
        return -1
    negative = text.endswith(" last")
    head = text[:-5] if negative else text
    n = WORD_NUMBERS[head] if head in WORD_NUMBERS else int(re.sub(r"\D", "", head))
    return -n if negative else n


def read_time(text: str) -> tuple[int, int, int] | None:
    text = text.strip().replace(".", "")
    if text == "noon":
        return 12, 0, 0
    if text == "midnight":
        return 0, 0, 0
    m = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*(am|pm)?", text)
    if not m:
        return None
    h, mi, s = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)
    if m.group(4):
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if m.group(4) == "pm" else 0)
    if h > 23 or mi > 59 or s > 59:
        return None
    return h, mi, s


DAY = (r"(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?"
       r"|mon|tues?|wed|thu|thur|thurs|fri|sat|sun)")
MONTH = r"(?:" + "|".join(MONTH_NAMES) + r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
RANGE_TO = r"(?:\s*-\s*|\s+to\s+|\s+through\s+|\s+thru\s+|\s+until\s+)"
WEEKDAY_PAIRS = tuple((0, i) for i in range(5))  # BYDAY (ordinal, weekday) pairs, Monday to Friday
WEEKEND_PAIRS = ((0, 5), (0, 6))


def day_index(word: str) -> int:
    word = word.rstrip("s") if word.endswith("days") else word
    return next(i for i, d in enumerate(DAY_NAMES) if d.startswith(word[:3]))


def month_index(word: str) -> int:
    return next(i + 1 for i, m in enumerate(MONTH_NAMES) if m.startswith(word[:3]))


def read_days(text: str) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for item in split_list(text):
        item = item.removeprefix("the ")
        if item in ("weekdays", "weekday"):
            out += WEEKDAY_PAIRS
        elif item in ("weekends", "weekend"):
            out += WEEKEND_PAIRS
        elif m := re.fullmatch(rf"({DAY}){RANGE_TO}({DAY})", item):
            a, b = day_index(m.group(1)), day_index(m.group(2))
            out += [(0, (a + k) % 7) for k in range((b - a) % 7 + 1)]
        elif m := re.fullmatch(rf"({ORDINAL_RE}) ({DAY})", item):
            out.append((read_ordinal(m.group(1)), day_index(m.group(2))))
        else:
            out.append((0, day_index(item)))
    return tuple(sorted(set(out)))


def read_months(text: str) -> tuple[int, ...]:
    out: set[int] = set()
    for item in split_list(text):
        if m := re.fullmatch(rf"({MONTH}){RANGE_TO}({MONTH})", item):
            a, b = month_index(m.group(1)), month_index(m.group(2))
            out |= {(a - 1 + k) % 12 + 1 for k in range((b - a) % 12 + 1)}
        else:
            out.add(month_index(item))
    return tuple(sorted(out))


def split_list(text: str) -> list[str]:
    """'a, b and c' -> ['a', 'b', 'c']."""
    return [p.strip() for p in re.split(r",\s*|\s+and\s+|\s*&\s*", text) if p.strip()]


# What each RRULE part is called in the English a person typed: a refusal of an English rule
# is rewritten into these words, so "BYMONTHDAY cannot be used with FREQ=WEEKLY" reads as
# "A day of the month cannot go with a weekly rule".
PART_WORDS = {
    "BYMONTHDAY": ("a day of the month", "day"), "BYYEARDAY": ("a day of the year", "day"),
    "BYWEEKNO": ("a week number", "week"), "BYDAY": ("a weekday", "weekday"), "BYMONTH": ("a month", "month"),
    "BYHOUR": ("an hour", "hour"), "BYMINUTE": ("a minute", "minute"), "BYSECOND": ("a second", "second"),
    "BYSETPOS": ("a pick such as 'the first' or 'the last'", "position"), "COUNT": ("the number of times", ""),
    "INTERVAL": ("the step ('every N ...')", ""), "UNTIL": ("an end ('until ...')", ""),
}
_OF = {"BYMONTHDAY": " of the month", "BYYEARDAY": " of the year"}
_FREQ_WORDS = {"YEARLY": "a yearly", "MONTHLY": "a monthly", "WEEKLY": "a weekly", "DAILY": "a daily",
               "HOURLY": "an hourly", "MINUTELY": "a minutely", "SECONDLY": "a secondly"}


def _value_words(match: re.Match[str]) -> str:
    key, value = match.group(1), match.group(2)
    noun = PART_WORDS[key][1]
    return f"{noun.capitalize()} {value}{_OF.get(key, '')}" if noun else PART_WORDS[key][0].capitalize()


_RRULE_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_FREQ_UNITS = {"YEARLY": "year", "MONTHLY": "month", "WEEKLY": "week", "DAILY": "day",
               "HOURLY": "hour", "MINUTELY": "minute", "SECONDLY": "second"}


def _steps(m: re.Match[str]) -> str:
    unit = _FREQ_UNITS.get(m.group(1), "period")
    return f"Every {unit}" if m.group(2) == "1" else f"Every {m.group(2)} {unit}s"


def _no_such_day(m: re.Match[str]) -> str:
    day = int(m.group(1))
    which = ordinal(day) if day > 0 else f"{ordinal(-day)} last day"
    return f"{month_name(int(m.group(2)))} has no {which}: it has at most {m.group(3)} days."


# Whole sentences of the RRULE checks, said as a person would; what is left is worded part by part.
_SENTENCES: tuple[tuple[str, Callable[[re.Match[str]], str]], ...] = (
    (r"BYMONTHDAY=(-?\d+) with BYMONTH=(\d+) never happens: \w+ has at most (\d+) days\.",
     _no_such_day),
    (r"BYDAY=(-?\d+)([A-Z]{2})",
     lambda m: f"the {ordinal(int(m.group(1)))} {day_name(_RRULE_DAYS.index(m.group(2)))}"),
    (r"BYSETPOS=(-?\d+) asks for",
     lambda m: f"'only the {ordinal(int(m.group(1)))} occurrence' asks for"),
    (r"With FREQ=(\w+);INTERVAL=(\d+)(?: from DTSTART)?", lambda m: _steps(m) + " from"
     if m.group(0).endswith("DTSTART") else _steps(m)),
    (r"never BYMONTH=([\d,]+)",
     lambda m: "never " + join([month_name(int(x)) for x in m.group(1).split(",")])),
    (r"which BYDAY does not allow", lambda m: "which its weekdays do not allow"),
    (r"that the BY parts allow", lambda m: "that the rule names"),
    (r"ended at UNTIL \(([^)]*)\)", lambda m: f"ended on {m.group(1)}"),
    (r"UNTIL \(([^)]*)\)", lambda m: f"the end ({m.group(1)})"),
    (r" \(COUNT=\d+\)", lambda m: ""),
)


def english_refusal(message: str) -> str:
    """An RRULE-worded refusal in the words of an English rule (a message without RRULE terms is kept)."""
    text = message
    for pattern, words in _SENTENCES:
        text = re.sub(pattern, words, text)
    parts = "|".join(PART_WORDS)
    text = re.sub(rf"\b({parts})=(-?\w+)", _value_words, text)
    text = re.sub(r"with FREQ=(\w+)", lambda m: f"with {_FREQ_WORDS.get(m.group(1), 'this')} rule", text)
    text = re.sub(r"FREQ=(\w+)", lambda m: f"{_FREQ_WORDS.get(m.group(1), 'this')} rule", text)
    text = re.sub(rf"\b({parts})\b", lambda m: PART_WORDS[m.group(1)][0], text)
    text = text.replace("cannot be used with", "cannot go with").replace("..", " to ")
    return text[:1].upper() + text[1:]

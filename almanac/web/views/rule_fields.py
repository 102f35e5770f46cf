"""The rule builder's fields read back from a parsed rule (editing a schedule fills them in).

Pure: a `Recurrence` in, the fields' values (as the form holds them: strings) out, or the
plain reason the fields cannot express it. Whatever the fields build (`RuleForm.rule_text`)
reads back here to the same fields; tests/unit/web/test_rule_fields.py checks that round trip.

`RELEVANT` says which fields mean something for each frequency: the page shows only those,
and `RuleForm` ignores the others, so a hidden field can never change the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time
from typing import Any

from almanac.platform.recurrence import Recurrence, Rule

DAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
ORDINAL_VALUES = (1, 2, 3, 4, -1)
SUB_DAILY = ("HOURLY", "MINUTELY")
RELEVANT: dict[str, frozenset[str]] = {
    "DAILY": frozenset({"interval", "at", "byday"}),
    "WEEKLY": frozenset({"interval", "at", "byday"}),
    "MONTHLY": frozenset({"interval", "at", "monthdays", "ordinal"}),
    "YEARLY": frozenset({"interval", "at"}),  # the day of the year is the start's
    "HOURLY": frozenset({"interval", "byday"}),
    "MINUTELY": frozenset({"interval", "byday"}),
}
_END_OF_DAY = time(23, 59, 59)


@dataclass(frozen=True)
class Fill:
    """The fields' values (keys are `RuleForm` attributes), or why the fields cannot say the rule."""

    values: dict[str, Any] | None
    reason: str | None = None


def _no(reason: str) -> Fill:
    return Fill(None, reason)


def fields_of(rec: Recurrence) -> Fill:
    """The builder's fields for `rec`, when they can express it exactly."""
    if rec.input_kind == "at" or not rec.rules:
        return _no("it runs once, at one date and time; the fields describe repeating rules.")
    if len(rec.rules) > 1:
        return _no("it combines several rules.")
    if rec.rdates or rec.exdates:
        return _no("it adds or leaves out single dates (RDATE/EXDATE).")
    rule, start = rec.rules[0], rec.start_wall
    if rule.freq not in RELEVANT:
        return _no(f"it repeats {rule.freq.lower()}, more often than the fields offer.")
    reason = _unsupported(rule, start)
    if reason:
        return _no(reason)
    relevant = RELEVANT[rule.freq]
    values: dict[str, Any] = {
        "mode": "fields", "timezone": rec.timezone, "start": start.strftime("%Y-%m-%dT%H:%M"),
        "freq": rule.freq, "interval": str(rule.interval), "at": "" if rule.freq in SUB_DAILY else f"{start:%H:%M}",
        "byday": [DAY_CODES[d] for d in rule.plain_days], "monthdays": ", ".join(map(str, sorted(rule.bymonthday, key=_month_order))),
        "ordinal": "", "ordinal_day": "MO", "end": "never", "until": "", "count": "",
    }
    if rule.freq == "YEARLY":
        values["monthdays"] = ""  # BYMONTH/BYMONTHDAY equal to the start's: the start says them
    if rule.nth_days:
        n, day = rule.nth_days[0]
        values["ordinal"], values["ordinal_day"] = str(n), DAY_CODES[day]
    if rule.count is not None:
        values["end"], values["count"] = "count", str(rule.count)
    elif rule.until is not None:
        values["end"], values["until"] = "until", rule.until.date().isoformat()
    if values["byday"] and "byday" not in relevant:
        return _no(f"it names weekdays, which a {rule.freq.lower()} rule in the fields does not.")
    if values["monthdays"] and "monthdays" not in relevant:
        return _no(f"it names days of the month, which a {rule.freq.lower()} rule in the fields does not.")
    return Fill(values)


def _month_order(day: int) -> tuple[bool, int]:
    return day < 0, abs(day)  # 1, 15, -1: as a person lists them


def _unsupported(rule: Rule, start: Any) -> str | None:
    """The first part of the rule the fields have no place for, in words; None when all fit."""
    if start.second:
        return "it starts at a second past the minute; the fields hold hours and minutes."
    if rule.bysetpos:
        return "it picks occurrences by position (BYSETPOS)."
    if rule.byweekno or rule.byyearday:
        return "it names weeks or days of the year."
    if rule.bymonth and not (rule.freq == "YEARLY" and rule.bymonth == (start.month,)):
        return "it names months."
    if rule.freq == "YEARLY" and rule.bymonthday and rule.bymonthday != (start.day,):
        return "it names days of the month in a yearly rule."
    if rule.byhour or rule.byminute or rule.bysecond:
        return "it runs at several times of day; the fields hold one."
    if rule.wkst != 0 and rule.freq == "WEEKLY" and rule.interval > 1:
        return "its weeks start on a day other than Monday."
    if rule.until is not None and rule.until.time() != _END_OF_DAY:
        return "it ends at a time of day; the fields end at the end of a date."
    nth = rule.nth_days
    if nth and (rule.freq != "MONTHLY" or len(nth) > 1 or rule.plain_days or nth[0][0] not in ORDINAL_VALUES):
        return "it names weekdays of the month in a way the fields cannot (one of first … fourth, or last)."
    return None

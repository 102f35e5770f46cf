"""English rules, read by a table-driven grammar we own (`text_grammar.py`).

A phrase is either understood completely or refused: the reader walks the
phrase clause by clause, and the first words no clause reads are refused
with `details.position` and `details.length` marking them in the text the
person typed. Nothing is skipped, guessed or handed to a looser reader, so
"every weekday at 9am except holidays" is refused at "holidays", never run
as "every weekday at 9am".

A phrase may have several parts separated by "; and " (several rules, as
`describe` writes them), "; and also on <dates>" (RDATE) and
"; except on <dates>" (EXDATE); "once on <date>" is a one-off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from almanac.errors import InvalidRule

from .calendars import place_code
from .model import CalendarClause, Rule
from .parse_rrule import fail
from .text_build import Refusal
from .text_grammar import MONTH, read_rules
from .text_hints import with_hint
from .words import MONTH_NAMES, TIME_RE, read_time

_ZONE_SUFFIX = re.compile(r"^\([A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*\)$")
_DATETIME = rf"({MONTH}) (\d{{1,2}}), (\d{{4}}) at ({TIME_RE})( utc)?"


@dataclass
class TextRule:
    """What a phrase said: rules, DTSTART rounding, and extra/excluded dates."""

    rules: list[Rule] = field(default_factory=list)
    align: dict[str, int] = field(default_factory=dict)
    once: datetime | None = None
    rdates: list[datetime] = field(default_factory=list)
    exdates: list[datetime] = field(default_factory=list)
    start: datetime | None = None  # ", starting <date> at <time>": where an INTERVAL counts from
    now_wall: datetime = datetime(1970, 1, 1)  # for "today" and "tomorrow"
    calendar: CalendarClause | None = None


_STARTING = re.compile(rf", starting ((?:{MONTH}) \d{{1,2}}, \d{{4}} at (?:{TIME_RE}))$")


class Phrase:
    """The phrase lower-cased with single spaces, and where each character
    came from in the original text (for positions in refusals)."""

    def __init__(self, text: str) -> None:
        self.text = text
        words = [(m.group(0), m.start()) for m in re.finditer(r"\S+", text)]
        if words and _ZONE_SUFFIX.match(words[-1][0]):
            words.pop()  # the "(Europe/Berlin)" that `describe` appends
        if words and words[-1][0].endswith("."):
            words[-1] = (words[-1][0][:-1], words[-1][1])
        chars: list[str] = []
        self.origin: list[int] = []
        for i, (word, start) in enumerate(words):
            if i:
                chars.append(" ")
                self.origin.append(start - 1)
            chars.extend(word.lower())
            self.origin.extend(range(start, start + len(word)))
        self.clean = "".join(chars)
        self.origin.append(words[-1][1] + len(words[-1][0]) if words else 0)

    def refuse(self, message: str, start: int, end: int) -> InvalidRule:
        """InvalidRule marking clean[start:end] (trimmed) in the original text."""
        while start < end and self.clean[start] == " ":
            start += 1
        while end > start and self.clean[end - 1] == " ":
            end -= 1
        first = self.origin[start]
        last = self.origin[end - 1] + 1 if end > start else first
        return fail(message, first, length=max(last - first, 1))


def parse_text(text: str, now_wall: datetime) -> TextRule:
    """The rules (or one-off) an English phrase describes, or InvalidRule naming the words it
    could not use and, where it finds one, the phrasing it would accept."""
    try:
        return _parse_text(text, now_wall)
    except InvalidRule as err:
        raise with_hint(err, text, lambda candidate: _accepts(candidate, now_wall)) from None


def _accepts(text: str, now_wall: datetime) -> bool:
    try:
        _parse_text(text, now_wall)
    except InvalidRule:
        return False
    return True


def _parse_text(text: str, now_wall: datetime) -> TextRule:
    phrase = Phrase(text)
    out = TextRule(now_wall=now_wall)
    clean, tail = _calendar_tail(phrase)
    at, policies = 0, []
    for index, chunk in enumerate(clean.split("; ")):
        policies.append(_read_chunk(phrase, chunk, at, index == 0, out))
        at += len(chunk) + 2
    if not out.rules and out.once is None:
        raise phrase.refuse("A rule needs more than extra or excluded dates.", 0, len(clean))
    out.calendar = _clause(phrase, tail, [p for p in policies if p], len(phrase.clean))
    return out


# The calendar is said last, for the whole phrase: "... except holidays in Germany",
# "..., or the business day before if it is not a business day in DE-BY".
_CALENDAR_TAIL = re.compile(
    r",? (?:(?:except|but not|excluding)(?: on)? (?:(?:public|bank) )?holidays"
    r"|or (?:on )?the (business day before|previous business day|preceding business day"
    r"|next business day|business day after|following business day)"
    r"(?: if (?:it is|it's|that is|that's) not a business day)?)"
    r"(?: (?:in|of|for) (.+))?$")
_TAIL_CHARS = 200
_PLACE_TAIL = re.compile(r" (?:in|for) (.+)$")
_NAMED = re.compile(r"the \"?([a-z0-9][a-z0-9_.-]{0,63})\"? calendar")
_CALENDAR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass
class _Tail:
    policy: str | None  # None: "except holidays" or a bare place, which leave the head's policy
    name: str | None
    start: int


def _calendar_tail(phrase: Phrase) -> tuple[str, _Tail | None]:
    """The phrase without its calendar words, and what they said."""
    clean = phrase.clean
    near_end = max(0, len(clean) - _TAIL_CHARS)  # the words are at the end: a 4 KiB phrase is not rescanned
    m = _CALENDAR_TAIL.search(clean, near_end)
    if m:
        where = m.group(1) or ""
        policy = "before" if "before" in where or "prev" in where or "preced" in where else \
            "after" if where else "skip"
        name = _calendar_name(phrase, m.start(2), m.end(2)) if m.group(2) else None
        return clean[:m.start()], _Tail(policy, name, m.start())
    m = _PLACE_TAIL.search(clean, near_end)  # "the last business day of every month in Germany"
    if m and "business day" in clean[:m.start()] and place_code(m.group(1)):
        return clean[:m.start()], _Tail(None, place_code(m.group(1)), m.start())
    return clean, None


def _calendar_name(phrase: Phrase, start: int, end: int) -> str:
    """A place as its code ("Bavaria, Germany" -> "DE-BY"), else one of the tenant's calendars
    by name, as typed ("payroll-calendar", 'the "germany" calendar')."""
    words = phrase.clean[start:end]
    named = _NAMED.fullmatch(words)
    code = None if named else place_code(words)
    if code:
        return code
    typed = phrase.text[phrase.origin[start]:phrase.origin[end - 1] + 1]
    if named:
        typed = typed[typed.index(" ") + 1:typed.rindex(" ")].strip('"')
    if not _CALENDAR_NAME.fullmatch(typed):
        raise phrase.refuse(f"{typed[:40]!r} is neither a country or region the holiday library "
                            "knows (e.g. 'Germany', 'Bavaria, Germany', 'DE-BY') nor a calendar "
                            "name.", start, end)
    return typed


def _clause(phrase: Phrase, tail: _Tail | None, heads: list[str],
            end: int) -> CalendarClause | None:
    """The calendar words at the end and a business-day head agree on one policy."""
    if tail is None and not heads:
        return None
    moves = {p for p in heads if p != "skip"}
    if tail is not None and tail.policy in ("before", "after"):
        moves.add(tail.policy)
    if len(moves) > 1:
        start = tail.start if tail else 0
        raise phrase.refuse("A day that is not a business day cannot move both before and "
                            "after: say one.", start, end)
    policy = moves.pop() if moves else "skip"
    return CalendarClause(tail.name if tail else None, policy)  # type: ignore[arg-type]


_RELATIVE_DAY = re.compile(rf"(today|tomorrow)(?: at ({TIME_RE}|\d{{1,2}}))?$")


def _read_chunk(phrase: Phrase, chunk: str, at: int, first: bool, out: TextRule) -> str | None:
    relative = _RELATIVE_DAY.match(chunk) if first else None
    if relative:  # a one-off: "tomorrow at 9" is the date it names, kept as that date
        clock = read_time(relative.group(2)) if relative.group(2) else (0, 0, 0)
        if clock is None:
            raise phrase.refuse("That is not a time of day.", at + relative.start(2), at + len(chunk))
        day = out.now_wall.date() + timedelta(days=relative.group(1) == "tomorrow")
        out.once = datetime.combine(day, datetime.min.time()).replace(hour=clock[0], minute=clock[1], second=clock[2])
        return None
    if first and chunk.startswith("once on "):
        dates = _dates(phrase, chunk[8:], at + 8)
        out.once = dates[0]
        out.rdates += dates[1:]
        return None
    if not first:
        for lead, target in (("and also on ", out.rdates), ("except on ", out.exdates)):
            if chunk.startswith(lead):
                target += _dates(phrase, chunk[len(lead):], at + len(lead))
                return None
        if not chunk.startswith("and "):
            raise phrase.refuse(f"Cannot understand {chunk[:30]!r}.", at, at + len(chunk))
        chunk, at = chunk[4:], at + 4
    starting = _STARTING.search(chunk)
    if starting:
        out.start = _dates(phrase, starting.group(1), at + starting.start(1))[0]
        chunk = chunk[:starting.start()]
    try:
        rules, align, policy = read_rules(chunk)
    except Refusal as refusal:
        raise phrase.refuse(refusal.message, at + refusal.start, at + refusal.end) from None
    except InvalidRule as err:  # a range or combination check of the RRULE reader
        raise phrase.refuse(err.message, at, at + len(chunk)) from None
    out.rules += rules
    out.align.update(align)
    return policy


def _dates(phrase: Phrase, text: str, at: int) -> list[datetime]:
    """"December 1, 2026 at 9:00 AM, December 3, 2026 at 9:00 AM and ..."."""
    found, pos = [], 0
    while True:
        m = re.compile(_DATETIME).match(text, pos)
        clock = read_time(m.group(4)) if m else None
        if m is None or clock is None:
            raise phrase.refuse("Cannot read this date; write it like "
                                "'December 1, 2026 at 9:00 AM'.", at + pos, at + len(text))
        try:
            when = datetime(int(m.group(3)), _month_number(m.group(1)), int(m.group(2)), *clock)
            # "... UTC" names an instant the rule's wall clock cannot (a repeated hour's second pass).
            found.append(when.replace(tzinfo=timezone.utc) if m.group(5) else when)
        except ValueError:
            raise phrase.refuse("That date does not exist.", at + pos, at + m.end()) from None
        pos = m.end()
        if pos == len(text):
            return found
        sep = re.compile(r", | and |, and ").match(text, pos)
        if sep is None:
            raise phrase.refuse("Cannot understand these words.", at + pos, at + len(text))
        pos = sep.end()


def _month_number(word: str) -> int:
    return next(i + 1 for i, m in enumerate(MONTH_NAMES) if m.startswith(word[:3]))

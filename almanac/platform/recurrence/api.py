"""The public functions: parse, load, preview. Pure: `now` is an argument.

DTSTART choice (for cron, English, and an RRULE without its own DTSTART):
the given `start`, or `now` when there is none, truncated to the minute
(when no start is given, rounded down to a multiple of N for "every N
minutes/hours" and `*/N` so those land on :00, :15, ...), is a provisional anchor; DTSTART then becomes the first
occurrence at or after it, and BYHOUR/BYMINUTE/BYSECOND holding one value
move into DTSTART. So "every weekday at 9am", `0 9 * * 1-5` and
`FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0` all become
`DTSTART;TZID=…:<first weekday 09:00>` + `RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR`.
A block with its own DTSTART (and TZID) is kept as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Callable
from zoneinfo import ZoneInfo

from almanac.errors import InvalidRule, NeverFires, ValidationError

from .analysis import ensure_fires, ensure_min_interval
from .business import LINE as CALENDAR_LINE
from .business import Business, describe_with, first_runs
from .static import static_reason
from .engine import PREVIEW_STEPS, SearchTooLong, budget_scope, compile_plan, limited_budget
from .expand import rule_walk
from .model import MAX_INPUT_BYTES, Recurrence, Rule, freq_rank
from .occurrences import Shift, gap_shifts, occurrences, to_instant, to_wall
from .parse_cron import looks_like_cron, parse_cron
from .parse_rrule import fail, format_block, looks_like_rrule, parse_block
from .parse_text import TextRule, parse_text
from .roll import Rolled
from .words import english_refusal
from .zones import get_zone, utc_key

# DTSTART's search gets at most half of the preview's work budget.
_FIRST_STEPS = PREVIEW_STEPS // 2
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


@dataclass(frozen=True)
class Preview:
    input_kind: str
    rrule: str
    description: str
    next: list[datetime]
    # Occurrences in `next` that a DST gap moves ("02:30 does not exist...").
    shifts: list[Shift] = field(default_factory=list)
    # What the business calendar skipped or moved on the way to `next`, and the calendar.
    notes: list[Rolled] = field(default_factory=list)
    business: Business | None = None


def parse(text: str, timezone: str = "UTC", *, start: datetime | None = None,
          now: datetime) -> Recurrence:
    """Any of the four input forms as one canonical Recurrence."""
    if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
        raise fail(f"The rule is longer than {MAX_INPUT_BYTES} bytes.", MAX_INPUT_BYTES)
    if not text.strip():
        raise fail("The rule is empty.", 0)
    zone = get_zone(timezone)
    anchor = to_wall(start if start is not None else now, zone).replace(second=0, microsecond=0)
    if start is not None and start.second:
        anchor = to_wall(start, zone).replace(microsecond=0)
    if looks_like_rrule(text):
        block = parse_block(text, timezone)
        if block.start is not None:
            return _build("rrule", block.tzid or timezone, block.start, block.rules,
                          block.rdates, block.exdates)
        return _settle("rrule", timezone, anchor, block.rules, block.rdates, block.exdates)
    if _ISO.match(text.strip()):
        return _one_off(text.strip(), timezone)
    if looks_like_cron(text):
        rules, align = parse_cron(text)
        # cron times are wall-clock matches whatever the start: the grid of
        # `*/15` is always :00, :15, ..., and DTSTART its first point >= start.
        return _settle("cron", timezone, anchor, rules, grid=_align(anchor, align, False))
    try:
        return _from_english(text, timezone, zone, anchor, start, now)
    except InvalidRule as exc:  # the checks below the English reader speak RRULE
        raise InvalidRule(english_refusal(exc.message), details=exc.details) from None


def _from_english(text: str, timezone: str, zone: ZoneInfo, anchor: datetime, start: datetime | None,
                  now: datetime) -> Recurrence:
    said = parse_text(text, to_wall(now, zone))
    return replace(_english_rules(said, timezone, zone, anchor, start), calendar=said.calendar)


def _english_rules(said: TextRule, timezone: str, zone: ZoneInfo, anchor: datetime,
                   start: datetime | None) -> Recurrence:
    if said.once is not None and said.once.tzinfo is not None:  # "once on ... UTC"
        return _build("text", "UTC", said.once.replace(tzinfo=None), [], [said.once, *said.rdates], said.exdates)
    if said.once is not None:
        return _build("text", timezone, said.once, [], [said.once, *said.rdates], said.exdates)
    grid = _align(anchor, said.align, start is not None)
    if said.start is not None:  # "..., starting <date>": counted from there, fired from there on
        grid, anchor = said.start, max(anchor, said.start)
    elif not said.align:
        grid = _first_match(said.rules, anchor) or grid
    return _settle("text", timezone, anchor, said.rules, said.rdates, said.exdates, grid=grid)


def _align(anchor: datetime, align: dict[str, int], explicit: bool) -> datetime:
    """Round a default start down to the step of "every N minutes" (or to midnight for a step that
    does not divide the hour or day); an explicit start is the person's choice and is kept."""
    if explicit:
        return anchor
    if "day" in align:
        return anchor.replace(hour=0, minute=0, second=0)
    for unit, step in align.items():
        anchor = anchor.replace(**{unit: getattr(anchor, unit) // step * step})
        if unit == "hour":
            anchor = anchor.replace(minute=0)
    return anchor


def _one_off(text: str, timezone: str) -> Recurrence:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        raise fail(f"{text[:40]!r} is not a valid ISO-8601 date-time.", 0) from None
    zone = get_zone(timezone)
    wall = to_wall(when, zone).replace(microsecond=0, fold=0)
    if when.tzinfo is not None and utc_key(to_instant(wall, zone)) != utc_key(when.replace(microsecond=0)):
        # The second pass of a repeated hour has no wall-clock name in the zone: kept in UTC.
        zone, timezone = get_zone("UTC"), "UTC"
        wall = to_wall(when, zone).replace(microsecond=0)
    return _build("at", timezone, wall, [], [wall], [])


def _settle(kind: str, tz: str, anchor: datetime, rules: list[Rule],
            rdates: list[datetime] = (), exdates: list[datetime] = (),  # type: ignore[assignment]
            grid: datetime | None = None) -> Recurrence:
    """Move DTSTART to the first occurrence and fold one-value times into it.

    `grid`, when given, is where an INTERVAL's steps are counted from (it
    is at or before `anchor`); the first occurrence is still >= `anchor`."""
    # BYSETPOS counts within periods, and dateutil's first week starts at
    # DTSTART: moving DTSTART could change which one is picked, so keep it.
    first = None if any(r.bysetpos for r in rules) else _first(rules, anchor, grid or anchor)
    if first is None:
        return _build(kind, tz, grid or anchor, rules, rdates, exdates)
    # Several rules share one DTSTART: folding one rule's times into it would
    # change the others' defaults, so only a single rule is folded.
    folded = [_fold(r, first) for r in rules] if len(rules) == 1 else list(rules)
    return _build(kind, tz, first, folded, rdates, exdates)


def _first_match(rules: list[Rule], anchor: datetime) -> datetime | None:
    """Where an English interval rule starts: its first matching date at or after `anchor`, so that
    "every 2 weeks on Monday" said on a Sunday fires tomorrow, not a week later."""
    if all(r.interval == 1 for r in rules):
        return None
    return _first([replace(r, interval=1) for r in rules], anchor, anchor)


def _first(rules: list[Rule], anchor: datetime, grid: datetime) -> datetime | None:
    found = []
    if any(static_reason(r, compile_plan(r, grid)) for r in rules):
        return None  # ensure_fires will say why; no need to search
    budget = limited_budget(_FIRST_STEPS)
    try:
        for rule in rules:
            walk = rule_walk(rule, compile_plan(rule, grid), anchor, budget)
            found.extend(w for w in [next(walk, None)] if w is not None)
    except SearchTooLong:
        return None
    return min(found) if found else None


def _fold(rule: Rule, first: datetime) -> Rule:
    rank = freq_rank(rule.freq)
    out = {}
    for key, value, finer_rank in (("byhour", first.hour, 4), ("byminute", first.minute, 5),
                                   ("bysecond", first.second, 6)):
        if rank < finer_rank and getattr(rule, key) == (value,) and not rule.bysetpos:
            out[key] = ()
    return replace(rule, **out)


def _build(kind: str, tz: str, start: datetime, rules: list[Rule], rdates: list[datetime],
           exdates: list[datetime]) -> Recurrence:
    zone = get_zone(tz)
    start = start.replace(fold=0)  # the canonical text cannot say fold=1
    rdates_t, exdates_t = _instants(rdates, zone), _instants(exdates, zone)
    canonical = format_block(tz, start, rules, rdates_t, exdates_t)
    return Recurrence(kind, tz, to_instant(start, zone), canonical, tuple(rules),
                      rdates_t, exdates_t, start)


def _instants(dates: list[datetime], zone: ZoneInfo) -> tuple[datetime, ...]:
    """Distinct instants in increasing order; a naive date is a wall-clock time in `zone`."""
    unique = {utc_key(d): d for d in (to_instant(d, zone) if d.tzinfo is None else d for d in dates)}
    return tuple(unique[k] for k in sorted(unique))


def _ensure_fires(rec: Recurrence, after: datetime) -> None:
    """`after`: a start in a DST gap fires later than its wall time says. A rule typed in English
    hears why it never fires in English, not in the RRULE parts it became."""
    try:
        ensure_fires(rec, after)
    except NeverFires as exc:
        if rec.input_kind != "text":
            raise
        raise NeverFires(english_refusal(exc.message), details=exc.details) from None


@lru_cache(maxsize=4096)
def load(canonical: str, input_kind: str = "rrule") -> Recurrence:
    """Re-create a Recurrence from its stored canonical text (cached); a schedule's calendar
    line (`business.LINE`) is not part of the rule and is left out here."""
    block = parse_block(canonical.partition(f"\n{CALENDAR_LINE};")[0], "UTC")
    if block.start is None:
        raise fail("The stored rule has no DTSTART.", 0)
    return _build(input_kind, block.tzid or "UTC", block.start, block.rules,
                  block.rdates, block.exdates)


def preview(text: str, timezone: str, *, start: datetime | None, now: datetime,
            count: int = 10, min_interval_s: int = 60,
            calendar_for: Callable[[Recurrence], Business | None] | None = None) -> Preview:
    """What the rule builder shows: canonical form, description, next dates.

    `calendar_for(rec)` answers the business calendar the rule runs under (the caller knows the
    tenant's calendars; it may raise NeverFires); `next` are then the runs, and `notes` what the
    calendar skipped or moved on the way.
    """
    if not 1 <= count <= 50:
        raise ValidationError("count must be between 1 and 50.", details={"field": "count"})
    with budget_scope(PREVIEW_STEPS):
        rec = parse(text, timezone, start=start, now=now)
        # RDATEs count from `start` too, not from the rules' first occurrence (DTSTART).
        after = now
        if start is not None:
            zone = get_zone(rec.timezone)
            after = max(after, to_instant(to_wall(start, zone), zone))
        _ensure_fires(rec, after)
        ensure_min_interval(rec, now, min_interval_s)
        business = calendar_for(rec) if calendar_for is not None else None
        notes: list[Rolled] = []
        if business is None:
            found = occurrences(rec, after=after, count=count)
        else:
            rolled = first_runs(rec, business, after, count)
            found = [r.when for r in rolled if r.when is not None and r.when >= after]
            notes = [r for r in rolled if r.action != "kept"]
        shifts = gap_shifts(rec, found)
    return Preview(rec.input_kind, rec.canonical, describe_with(rec, business), found, shifts,
                   notes, business)


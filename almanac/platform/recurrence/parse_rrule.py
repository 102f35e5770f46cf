"""RFC 5545 text: one RRULE, or a block of DTSTART/RRULE/RDATE/EXDATE lines.

Errors carry `details["position"]`, the 0-based character offset in the text
the person typed, so a form can point at the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo

from almanac.errors import InvalidRule

from .model import FREQS, WEEKDAYS, Rule
from .zones import get_zone, to_instant, zone_name

# (low, high, zero allowed, negative allowed) for each numeric BY-part.
_RANGES = {
    "BYSECOND": (0, 59, True, False),
    "BYMINUTE": (0, 59, True, False),
    "BYHOUR": (0, 23, True, False),
    "BYMONTHDAY": (1, 31, False, True),
    "BYYEARDAY": (1, 366, False, True),
    "BYWEEKNO": (1, 53, False, True),
    "BYMONTH": (1, 12, False, False),
    "BYSETPOS": (1, 366, False, True),
}
_KNOWN = {"FREQ", "INTERVAL", "COUNT", "UNTIL", "WKST", "BYDAY", *_RANGES}
_DAY_RE = re.compile(r"^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$")
_DT_RE = re.compile(r"^(\d{8})(T(\d{6})(Z?))?$")


def fail(message: str, position: int, **extra: object) -> InvalidRule:
    return InvalidRule(message, details={"position": position, **extra})


@dataclass
class Block:
    """What a block of lines said; `start` is naive wall-clock in `tzid`; RDATEs and EXDATEs are
    instants (aware), each in the zone its line named (its TZID, UTC for a Z, else the block's)."""

    tzid: str | None
    start: datetime | None
    rules: list[Rule]
    rdates: list[datetime]
    exdates: list[datetime]


def looks_like_rrule(text: str) -> bool:
    """RFC 5545 text: a content line, or rule parts in any order (`INTERVAL=4;FREQ=HOURLY`)."""
    head = text.lstrip().upper()
    if head.startswith(("RRULE:", "DTSTART", "RDATE", "EXDATE")):
        return True
    return head.split("=", 1)[0].strip() in _KNOWN and "=" in head


def parse_block(text: str, default_tz: str) -> Block:
    """Parse a bare rule, an `RRULE:` line, or a block of content lines.

    RFC 5545 line folding is undone first (a line break followed by a space
    or tab continues the line); positions then count in the unfolded text.
    Blank lines and whitespace around the block or its lines are ignored.
    """
    block = Block(None, None, [], [], [])
    offset = 0
    utc_until: list[tuple[bool, int]] = []
    for raw in _FOLD.sub("", text).split("\n"):
        line = raw.rstrip("\r")
        start = offset + len(line) - len(line.lstrip())
        offset += len(raw) + 1
        if line.strip():
            _parse_line(line.strip(), start, block, default_tz)
            utc_until += _until_forms(line, start)
    if not block.rules and block.start is None and not block.rdates:
        raise fail("The rule is empty.", 0)
    if block.tzid is not None and block.start is not None:
        for is_utc, pos in utc_until:
            if not is_utc:
                raise fail("With DTSTART;TZID=..., UNTIL must be a UTC time ending in Z "
                           "(RFC 5545 3.3.10), e.g. UNTIL=20261231T230000Z.", pos)
    return block


# A fold is a line break then one space or tab; an indented line that starts
# a property of its own (a block pasted with indentation) is not a fold.
_FOLD = re.compile(r"\r?\n[ \t](?![ \t]*(?:DTSTART|RRULE|RDATE|EXDATE)[;:])", re.IGNORECASE)
_UNTIL = re.compile(r"UNTIL=([0-9TZtz]*)", re.IGNORECASE)


def _until_forms(line: str, start: int) -> list[tuple[bool, int]]:
    """(written in UTC, position) of each UNTIL with a time in a rule line."""
    if line.strip().upper().startswith(("DTSTART", "RDATE", "EXDATE")):
        return []
    found = []
    for m in _UNTIL.finditer(line):
        value = m.group(1).upper()
        if "T" in value:
            found.append((value.endswith("Z"), start - (len(line) - len(line.lstrip())) + m.start()))
    return found


def _parse_line(line: str, pos: int, block: Block, default_tz: str) -> None:
    if ":" not in line and "=" in line:
        block.rules.append(parse_rule(line, pos, block.tzid or default_tz))
        return
    if ":" not in line:
        raise fail(f"Cannot read the line {line[:40]!r}: expected NAME:VALUE.", pos)
    head, value = line.split(":", 1)
    name, *params = head.split(";")
    name = name.upper()
    vpos = pos + len(head) + 1
    if name == "RRULE":
        block.rules.append(parse_rule(value, vpos, block.tzid or default_tz))
    elif name == "DTSTART":
        if block.start is not None:
            raise fail("DTSTART is given twice.", pos)
        tzid = _tzid(params, pos)
        if tzid is not None and value.strip().upper().endswith("Z"):
            raise fail("DTSTART;TZID=... takes a local time, without the Z of UTC "
                       "(RFC 5545 3.3.5).", vpos)
        # A DTSTART in UTC fixes the rule in UTC (RFC 5545 3.3.5), whatever zone the request names.
        block.tzid = tzid or ("UTC" if value.strip().upper().endswith("Z") else block.tzid)
        block.start = parse_datetime(value, vpos, block.tzid or default_tz)
    elif name in ("RDATE", "EXDATE"):
        zone = get_zone(_tzid(params, pos) or block.tzid or default_tz, pos)
        target = block.rdates if name == "RDATE" else block.exdates
        at = vpos
        for item in value.split(","):
            target.append(_instant(item.strip(), at, zone, block.start))
            at += len(item) + 1
    else:
        raise fail(f"Unknown line {name!r}: expected DTSTART, RRULE, RDATE or EXDATE.", pos)


def _tzid(params: list[str], pos: int) -> str | None:
    for param in params:
        key, _, val = param.partition("=")
        if key.upper() == "TZID":
            get_zone(val, pos)
            return val
    return None


def _instant(value: str, pos: int, zone: ZoneInfo, like: datetime | None) -> datetime:
    """An RDATE or EXDATE value as an instant: in UTC when written with Z, else in `zone`."""
    if value.upper().endswith("Z"):
        return parse_datetime(value, pos, "UTC", like).replace(tzinfo=dt_timezone.utc)
    return to_instant(parse_datetime(value, pos, zone.key, like), zone)


def parse_datetime(value: str, pos: int, tz: str, like: datetime | None = None) -> datetime:
    """A DATE or DATE-TIME value as naive wall-clock time in `tz`.

    A UTC value (trailing Z) is converted to the zone's wall clock; a DATE
    takes the time of day of `like` (DTSTART), or midnight.
    """
    m = _DT_RE.match(value.strip().upper())
    if not m:
        raise fail(f"{value[:30]!r} is not a date-time like 20261123T090000.", pos)
    try:
        day = datetime.strptime(m.group(1), "%Y%m%d")
        if m.group(3):
            clock = datetime.strptime(m.group(3), "%H%M%S")
            day = day.replace(hour=clock.hour, minute=clock.minute, second=clock.second)
        elif like is not None:
            day = datetime.combine(day.date(), like.time())
    except ValueError:
        raise fail(f"{value[:30]!r} is not a real date or time.", pos) from None
    if m.group(4):
        zone = get_zone(tz, pos)
        day = day.replace(tzinfo=dt_timezone.utc).astimezone(zone).replace(tzinfo=None)
    return day


def parse_rule(text: str, pos: int, tz: str) -> Rule:
    """Parse `FREQ=...;...` (with `RRULE:` already removed)."""
    if text.upper().startswith("RRULE:"):
        text, pos = text[6:], pos + 6
    parts: dict[str, tuple[str, int]] = {}
    at = pos
    for chunk in text.split(";"):
        if not chunk.strip():
            at += len(chunk) + 1
            continue
        key, eq, val = chunk.partition("=")
        key = key.strip().upper()
        if not eq or key not in _KNOWN:
            raise fail(f"Unknown rule part {chunk.strip()[:30]!r}.", at)
        if key in parts:
            raise fail(f"{key} is given twice.", at, part=key)
        parts[key] = (val.strip(), at + len(key) + 1)
        at += len(chunk) + 1
    return _build_rule(parts, pos, tz)


def _build_rule(parts: dict[str, tuple[str, int]], pos: int, tz: str) -> Rule:
    if "FREQ" not in parts:
        raise fail("The rule needs FREQ, e.g. FREQ=WEEKLY.", pos)
    freq, fpos = parts["FREQ"]
    if freq.upper() not in FREQS:
        raise fail(f"FREQ={freq} is not one of {', '.join(FREQS)}.", fpos)
    if "COUNT" in parts and "UNTIL" in parts:
        raise fail("A rule cannot have both COUNT and UNTIL.", parts["UNTIL"][1] - 6)
    fields: dict[str, object] = {"freq": freq.upper()}
    if "INTERVAL" in parts:
        fields["interval"] = _positive(*parts["INTERVAL"], "INTERVAL")
    if "COUNT" in parts:
        fields["count"] = _positive(*parts["COUNT"], "COUNT")
    if "UNTIL" in parts:
        fields["until"] = parse_datetime(parts["UNTIL"][0], parts["UNTIL"][1], tz)
    if "WKST" in parts:
        val, vpos = parts["WKST"]
        if val.upper() not in WEEKDAYS:
            raise fail(f"WKST={val} is not a weekday (MO..SU).", vpos)
        fields["wkst"] = WEEKDAYS.index(val.upper())
    for key in _RANGES:
        if key in parts:
            fields[key.lower()] = _numbers(*parts[key], key)
    if "BYDAY" in parts:
        fields["byday"] = _weekdays(*parts["BYDAY"])
    rule = Rule(**fields)  # type: ignore[arg-type]
    _check_combinations(rule, parts)
    return rule


def _positive(val: str, vpos: int, key: str) -> int:
    if not re.fullmatch(r"[+-]?\d{1,9}", val):
        raise fail(f"{key}={val[:20]} is not a whole number.", vpos)
    number = int(val)
    if number < 1:
        raise fail(f"{key} must be 1 or more, not {number}.", vpos)
    return number


def _numbers(val: str, vpos: int, key: str) -> tuple[int, ...]:
    low, high, zero, negative = _RANGES[key]
    found: set[int] = set()
    at = vpos
    for item in val.split(","):
        s = item.strip()
        if not re.fullmatch(r"[+-]?\d{1,4}", s):
            raise fail(f"{key} value {s[:20]!r} is not a whole number.", at)
        n = int(s)
        ok = low <= n <= high or (negative and -high <= n <= -low) or (zero and n == 0)
        if not ok:
            span = f"{low}..{high}" + (f" or -{high}..-{low}" if negative else "")
            raise fail(f"{key}={n} is out of range: use {span}.", at)
        found.add(n)
        at += len(item) + 1
    return tuple(sorted(found))


def _weekdays(val: str, vpos: int) -> tuple[tuple[int, int], ...]:
    found: set[tuple[int, int]] = set()
    at = vpos
    for item in val.split(","):
        m = _DAY_RE.match(item.strip().upper())
        if not m:
            raise fail(f"BYDAY value {item.strip()[:20]!r} is not like MO, 1MO or -1FR.", at)
        n = int(m.group(1) or 0)
        if m.group(1) and not 1 <= abs(n) <= 53:
            raise fail(f"BYDAY={item.strip()}: the number must be 1..53 or -53..-1.", at)
        found.add((n, WEEKDAYS.index(m.group(2))))
        at += len(item) + 1
    return tuple(sorted(found))


def _check_combinations(rule: Rule, parts: dict[str, tuple[str, int]]) -> None:
    """The combinations RFC 5545 section 3.3.10 forbids."""

    def where(key: str) -> int:
        return parts[key][1] - len(key) - 1

    if rule.byweekno and rule.freq != "YEARLY":
        raise fail("BYWEEKNO can only be used with FREQ=YEARLY.", where("BYWEEKNO"))
    if rule.byyearday and rule.freq in ("MONTHLY", "WEEKLY", "DAILY"):
        raise fail(f"BYYEARDAY cannot be used with FREQ={rule.freq}.", where("BYYEARDAY"))
    if rule.bymonthday and rule.freq == "WEEKLY":
        raise fail("BYMONTHDAY cannot be used with FREQ=WEEKLY.", where("BYMONTHDAY"))
    if rule.nth_days:
        if rule.freq not in ("MONTHLY", "YEARLY"):
            raise fail(
                f"A numbered weekday such as 1MO needs FREQ=MONTHLY or YEARLY, not {rule.freq}.",
                where("BYDAY"),
            )
        if rule.freq == "YEARLY" and rule.byweekno:
            raise fail("A numbered weekday cannot be combined with BYWEEKNO.", where("BYDAY"))
    if rule.bysetpos and not _has_other_by(rule):
        raise fail("BYSETPOS needs another BYxxx part to pick from.", where("BYSETPOS"))


def _has_other_by(rule: Rule) -> bool:
    return any(
        (rule.bymonth, rule.byweekno, rule.byyearday, rule.bymonthday, rule.byday,
         rule.byhour, rule.byminute, rule.bysecond)
    )


def format_rule(rule: Rule, zone: ZoneInfo) -> str:
    """The canonical `FREQ=...` text: parts in a fixed order, UNTIL in UTC."""
    out = [f"FREQ={rule.freq}"]
    if rule.interval != 1:
        out.append(f"INTERVAL={rule.interval}")
    if rule.count is not None:
        out.append(f"COUNT={rule.count}")
    if rule.until is not None:
        out.append(f"UNTIL={wall_to_utc_text(rule.until, zone)}")
    if rule.wkst != 0:
        out.append(f"WKST={WEEKDAYS[rule.wkst]}")
    for key in ("BYMONTH", "BYWEEKNO", "BYYEARDAY", "BYMONTHDAY"):
        values = getattr(rule, key.lower())
        if values:
            out.append(f"{key}={','.join(map(str, values))}")
    if rule.byday:
        days = sorted(rule.byday, key=lambda p: (p[0] != 0, p[0], p[1]))
        out.append("BYDAY=" + ",".join(f"{n or ''}{WEEKDAYS[wd]}" for n, wd in days))
    for key in ("BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS"):
        values = getattr(rule, key.lower())
        if values:
            out.append(f"{key}={','.join(map(str, values))}")
    return ";".join(out)


def wall_to_utc_text(wall: datetime, zone: ZoneInfo) -> str:
    utc = wall.replace(tzinfo=zone).astimezone(dt_timezone.utc)
    return utc.strftime("%Y%m%dT%H%M%SZ")


def format_block(tzid: str, start: datetime, rules: list[Rule] | tuple[Rule, ...],
                 rdates: tuple[datetime, ...] = (), exdates: tuple[datetime, ...] = ()) -> str:
    """The canonical block; RDATE and EXDATE (aware instants) keep their own zone, one line a zone."""
    zone = get_zone(tzid, 0)
    lines = [f"DTSTART;TZID={tzid}:{start:%Y%m%dT%H%M%S}"]
    lines += [f"RRULE:{format_rule(r, zone)}" for r in rules]
    lines += _date_lines("RDATE", rdates, tzid)
    lines += _date_lines("EXDATE", exdates, tzid)
    return "\n".join(lines)


def _date_lines(name: str, dates: tuple[datetime, ...], tzid: str) -> list[str]:
    """`NAME;TZID=zone:...` for dates of a zone (the block's first), `NAME:...Z` for UTC ones.

    A date in a zone whose wall clock cannot name it (the second pass of a repeated hour) is
    written in UTC, the one form that keeps the instant."""
    by_zone: dict[str, list[str]] = {}
    for when in dates:
        zone = zone_name(when)
        wall = when.replace(tzinfo=None, fold=0)
        if zone != "UTC" and to_instant(wall, get_zone(zone)).astimezone(dt_timezone.utc) != when:
            zone, wall = "UTC", when.astimezone(dt_timezone.utc).replace(tzinfo=None)
        by_zone.setdefault(zone, []).append(f"{wall:%Y%m%dT%H%M%S}")
    order = sorted(by_zone, key=lambda z: (z != tzid, z == "UTC", z))
    return [f"{name}:" + ",".join(v + "Z" for v in by_zone[z]) if z == "UTC"
            else f"{name};TZID={z}:" + ",".join(by_zone[z]) for z in order]


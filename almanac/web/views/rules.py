"""The rule builder: free text or fields, and its live preview partial.

The same `RuleForm` turns the submitted fields into rule text for the preview
and for saving a schedule, so what the preview accepted is exactly what the
save sends to the service (which checks it again: the server refuses too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, Mapping
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.responses import Response

from almanac.errors import AlmanacError, InvalidRule
from almanac.platform import recurrence
from almanac.platform.service import calendar_store
from almanac.tenants.auth import Principal
from almanac.web.views.rule_fields import RELEVANT, fields_of
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db, viewer_zone
from almanac.platform.recurrence.zones import get_zone

# The preview changes nothing, so anyone who can read the page may use it.
router = page_router(read="viewer", write="editor")

FREQUENCIES = [("DAILY", "Daily"), ("WEEKLY", "Weekly"), ("MONTHLY", "Monthly"), ("YEARLY", "Yearly"),
               ("HOURLY", "Hourly"), ("MINUTELY", "Every minute(s)")]
WEEKDAYS = [("MO", "Mon"), ("TU", "Tue"), ("WE", "Wed"), ("TH", "Thu"), ("FR", "Fri"), ("SA", "Sat"), ("SU", "Sun")]
ORDINALS = [("", "—"), ("1", "first"), ("2", "second"), ("3", "third"), ("4", "fourth"), ("-1", "last")]
COMMON_ZONES = ["UTC", "Europe/London", "Europe/Berlin", "Europe/Paris", "America/New_York", "America/Chicago",
                "America/Denver", "America/Los_Angeles", "America/Sao_Paulo", "Asia/Tokyo", "Asia/Kolkata",
                "Asia/Singapore", "Australia/Sydney", "Africa/Johannesburg"]
_DAY_CODES = {code for code, _ in WEEKDAYS}
PREVIEW_COUNT = 10
CALENDAR_POLICIES = [("skip", "Skip it"), ("before", "Run on the business day before"),
                     ("after", "Run on the business day after")]


@dataclass
class RuleForm:
    """What the builder's fields hold, as strings (what the browser sent back, to re-render)."""

    mode: str = "text"  # "text": the Rule field; "fields": built from the fields below
    rule: str = ""
    timezone: str = "UTC"
    start: str = ""
    freq: str = "DAILY"
    interval: str = "1"
    byday: list[str] = field(default_factory=list)
    monthdays: str = ""
    ordinal: str = ""
    ordinal_day: str = "MO"
    at: str = "09:00"
    end: str = "never"  # never | until | count
    until: str = ""
    count: str = ""
    calendar: str = ""  # a business calendar's name; "" for none
    calendar_policy: str = "skip"

    @classmethod
    def from_form(cls, form: Mapping[str, Any], default_tz: str = "UTC") -> "RuleForm":
        def one(name: str, default: str = "") -> str:
            value = form.get(name)
            return str(value).strip() if value is not None else default

        getlist = getattr(form, "getlist", None)
        days = getlist("byday") if getlist else form.get("byday", [])
        return cls(
            mode="fields" if one("mode") == "fields" else "text", rule=one("rule"),
            timezone=one("timezone") or default_tz, start=one("start"), freq=one("freq", "DAILY"),
            interval=one("interval", "1") or "1", byday=[d for d in days if d in _DAY_CODES],
            monthdays=one("monthdays"), ordinal=one("ordinal"), ordinal_day=one("ordinal_day", "MO"),
            at=one("at"), end=one("end", "never"), until=one("until"), count=one("count"),
            calendar=one("calendar")[:64], calendar_policy=one("calendar_policy", "skip") or "skip",
        )

    # -- what the recurrence engine gets -------------------------------------------------

    def rule_text(self) -> str:
        """The rule as text: as typed, or an RRULE built from the fields (InvalidRule says which is wrong)."""
        if self.mode == "text":
            return self.rule
        freq = self.freq if self.freq in dict(FREQUENCIES) else "DAILY"
        parts = [f"FREQ={freq}"]
        interval = _whole(self.interval, "Interval", 1, 1000)
        if interval != 1:
            parts.append(f"INTERVAL={interval}")
        parts += self._days(freq)
        if "at" in RELEVANT[freq] and self.at:
            moment = _time_of_day(self.at)
            parts += [f"BYHOUR={moment.hour}", f"BYMINUTE={moment.minute}"]
        parts += self._end()
        return ";".join(parts)

    def _days(self, freq: str) -> list[str]:
        # Only the fields shown for this frequency count: a hidden one never changes the rule.
        out, relevant = [], RELEVANT[freq]
        if self.ordinal and "ordinal" in relevant:
            if self.ordinal not in dict(ORDINALS) or self.ordinal_day not in _DAY_CODES:
                raise InvalidRule("Choose which weekday of the month (first … last).")
            out.append(f"BYDAY={int(self.ordinal)}{self.ordinal_day}")
        elif self.byday and "byday" in relevant:
            out.append("BYDAY=" + ",".join(self.byday))
        if self.monthdays and "monthdays" in relevant:
            days = [_whole(d, "Month day", -31, 31) for d in self.monthdays.replace(" ", "").split(",") if d]
            if 0 in days:
                raise InvalidRule("Month days run from 1 to 31, or -1 (the last day) to -31.")
            out.append("BYMONTHDAY=" + ",".join(str(d) for d in days))
        return out

    def _end(self) -> list[str]:
        if self.end == "count":
            return [f"COUNT={_whole(self.count, 'Count', 1, 100_000)}"]
        if self.end == "until":
            try:
                last_day = date.fromisoformat(self.until)
            except ValueError:
                raise InvalidRule("Until needs a date such as 2027-01-31.") from None
            # UNTIL is UTC in RFC 5545: the end of that day in the rule's zone, as UTC.
            zone = recurrence_zone(self.timezone)
            end = datetime.combine(last_day, time(23, 59, 59), zone).astimezone(ZoneInfo("UTC"))
            return [f"UNTIL={end:%Y%m%dT%H%M%SZ}"]
        return []

    def start_at(self) -> datetime | None:
        """The start as a wall-clock time in the rule's zone (naive, as the engine expects)."""
        if not self.start:
            return None
        try:
            return datetime.fromisoformat(self.start).replace(tzinfo=None)
        except ValueError:
            raise InvalidRule(f"Start {self.start[:30]!r} is not a date and time.") from None


def recurrence_zone(name: str) -> ZoneInfo:
    return get_zone(name)


def _whole(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InvalidRule(f"{what} must be a whole number; got {text[:20]!r}.") from None
    if not low <= value <= high:
        raise InvalidRule(f"{what} must be between {low} and {high}.")
    return value


def _time_of_day(text: str) -> time:
    try:
        return time.fromisoformat(text)
    except ValueError:
        raise InvalidRule(f"Time of day {text[:20]!r} is not a time such as 09:30.") from None


# -- the preview -------------------------------------------------------------------------


def preview_context(form: RuleForm, principal: Principal, now: datetime, viewer: ZoneInfo,
                    session: Any = None) -> dict[str, Any]:
    """What `_preview.html` shows: the description and next dates, or the reason the rule is refused.
    `session` (the tenant's) finds the business calendar the form names."""
    if form.mode == "text" and not form.rule:
        return {"empty": True}
    try:
        result = recurrence.preview(
            form.rule_text(), form.timezone, start=form.start_at(), now=now, count=PREVIEW_COUNT,
            min_interval_s=principal.min_interval_seconds,
            calendar_for=None if session is None else lambda rec: calendar_store.named(
                session, rec, form.calendar or None, form.calendar_policy if form.calendar else None, now),
        )
    except AlmanacError as refused:
        return {"refusal": refused.message, "code": refused.code, "marked": _marked(form, refused)}
    rule_zone = result.next[0].tzinfo if result.next else ZoneInfo(form.timezone)
    dates = [(when, when.astimezone(viewer), flag) for when, flag in zip(result.next, dst_flags(result, viewer))]
    return {
        "preview": result, "dates": dates, "rule_zone": rule_zone, "viewer": viewer,
        "show_viewer": str(viewer) != str(rule_zone),
        "moved": {r.when: r.describe() for r in result.notes if r.action == "moved"},
        "skipped": [r.describe() for r in result.notes if r.action == "skipped"],
    }


def dst_flags(result: recurrence.Preview, viewer: ZoneInfo) -> list[str]:
    """For each next date, what a DST change does to it ("" when nothing): moved out of a gap,
    or the first date after the rule's zone (or the viewer's) changed its UTC offset."""
    moved = {shift.runs_at: shift.note for shift in result.shifts}
    flags, before = [], None
    for when in result.next:
        offsets = (when.utcoffset(), when.astimezone(viewer).utcoffset())
        notes = [moved[when]] if when in moved else []
        if before is not None and offsets[0] != before[0]:
            notes.append(f"clocks changed: now {_utc(offsets[0])} in {when.tzinfo}")
        elif before is not None and offsets[1] != before[1]:
            notes.append(f"clocks changed in your zone: now {_utc(offsets[1])}")
        flags.append("; ".join(notes))
        before = offsets
    return flags


def _utc(offset: timedelta | None) -> str:
    minutes = int((offset or timedelta(0)).total_seconds() // 60)
    sign, minutes = ("+" if minutes >= 0 else "-"), abs(minutes)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def form_for_rule(rule_text: str, canonical: str, input_kind: str, timezone: str) -> tuple[RuleForm, str]:
    """The builder for editing a stored rule: the rule as typed, the fields filled back from it
    where they can express it, and a sentence saying which (shown above the builder).

    It opens on the fields when they would write back exactly the stored text (it was built
    there); otherwise on the text as typed, with the fields ready beside it. Start shows the
    rule's own start (DTSTART), which the fields need (a yearly rule's day, an interval's phase);
    the preview and the save both use it, and emptying it means "from now"."""
    try:
        rec = recurrence.load(canonical, input_kind)
    except AlmanacError:
        return RuleForm(rule=rule_text, timezone=timezone), "The fields cannot show this rule; edit it as text."
    fill = fields_of(rec)
    start = f"{rec.start_wall:%Y-%m-%dT%H:%M}"
    if fill.values is None:
        return (RuleForm(rule=rule_text, timezone=timezone, start=start),
                f"The fields cannot show this rule: {fill.reason} Edit it as text.")
    form = RuleForm(rule=rule_text, **{**fill.values, "start": start})
    try:
        built = form.rule_text()
    except InvalidRule:  # pragma: no cover - fields_of only fills what the fields accept
        built = ""
    if built == rule_text:
        return form, "The fields show this schedule's rule."
    form.mode = "text"
    return form, ("The fields hold this rule too: choose “Build from fields” to change it there "
                  "(it is then saved as an RRULE).")


def _marked(form: RuleForm, refused: AlmanacError) -> tuple[str, str, str] | None:
    """The typed rule split around the words a refusal marks (position, length)."""
    details = getattr(refused, "details", None) or {}
    position, length = details.get("position"), details.get("length")
    if form.mode != "text" or not isinstance(position, int) or not isinstance(length, int):
        return None
    text = form.rule
    if not 0 <= position < len(text):
        return None
    return text[:position], text[position:position + length], text[position + length:]


@router.get("/rules/preview")
async def rule_preview(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    """The htmx partial behind the builder: it replaces the inside of the Preview region, and
    re-renders the Save button out of band, disabled while the rule is refused (the save refuses too)."""
    form = RuleForm.from_form(request.query_params, default_tz="UTC")
    with tenant_db(services, principal) as session:
        context = preview_context(form, principal, services.clock.now(), viewer_zone(request), session)
    return render(request, "_preview.html", oob=True, **context)


def relevant_for(name: str) -> str:
    """The frequencies for which a field means something, as the page's `data-freqs` lists them."""
    return " ".join(freq for freq, fields in RELEVANT.items() if name in fields)


def builder_context(form: RuleForm, principal: Principal, now: datetime, viewer: ZoneInfo,
                    fill_note: str | None = None, session: Any = None) -> dict[str, Any]:
    """Everything `_rule_builder.html` needs, with the first preview already rendered."""
    stored = [row.name for row in calendar_store.listing(session)] if session is not None else []
    return {
        "rf": form, "frequencies": FREQUENCIES, "weekdays": WEEKDAYS, "ordinals": ORDINALS,
        "zones": COMMON_ZONES, "relevant_for": relevant_for, "fill_note": fill_note,
        "calendars": stored, "places": calendar_store.places(), "policies": CALENDAR_POLICIES,
        **preview_context(form, principal, now, viewer, session),
    }


def default_start(now: datetime, zone: ZoneInfo) -> str:
    """Next whole hour, wall clock, as the datetime-local field wants it."""
    local = (now.astimezone(zone) + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    return local.strftime("%Y-%m-%dT%H:%M")

"""The rule builder's fields read back from a rule: what the fields build reads back to
fields that build the same recurrence, and a rule the fields cannot say is named, not mangled."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from almanac.errors import AlmanacError
from almanac.platform import recurrence
from almanac.web.views.rule_fields import DAY_CODES, RELEVANT, fields_of
from almanac.web.views.rules import RuleForm, form_for_rule

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)
ROUND = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _rec(text: str, tz: str = "Europe/Berlin", start: datetime | None = None) -> recurrence.Recurrence:
    return recurrence.parse(text, tz, start=start, now=NOW)


def _parse_form(form: RuleForm) -> recurrence.Recurrence:
    return _rec(form.rule_text(), form.timezone, form.start_at())


@pytest.mark.parametrize("text, expected", [
    ("every weekday at 9am", {"freq": "WEEKLY", "byday": ["MO", "TU", "WE", "TH", "FR"], "at": "09:00"}),
    ("0 8 * * 1", {"freq": "WEEKLY", "byday": ["MO"], "at": "08:00"}),
    ("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=30", {"freq": "MONTHLY", "ordinal": "-1", "ordinal_day": "FR",
                                                       "at": "17:30"}),
    ("FREQ=MONTHLY;BYMONTHDAY=1,-1;BYHOUR=6;BYMINUTE=0", {"freq": "MONTHLY", "monthdays": "1, -1", "at": "06:00"}),
    ("every 15 minutes", {"freq": "MINUTELY", "interval": "15", "at": ""}),
    ("FREQ=DAILY;INTERVAL=2;COUNT=5;BYHOUR=7;BYMINUTE=15", {"freq": "DAILY", "interval": "2", "end": "count",
                                                          "count": "5", "at": "07:15"}),
], ids=["english-weekdays", "cron-monday", "rrule-last-friday", "rrule-month-days", "every-15-min", "count"])
def test_expressible_rules_fill_the_fields(text, expected):
    fill = fields_of(_rec(text))
    assert fill.reason is None and fill.values is not None
    assert {k: fill.values[k] for k in expected} == expected


@pytest.mark.parametrize("text, words", [
    ("FREQ=DAILY;BYHOUR=9,17;BYMINUTE=0", "several times of day"),
    ("0 9,17 * * *", "several times of day"),
    ("FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0", "position"),
    ("FREQ=YEARLY;BYMONTH=1,7;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0", "months"),
    ("2026-05-01T09:00:00Z", "runs once"),
    ("FREQ=MONTHLY;BYDAY=2MO,4MO;BYHOUR=9;BYMINUTE=0", "weekdays of the month"),
], ids=["two-times", "cron-two-hours", "bysetpos", "two-months", "one-off", "two-nth-days"])
def test_rules_the_fields_cannot_say_are_named(text, words):
    fill = fields_of(_rec(text))
    assert fill.values is None and words in (fill.reason or "")


def test_editing_opens_on_the_fields_only_when_they_wrote_the_text():
    built = "FREQ=WEEKLY;BYDAY=MO,FR;BYHOUR=17;BYMINUTE=30"
    rec = _rec(built)
    form, note = form_for_rule(built, rec.canonical, rec.input_kind, rec.timezone)
    assert form.mode == "fields" and form.byday == ["MO", "FR"] and form.at == "17:30"
    assert "show this schedule's rule" in note
    rec = _rec("every weekday at 9am")
    form, note = form_for_rule("every weekday at 9am", rec.canonical, rec.input_kind, rec.timezone)
    assert form.mode == "text" and form.rule == "every weekday at 9am" and form.freq == "WEEKLY"
    assert "Build from fields" in note
    rec = _rec("0 9,17 * * *")
    form, note = form_for_rule("0 9,17 * * *", rec.canonical, rec.input_kind, rec.timezone)
    assert form.mode == "text" and "cannot show" in note and "several times of day" in note


def test_hidden_fields_never_change_the_rule():
    """A field not shown for the frequency (here weekdays and month days of a yearly rule) is ignored."""
    form = RuleForm(mode="fields", freq="YEARLY", at="09:00", byday=["MO"], monthdays="3", ordinal="1")
    assert form.rule_text() == "FREQ=YEARLY;BYHOUR=9;BYMINUTE=0"


_days = st.lists(st.sampled_from(DAY_CODES), unique=True, max_size=7).map(lambda d: sorted(d, key=DAY_CODES.index))


@st.composite
def forms(draw: st.DrawFn) -> RuleForm:
    freq = draw(st.sampled_from(sorted(RELEVANT)))
    relevant = RELEVANT[freq]
    sub_daily = freq in ("HOURLY", "MINUTELY")
    interval = draw(st.integers(1, 4)) if not sub_daily else draw(st.sampled_from([1, 2, 5, 15, 30]))
    if freq == "MINUTELY" and interval == 1:
        interval = 5  # the test tenant's minimum interval is a minute; keep well clear of it
    form = RuleForm(mode="fields", freq=freq, interval=str(interval),
                    timezone=draw(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"])),
                    start=f"2026-{draw(st.integers(3, 11)):02d}-{draw(st.integers(1, 28)):02d}T"
                          f"{draw(st.integers(0, 23)):02d}:{draw(st.sampled_from([0, 15, 30, 45])):02d}")
    if "at" in relevant and draw(st.booleans()):
        form.at = f"{draw(st.integers(0, 23)):02d}:{draw(st.sampled_from([0, 5, 30])):02d}"
    else:
        form.at = ""
    if "byday" in relevant:
        form.byday = draw(_days)
    if "monthdays" in relevant and draw(st.booleans()):
        form.monthdays = ", ".join(map(str, draw(st.lists(st.sampled_from([1, 2, 15, 28, -1]), unique=True,
                                                                   min_size=1, max_size=3))))
    if "ordinal" in relevant and draw(st.booleans()):
        form.ordinal, form.ordinal_day = draw(st.sampled_from(["1", "2", "3", "4", "-1"])), draw(st.sampled_from(DAY_CODES))
    form.end = draw(st.sampled_from(["never", "count", "until"]))
    form.count = str(draw(st.integers(1, 50)))
    form.until = f"2027-{draw(st.integers(1, 12)):02d}-{draw(st.integers(1, 28)):02d}"
    return form


@ROUND
@given(forms())
def test_round_trip_fields_rule_fields(form):
    """fields -> rule -> fields -> rule: the same recurrence, and the read-back is a fixed point."""
    try:
        first = _parse_form(form)
        recurrence.ensure_fires(first, NOW)
    except AlmanacError:
        return  # e.g. an end before the first date: the builder refuses it on the spot
    fill = fields_of(first)
    assert fill.values is not None, (form, first.canonical, fill.reason)
    again = RuleForm(rule="", **fill.values)
    second = _parse_form(again)
    assert second.canonical == first.canonical, (vars(form), first.canonical, second.canonical)
    assert fields_of(second).values == fill.values
    for name in ("freq", "interval", "byday", "monthdays", "ordinal", "end", "count", "until"):
        if name == "ordinal" and not form.ordinal:
            continue
        wanted = getattr(form, name) if name not in ("count", "until") or form.end == name else ""
        if name == "byday" and "byday" not in RELEVANT[form.freq]:
            wanted = []
        if name == "monthdays" and "monthdays" not in RELEVANT[form.freq]:
            wanted = ""
        if name == "monthdays":
            wanted, got = set(wanted.replace(" ", "").split(",")) - {""}, set(fill.values[name].replace(" ", "").split(",")) - {""}
            assert got == wanted, (form, fill.values)
            continue
        assert fill.values[name] == wanted, (name, form, fill.values)

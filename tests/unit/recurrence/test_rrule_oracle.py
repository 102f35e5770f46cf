"""RRULE against RFC 5545 and python-dateutil: known defects, then a
differential property with DTSTART in zones that have DST.

Our documented policy (README, "Recurrence: DST"): rules are expanded on the
wall clock like dateutil; each wall time then fires at an instant (a time in
a gap moves forward by the gap, a repeated time fires at the first), equal
instants fire once, COUNT counts fired occurrences and UNTIL is an instant.
The oracle below is dateutil's wall times passed through exactly that policy.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from almanac.errors import InvalidRule
from almanac.platform.recurrence import load, occurrences, parse, preview
from almanac.platform.recurrence.engine import budget_scope
from almanac.platform.recurrence.parse_rrule import parse_rule

from .conftest import iso
from .test_properties import rules

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


# ---------------------------------------------------------------- defects


@pytest.mark.parametrize("freq", ["HOURLY", "MINUTELY", "SECONDLY"])
def test_bysetpos_with_subdaily_freq_is_evaluated_not_crashed(freq: str) -> None:
    text = f"DTSTART;TZID=UTC:20260105T100000\nRRULE:FREQ={freq};BYSECOND=0,30;BYSETPOS=-1;COUNT=3"
    want = list(rrulestr(text.replace(";TZID=UTC", "")))
    got = occurrences(load(text), after=NOW, count=5)
    assert [g.replace(tzinfo=None) for g in got] == want


def test_until_in_the_second_pass_of_a_repeated_hour_is_an_instant() -> None:
    # 06:15Z is 01:15 EST, after both 00:30 EDT and 01:30 EDT (05:30Z)
    rec = load("DTSTART;TZID=America/New_York:20261101T003000\n"
               "RRULE:FREQ=HOURLY;UNTIL=20261101T061500Z")
    assert iso(occurrences(rec, after=NOW, count=10)) == [
        "2026-11-01T00:30:00-04:00", "2026-11-01T01:30:00-04:00"]


def test_count_counts_fired_occurrences_when_a_gap_merges_two_times() -> None:
    # 02:30 does not exist on 29 March in Berlin: it fires at 03:30, with 03:30
    rec = load("DTSTART;TZID=Europe/Berlin:20260329T003000\nRRULE:FREQ=HOURLY;COUNT=4")
    assert iso(occurrences(rec, after=NOW, count=10)) == [
        "2026-03-29T00:30:00+01:00", "2026-03-29T01:30:00+01:00",
        "2026-03-29T03:30:00+02:00", "2026-03-29T04:30:00+02:00"]


@pytest.mark.parametrize(("text", "position"), [
    pytest.param("DTSTART;TZID=Europe/Berlin:20260101T090000\nRRULE:FREQ=DAILY;UNTIL=20260105T090000",
                 60, id="until-without-z-beside-tzid"),
    pytest.param("DTSTART;TZID=Europe/Berlin:20260101T090000Z\nRRULE:FREQ=DAILY;COUNT=2",
                 27, id="dtstart-tzid-with-z"),
])
def test_rfc5545_refusals(text: str, position: int) -> None:
    with pytest.raises(InvalidRule) as caught:
        parse(text, "UTC", now=NOW)
    assert caught.value.details["position"] == position
    with pytest.raises(ValueError):  # the oracle refuses it too
        list(rrulestr(text))


@pytest.mark.parametrize("text", [
    pytest.param("DTSTART;TZID=Europe/Berlin:20260101T090000\r\nRRULE:FREQ=DAILY;\r\n COUNT=3\r\n",
                 id="folded-crlf"),
    pytest.param("DTSTART;TZID=Europe/Berlin:20260101T09\n 0000\nRRULE:FREQ=DAI\n\tLY;COUNT=3",
                 id="folded-lf-space-and-tab"),
    pytest.param("\n\n   DTSTART;TZID=Europe/Berlin:20260101T090000\n   RRULE:FREQ=DAILY;COUNT=3\n\n  ",
                 id="whitespace-around-an-indented-block"),
])
def test_rfc5545_acceptances(text: str) -> None:
    p = preview(text, "UTC", start=None, now=NOW, count=5)
    assert iso(p.next) == ["2026-01-01T09:00:00+01:00", "2026-01-02T09:00:00+01:00",
                           "2026-01-03T09:00:00+01:00"]


# ---------------------------------------------------------------- differential

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo"]
DIFF = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
# Start a few days before a transition, so most cases cross one.
_TRANSITIONS = [datetime(2026, 3, 27), datetime(2026, 10, 22), datetime(2026, 4, 1),
                datetime(2026, 9, 30), datetime(2018, 11, 1), datetime(2019, 2, 14),
                datetime(2026, 11, 29)]


@st.composite
def _starts(draw: st.DrawFn) -> datetime:
    base = draw(st.sampled_from(_TRANSITIONS))
    return base + timedelta(minutes=draw(st.integers(0, 4 * 24 * 60)) // 15 * 15)


def _oracle(rule: str, start: datetime, zone: ZoneInfo, horizon: datetime) -> list[datetime]:
    """dateutil's wall times through our policy: instants, merged, COUNT of
    fired occurrences, UNTIL as an instant."""
    until = next((datetime.strptime(p[6:], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
                  for p in rule.split(";") if p.startswith("UNTIL=")), None)
    horizon = min(horizon, until) if until else horizon
    bare = ";".join(p for p in rule.split(";") if not p.startswith(("COUNT=", "UNTIL=")))
    limit = next((int(p[6:]) for p in rule.split(";") if p.startswith("COUNT=")), None)
    fired: list[datetime] = []
    seen: set[datetime] = set()
    for wall in rrulestr(f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{bare}"):
        utc = wall.replace(tzinfo=zone).astimezone(timezone.utc)
        if utc not in seen:
            seen.add(utc)
            fired.append(utc)
        if len(fired) == limit or utc > horizon + timedelta(days=2):
            break
    return sorted(t for t in fired if t <= horizon)


@DIFF
@given(rules(("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY")), _starts(),
       st.sampled_from(ZONES), st.one_of(st.none(), st.integers(0, 14 * 24 * 4)))
def test_rrules_in_dst_zones_match_dateutil(rule: str, start: datetime, zone_name: str,
                                            until_quarters: int | None) -> None:
    if until_quarters is not None and "COUNT" not in rule:  # UNTIL as an instant, in UTC
        until = start.replace(tzinfo=ZoneInfo(zone_name)) + timedelta(minutes=15 * until_quarters)
        rule += f";UNTIL={until.astimezone(timezone.utc):%Y%m%dT%H%M%SZ}"
    try:
        parse_rule(rule, 0, "UTC")
    except InvalidRule:
        assume(False)
    zone = ZoneInfo(zone_name)
    rec = load(f"DTSTART;TZID={zone_name}:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")
    with budget_scope(10_000_000):
        ours = [d.astimezone(timezone.utc) for d in occurrences(
            rec, after=rec.dtstart - timedelta(days=1), count=20)]
    assume(ours)
    assert ours == _oracle(rule, start, zone, ours[-1]), rule

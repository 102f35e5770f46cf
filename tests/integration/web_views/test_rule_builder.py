"""The rule builder's preview partial: description and next dates, or a refusal in role=alert."""

from __future__ import annotations

import re

import pytest

from almanac.web.views.rules import RuleForm


def _items(html: str) -> list[str]:
    return re.findall(r'<li(?: class="dst-moved")?>(.*?)</li>', html, re.S)


def test_free_text_preview_lists_ten_dates(signed_in):
    b = signed_in("viewer")  # a preview changes nothing: viewers may look too
    html = b.get("/rules/preview", params={"mode": "text", "rule": "every weekday at 9am", "timezone": "Europe/Berlin"}).text
    assert "every weekday at 9:00 AM" in html
    items = _items(html)
    assert len(items) == 10 and all("09:00:00 CET" in item for item in items)
    assert 'role="alert"' not in html


def test_preview_shows_the_viewers_zone_too(signed_in):
    b = signed_in()
    b.client.cookies.set("tz", "America/New_York")
    html = b.get("/rules/preview", params={"rule": "0 8 * * 1-5", "timezone": "Europe/Berlin"}).text
    assert "America/New_York" in html and "02:00:00 EST" in html


@pytest.mark.parametrize("rule, code", [
    ("FREQ=MONTHLY;BYMONTHDAY=30;BYMONTH=2", "never_fires"),
    ("every blue moon sometimes", "invalid_rule"),
    ("*/10 * * * * *", "too_frequent"),
])
def test_bad_rules_are_refused_on_the_spot(signed_in, rule, code):
    html = signed_in().get("/rules/preview", params={"rule": rule, "timezone": "UTC"}).text
    assert 'role="alert"' in html and f'data-code="{code}"' in html and not _items(html)


def test_rule_built_from_fields(signed_in):
    params = [("mode", "fields"), ("freq", "MONTHLY"), ("interval", "1"), ("ordinal", "-1"), ("ordinal_day", "FR"),
              ("at", "12:00"), ("end", "count"), ("count", "3"), ("timezone", "UTC")]
    html = signed_in().get("/rules/preview", params=params).text
    assert "the last Friday of every month at 12:00 PM, 3 times" in html
    assert len(_items(html)) == 3


def test_preview_flags_the_first_date_after_the_clocks_change(signed_in):
    html = signed_in().get("/rules/preview", params={"rule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=9;BYMINUTE=0",
                                                     "timezone": "Europe/Berlin", "start": "2027-10-10T09:00"}).text
    moved = re.findall(r'<li class="dst-moved">(.*?)</li>', html, re.S)
    assert len(moved) == 1 and "2027-10-31" in moved[0] and "now UTC+01:00 in Europe/Berlin" in moved[0]


def test_fields_compose_an_rrule():
    form = RuleForm(mode="fields", freq="WEEKLY", interval="2", byday=["MO", "FR"], at="17:30",
                    end="until", until="2027-01-01", timezone="Europe/Berlin")
    assert form.rule_text() == "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;BYHOUR=17;BYMINUTE=30;UNTIL=20270101T225959Z"
    assert RuleForm(mode="fields", freq="MONTHLY", monthdays="1, -1", at="").rule_text() == "FREQ=MONTHLY;BYMONTHDAY=1,-1"


def test_bad_field_values_are_refusals_not_errors(signed_in):
    html = signed_in().get("/rules/preview", params={"mode": "fields", "freq": "DAILY", "interval": "zero"}).text
    assert 'role="alert"' in html and "Interval must be a whole number" in html


def test_empty_rule_asks_for_one(signed_in):
    html = signed_in().get("/rules/preview", params={"rule": ""}).text
    assert "Type a rule" in html and 'role="alert"' not in html


def test_preview_needs_sign_in(browser):
    response = browser().get("/rules/preview", params={"rule": "daily"}, headers={"HX-Request": "true"})
    assert response.status_code == 204 and response.headers["HX-Redirect"].startswith("/login")


def test_rule_builder_shows_a_dst_move(signed_in):
    rule = "DTSTART;TZID=Europe/Berlin:20270326T023000\nRRULE:FREQ=DAILY;COUNT=3"
    html = signed_in().get("/rules/preview", params={"rule": rule, "timezone": "Europe/Berlin"}).text
    assert '<li class="dst-note">02:30 does not exist on 28 Mar 2027: runs at 03:30</li>' in html
    assert len(_items(html)) == 3
    # The flag stands next to the date it moves, not only in the notes below the list.
    moved = re.findall(r'<li class="dst-moved">(.*?)</li>', html, re.S)
    assert len(moved) == 1 and "2027-03-28" in moved[0] and "DST" in moved[0]
    assert "02:30 does not exist on 28 Mar 2027" in moved[0]


def test_rule_builder_marks_the_words_not_understood(signed_in):
    html = signed_in().get("/rules/preview", params={"rule": "every weekday at 9am except school holidays",
                                                     "timezone": "UTC"}).text
    assert 'data-code="invalid_rule"' in html
    assert "<code>every weekday at 9am except <mark>school holidays</mark></code>" in html

"""Business calendars in the pages: the calendars page (admins write, members read, CSRF, refusals in an
alert, the next 12 months marked), and the rule builder's calendar and policy with its preview notes."""

from __future__ import annotations

import re

from almanac.web.views.business_calendars import parse_closed


def test_an_admin_creates_edits_and_deletes_a_calendar_and_sees_its_year(signed_in):
    b = signed_in()
    listing = b.get("/calendars")
    assert listing.status_code == 200 and "No calendars yet" in listing.text and 'href="/calendars/new"' in listing.text
    form = b.get("/calendars/new").text
    for field in ("cal-name", "cal-country", "cal-subdivision", "cal-closed"):
        assert f'<label for="{field}"' in form
    saved = b.post("/calendars", {"name": "office", "country": "DE", "subdivision": "BY",
                                  "closed": "2026-12-28..2026-12-31 Winter shutdown\n2027-03-01 Inventory",
                                  "weekend": ["saturday", "sunday"]})
    assert saved.status_code == 303 and saved.headers["location"] == "/calendars/office"
    page = b.get("/calendars/office").text
    assert "Winter shutdown" in page and 'title="Christmas Day"' in page and "Fri 25 Dec: Christmas Day" in page
    assert "Mon 1 Mar: Inventory" in page and '<option value="BY" selected>' in page
    assert len(re.findall(r'<section class="month"', page)) == 12
    assert b.post("/calendars", {"name": "office", "country": "DE", "weekend": ["sunday"]}, csrf=False).status_code in (400, 403)
    confirm = b.get("/calendars/office/delete")
    assert confirm.status_code == 200 and "Delete calendar" in confirm.text
    assert b.post("/calendars/office/delete").status_code == 303
    assert "No calendars yet" in b.get("/calendars").text


def test_a_refused_calendar_is_said_in_an_alert_and_nothing_is_saved(signed_in):
    b = signed_in()
    b.get("/calendars/new")
    refused = b.post("/calendars", {"name": "office", "closed": "2026-12-31..2026-12-01 <b>oops</b>"})
    assert refused.status_code == 422 and 'role="alert"' in refused.text and "ends before it starts" in refused.text
    assert "<b>oops</b>" not in refused.text  # autoescaped where it is shown again
    assert "No calendars yet" in b.get("/calendars").text


def test_members_see_calendars_and_built_in_places_but_only_admins_change_them(signed_in):
    viewer = signed_in("viewer")
    page = viewer.get("/calendars/US-NY")
    assert page.status_code == 200 and "(built in)" in page.text and "Save calendar" not in page.text
    assert "Independence Day" in page.text or "Thanksgiving" in page.text
    assert viewer.get("/calendars/new").status_code == 403
    assert viewer.post("/calendars", {"name": "x"}).status_code == 403
    assert viewer.get("/calendars/nowhere").status_code == 404


def test_the_rule_builder_offers_calendars_and_its_preview_notes_what_they_did(signed_in):
    b = signed_in()
    form = b.get("/schedules/new").text
    assert '<label for="calendar"' in form and '<label for="calendar_policy"' in form
    assert '<option value="DE">Germany (DE)</option>' in form
    html = b.get("/rules/preview", params={"rule": "on the 25th of every month at 10", "timezone": "Europe/Berlin",
                                           "start": "2026-12-01T00:00", "calendar": "DE-BY",
                                           "calendar_policy": "before"}).text
    assert "moved from Fri 25 Dec 2026 to Thu 24 Dec 2026: Christmas Day" in html
    assert "business day before" in html and "DE-BY" in html
    refused = b.get("/rules/preview", params={"rule": "every sunday at 10", "calendar": "DE"}).text
    assert 'role="alert"' in refused and 'data-code="never_fires"' in refused


def test_a_schedule_saved_from_the_form_keeps_its_calendar(signed_in):
    b = signed_in()
    b.get("/scripts/new")
    made = b.post("/scripts/new", {"name": "s", "source": "export default () => 1;\n"})
    script_id = made.headers["location"].rsplit("/", 1)[-1]
    b.get("/schedules/new")
    saved = b.post("/schedules/new", {"name": "payroll", "script_id": script_id, "mode": "text",
                                      "rule": "on the 25th of every month at 10", "timezone": "Europe/Berlin",
                                      "calendar": "DE-BY", "calendar_policy": "before", "payload": "{}",
                                      "enabled": "on", "misfire": "run_once", "overlap": "skip",
                                      "max_attempts": "3", "retry_backoff_s": "10", "catchup_window_s": "86400",
                                      "expire_after_s": "", "priority": "0"})
    assert saved.status_code == 303, saved.text
    edit = b.get(saved.headers["location"] + "/edit").text
    assert '<option value="before" selected>' in edit and "DE-BY" in edit


def test_closed_lines_become_the_api_s_entries():
    assert parse_closed("2026-12-24..2026-12-31 Winter shutdown\n\n2027-01-06\n") == [
        {"first": "2026-12-24", "last": "2026-12-31", "label": "Winter shutdown"},
        {"first": "2027-01-06", "last": "2027-01-06"}]

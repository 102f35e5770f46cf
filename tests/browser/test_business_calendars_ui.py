"""Business calendars in chromium: reached from the schedules page, made with the region select that
follows the country, refused in an alert, and used by the rule builder, whose preview notes the moves;
screenshots at 1280 and 390 px, light and dark."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in


def test_a_calendar_is_made_from_the_pages_and_the_rule_builder_uses_it(page, live):
    sign_in(page)
    page.goto("/schedules")
    page.get_by_role("link", name="Business calendars").click()
    page.get_by_role("link", name="New calendar").click()
    page.get_by_label("Name").fill("office-ui")
    page.get_by_label("Country").select_option("DE")
    expect(page.get_by_label("Region").locator("option[value=BY]")).to_have_count(1)  # htmx filled it in
    page.get_by_label("Region").select_option("BY")
    page.get_by_label("Own closed days").fill("2026-12-24..2026-12-31 Winter shutdown")
    page.get_by_role("button", name="Save calendar").click()
    expect(page.get_by_role("heading", name="Calendar office-ui")).to_be_visible()
    expect(page.get_by_role("region", name="December 2026")).to_contain_text("Winter shutdown")
    page.goto("/calendars/new")
    page.get_by_label("Name").fill("bad-ui")
    page.get_by_label("Own closed days").fill("2026-12-31..2026-12-01 backwards")
    page.get_by_role("button", name="Save calendar").click()
    expect(page.get_by_role("alert")).to_contain_text("ends before it starts")
    page.goto("/schedules/new")
    page.get_by_label("Rule", exact=True).fill("on the 25th of every month at 10")
    page.get_by_label("Business calendar").select_option("office-ui")
    page.get_by_label("On a day that is not a business day").select_option("before")
    expect(page.get_by_role("region", name="Preview")).to_contain_text("moved from Fri 25 Dec 2026 to Wed 23 Dec 2026")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots(page, live, scheme):
    page.emulate_media(color_scheme=scheme)
    sign_in(page)
    for width, label in ((1280, "wide"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto("/calendars/DE-BY")
        expect(page.get_by_role("region", name="December 2026")).to_contain_text("Christmas Day")
        shot(page, f"business-calendar-{label}-{scheme}")
        page.goto("/schedules/new")
        page.get_by_label("Rule", exact=True).fill("on the 25th of every month at 10")
        page.get_by_label("Business calendar").select_option("DE")
        page.get_by_label("On a day that is not a business day").select_option("before")
        expect(page.get_by_role("region", name="Preview")).to_contain_text("moved from")
        shot(page, f"business-calendar-builder-{label}-{scheme}")

"""The calendar in chromium with a tenant that holds more than a page shows: 25 every-minute schedules
and a few sparse ones, and pending one-off jobs. Each day says how much it holds, "+N more" opens the
day's list, which pages on; screenshots of the grid and of a day at 1280 and 390 px, light and dark."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in


def _shots(page, name: str) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height in ((1280, 900), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            shot(page, f"{name}-{width}-{scheme}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})


def _tenant(live) -> str:
    """Schedules and jobs through the API; answers the day after tomorrow (Berlin), where a job waits."""
    berlin = ZoneInfo("Europe/Berlin")
    day = datetime.now(berlin).date() + timedelta(days=2)
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}, timeout=60) as api:
        body = [{"name": f"heartbeat-{i:02d}", "script_id": live["script_id"], "rule": "every minute",
                 "timezone": "Europe/Berlin"} for i in range(25)]
        body += [{"name": "morning-report", "script_id": live["script_id"], "rule": "every weekday at 9am",
                  "timezone": "Europe/Berlin"},
                 {"name": "billing-run", "script_id": live["script_id"], "rule": "every day at 6:30",
                  "timezone": "America/New_York"}]
        made = api.post("/api/v1/schedules/batch", json={"schedules": body})
        assert made.status_code == 201, made.text
        for key, at in (("remind-order-7", time(11, 15)), ("recheck-invoice-12", time(16, 40))):
            run_at = datetime.combine(day, at, berlin).astimezone(timezone.utc).isoformat()
            put = api.put(f"/api/v1/jobs/{key}", json={"script_id": live["script_id"], "run_at": run_at})
            assert put.status_code in (200, 201), put.text
    return day.isoformat()


def test_every_day_says_what_it_holds_and_more_opens_the_day(page, live):
    day = _tenant(live)
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("link", name="Calendar").click()
    page.get_by_label("Time zone").select_option("Europe/Berlin")
    page.get_by_role("button", name="Show").click()
    grid = page.get_by_role("table", name="Calendar")
    expect(page.get_by_role("navigation", name="Calendar pages")).to_contain_text("Schedules 1–20 of 27")
    cell = grid.locator(f'td[data-date="{day}"]')
    expect(cell.get_by_role("link", name=re.compile(r"^1,440 times of ")).first).to_be_visible()
    more = cell.get_by_role("link", name=re.compile(r" more on "))
    expect(more).to_be_visible()
    _shots(page, "calendar-many")
    more.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(datetime.fromisoformat(day).strftime("%d %B %Y"))
    times = page.get_by_role("table").filter(has_text="What")
    expect(times.locator("tbody tr")).to_have_count(100)
    expect(page.get_by_text("Pending one-off jobs this day: 2")).to_be_visible()
    _shots(page, "calendar-day")
    first_later = page.get_by_role("link", name="Later times")
    first_later.click()
    expect(page.get_by_role("link", name="From the start of the day")).to_be_visible()
    expect(times.locator("tbody tr").first).to_contain_text("00:05:00")
    # The next page of schedules has the sparse ones and a job's day shows it, marked.
    page.goto("/calendar?zone=Europe/Berlin")
    page.get_by_role("link", name="Next schedules").click()
    expect(page.get_by_role("navigation", name="Calendar pages")).to_contain_text("Schedules 21–27 of 27")
    cell = page.get_by_role("table", name="Calendar").locator(f'td[data-date="{day}"]')
    expect(cell.get_by_role("link", name=re.compile(r" more on .*, 2 pending jobs$"))).to_be_visible()
    page.get_by_label("Schedule", exact=True).select_option(label="morning-report")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("table", name="Calendar").get_by_role("link", name="morning-report").first).to_be_visible()
    _shots(page, "calendar-next-page")

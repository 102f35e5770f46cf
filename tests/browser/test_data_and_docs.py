"""The kv page and the offline API docs in chromium, with screenshots at 1280 and 390 px."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in


def test_kv_browse_edit_and_delete(page, live):
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}) as api:
        for key, value in {"cart:1": {"items": 2}, "cart:2": {"items": 5}, "rates:EUR": {"USD": 1.08}}.items():
            assert api.put(f"/api/v1/kv/{key}", json={"value": value}).status_code in (200, 201)
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.get_by_role("link", name="Data").click()
    page.get_by_label("Key prefix").fill("cart:")
    page.get_by_role("button", name="Browse").click()
    expect(page.get_by_role("link", name="cart:1")).to_be_visible()
    expect(page.get_by_role("link", name="rates:EUR")).to_have_count(0)
    shot(page, "kv-list-1280")
    page.get_by_role("link", name="cart:2").click()
    value = page.get_by_label("Value (JSON)")
    expect(value).to_have_value('{\n  "items": 5\n}')
    value.fill('{"items": 6')
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("not JSON")
    page.get_by_label("Value (JSON)").fill('{"items": 6}')
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "kv-item-390")
    page.get_by_role("button", name="Delete this key").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted")
    expect(page.get_by_role("link", name="cart:2")).to_have_count(0)


def test_docs_render_without_internet(page, live):
    outside = []

    def only_local(route):
        if route.request.url.startswith(live["base"]):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Almanac", timeout=20_000)
    expect(page.get_by_text("/api/v1/scripts/check").first).to_be_visible()
    shot(page, "docs-1280")
    page.goto("/redoc")
    expect(page.get_by_text("Create a script").first).to_be_attached(timeout=20_000)
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "redoc-390")
    # ReDoc's sidebar footer shows Redocly's logo from their CDN: a picture, refused here, nothing else.
    assert [url for url in outside if not url.startswith("https://cdn.redoc.ly/redoc/logo")] == []


def test_calendar_grid_and_filter(page, live):
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}) as api:
        for name, rule in (("morning-report", "every weekday at 9am"), ("weekly-sum", "every Monday at 8am")):
            made = api.post("/api/v1/schedules", json={"name": name, "script_id": live["script_id"], "rule": rule,
                                                       "timezone": "Europe/Berlin"})
            assert made.status_code == 201, made.text
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.get_by_role("link", name="Calendar").click()
    grid = page.get_by_role("table", name="Calendar")
    expect(grid.get_by_role("link", name="morning-report").first).to_be_visible()
    expect(grid.get_by_role("link", name="weekly-sum").first).to_be_visible()
    assert grid.locator("td[data-date]").count() == 28
    shot(page, "calendar-1280")
    page.get_by_label("Schedule").select_option(label="weekly-sum")
    page.get_by_label("Weeks", exact=True).select_option("6")
    page.get_by_role("button", name="Show").click()
    expect(grid.locator("td[data-date]")).to_have_count(42)
    expect(grid.get_by_role("link", name="morning-report")).to_have_count(0)
    # One a week; this week's is gone once Monday 08:00 Berlin has passed.
    assert grid.get_by_role("link", name="weekly-sum").count() in (5, 6)
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "calendar-390")

"""A new tenant in chromium: the dashboard's first steps, a starter saved and run with the payload
the page offers, the run page (script link, start lag), and the copy button of a new token.
Screenshots of the new tenant's dashboard and of a run page at 1280 and 390 px, light and dark."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from playwright.sync_api import expect

from almanac.db import Database
from almanac.tenants import registry
from tests.browser.conftest import PASSWORD, shot, sign_in

FRESH = "fresh"


@pytest.fixture(scope="module")
def fresh(live):
    """A second tenant with nothing in it: no script, no schedule, no run, no token."""
    db = Database(live["settings"])
    try:
        registry.create_tenant(db, FRESH, admin_email=f"admin@{FRESH}.test", admin_password=PASSWORD,
                               name="Fresh", min_interval_seconds=60, now=datetime.now(timezone.utc))
    finally:
        db.dispose()
    return f"admin@{FRESH}.test"


def _steps(page):
    return page.get_by_role("region", name="Get started")


def test_first_steps_lead_to_a_first_run_then_step_aside(page, fresh):
    sign_in(page, fresh)
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.get_by_role("heading", name="Get started")).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("Last 30 days"))).to_have_count(0)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, label in ((1280, "wide"), (390, "phone")):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto("/")
            shot(page, f"first-steps-dashboard-{label}-{scheme}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/")
    _steps(page).get_by_role("link", name="Write a script from a template").click()
    expect(page.locator(".cm-host[data-ready=true]")).to_be_visible()
    page.get_by_label("Name").fill("cart")
    page.get_by_role("button", name="Save script").click()
    expect(page.get_by_label("Payload")).to_have_value(re.compile('"cart": "c-123"'))
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=60_000)
    page.goto("/")
    expect(page.get_by_role("heading", name="Get started")).to_have_count(0)
    expect(page.get_by_role("heading", name=re.compile("Last 30 days"))).to_be_visible()
    # The run page: the script it ran, linked, and how late it started.
    page.goto("/runs")
    expect(page.get_by_role("columnheader", name="Start lag")).to_be_visible()
    page.locator("tbody a", has_text=re.compile(r"^#\d+$")).first.click()
    expect(page.locator("#run-lag")).to_have_text(re.compile(r"^−?\d+(\.\d)? (ms|s)$"))
    link = page.locator("dd a", has_text="cart")
    expect(link).to_have_attribute("href", re.compile(r"^/scripts/\d+$"))
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, label in ((1280, "wide"), (390, "phone")):
            page.set_viewport_size({"width": width, "height": 900})
            page.reload()
            shot(page, f"first-steps-run-{label}-{scheme}")


def test_a_new_token_is_copied_with_one_click(page, fresh):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, fresh)
    page.goto("/tokens")
    page.get_by_label("Name").fill("ci")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text().strip()
    page.get_by_role("button", name="Copy the token").click()
    expect(page.locator(".copy-row [role=status]")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == token
    shot(page, "first-steps-token-copied")

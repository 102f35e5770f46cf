"""The main paths through the UI in a real browser; screenshots land in tests/artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in, shot

pytestmark = pytest.mark.browser


def test_sign_in_and_out(page):
    page.goto("/schedules")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fschedules$"))
    sign_in(page, password="not-the-password", go=False)
    expect(page.get_by_role("alert")).to_contain_text("Wrong email or password")
    shot(page, "login-refused")
    sign_in(page, go=False)  # the refused form still knows where the person was going
    expect(page).to_have_url(re.compile(r"/schedules$"))
    page.goto("/")
    expect(page.get_by_role("heading", name="Acme")).to_be_visible()
    shot(page, "dashboard")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))


def test_rule_builder_preview_updates_and_refuses(page):
    sign_in(page)
    page.goto("/schedules/new")
    preview = page.get_by_role("region", name="Preview")
    page.get_by_label("Rule").fill("every weekday at 9am")
    expect(preview).to_contain_text("every weekday at 9:00 AM")
    expect(preview.get_by_role("listitem")).to_have_count(10)
    expect(preview.get_by_role("listitem").first).to_contain_text("09:00")
    shot(page, "rule-builder")
    page.get_by_label("Rule").fill("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")
    expect(preview.get_by_role("alert")).to_contain_text("February")
    expect(preview.get_by_role("listitem")).to_have_count(0)
    # Refused on the spot: the preview disables Save (out of band) ...
    save = page.get_by_role("button", name="Save schedule")
    expect(save).to_be_disabled()
    shot(page, "rule-builder-refused")
    # ... and the server refuses to save it too, when the form is sent anyway.
    page.get_by_label("Name").fill("never")
    page.get_by_label("Script").select_option(label="greeter")
    page.locator("form[action='/schedules/new']").evaluate("form => form.requestSubmit()")
    expect(page.locator("p.alert").first).to_contain_text("February")
    expect(save).to_be_disabled()  # the refused page asks the preview again on load
    # Built from fields instead of typed.
    page.get_by_label("Build from fields").check()
    page.get_by_label("Frequency").select_option("MONTHLY")
    page.get_by_label("Weekday of the month").select_option(label="last")
    page.get_by_label("Weekday", exact=True).select_option("FR")
    page.get_by_label("Time of day").fill("12:00")
    expect(preview).to_contain_text("the last Friday of every month at 12:00 PM")
    expect(save).to_be_enabled()


def test_upload_and_run_a_script(page, tmp_path):
    sign_in(page)
    page.goto("/scripts/new")
    page.get_by_label("Name").fill("shouter")
    page.get_by_label("Timeout (ms)").fill("20000")  # the run is meant to succeed, however busy the machine
    # The editor (CodeMirror) stands in for the textarea; the textarea without JavaScript is tested
    # in test_authoring.py.
    page.get_by_role("textbox", name="Source").fill("export default function (event) {\n  return 1 +;\n}\n")
    page.get_by_role("button", name="Save script").click()
    expect(page.get_by_role("alert")).to_contain_text("Line 2")
    expect(page.locator(".cm-line").nth(1).locator(".cm-lintRange-error")).to_have_count(1)  # line 2
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    upload = tmp_path / "shouter.js"
    upload.write_text("export default async function (event) {\n  console.log('shouting');\n"
                      "  return {loud: String(event.payload.word).toUpperCase()};\n}\n")
    page.get_by_label("Or upload a file").set_input_files(str(upload))
    page.get_by_role("button", name="Save script").click()
    expect(page.get_by_role("heading", name=re.compile("shouter"))).to_be_visible()
    page.get_by_label("Payload").fill('{"word": "hey"}')
    page.get_by_role("button", name="Run now").click()
    result = page.get_by_role("region", name="Run result")
    expect(result.locator("#run-status")).to_have_text("succeeded")
    expect(result.locator("#run-output")).to_contain_text('"loud": "HEY"')
    expect(result.locator("#run-logs")).to_contain_text("shouting")
    expect(result).to_contain_text(" ms")
    shot(page, "script-run")


def test_save_a_schedule_and_see_it_listed(page):
    sign_in(page)
    page.goto("/schedules/new")
    page.get_by_label("Name").fill("Morning report")
    page.get_by_label("Script").select_option(label="greeter")
    page.get_by_label("Rule").fill("0 8 * * 1-5")
    page.get_by_label("Time zone").fill("America/New_York")
    expect(page.get_by_role("region", name="Preview").get_by_role("listitem")).to_have_count(10)
    page.get_by_label("Payload").fill('{"name": "team"}')
    page.get_by_role("button", name="Save schedule").click()
    expect(page.get_by_role("heading", name="Morning report")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("saved")
    shot(page, "schedule")
    page.get_by_role("button", name="Trigger now").click()
    page.get_by_role("link", name="Schedules", exact=True).click()
    row = page.get_by_role("row", name=re.compile("Morning report"))
    expect(row).to_contain_text("at 8:00 AM")
    shot(page, "schedules")
    page.goto("/runs")
    shot(page, "runs")


def test_viewer_sees_no_edit_buttons(page):
    sign_in(page, email="viewer@acme.test")
    page.goto("/schedules")
    expect(page.get_by_role("link", name="New schedule")).to_have_count(0)
    expect(page.get_by_role("link", name="Scripts")).to_have_count(0)


def test_create_and_revoke_a_token(page):
    sign_in(page)
    page.goto("/tokens")
    page.get_by_label("Name").fill("ci bot")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text()
    assert token.startswith("alm_")
    shot(page, "token-created")
    page.goto("/tokens")
    expect(page.get_by_text(token)).to_have_count(0)
    page.get_by_role("button", name="Revoke ci bot").click()
    expect(page.get_by_role("status")).to_contain_text("revoked")
    expect(page.get_by_role("button", name="Revoke ci bot")).to_have_count(0)
    shot(page, "tokens")


def test_phone_width(page):
    page.set_viewport_size({"width": 375, "height": 800})
    sign_in(page)
    page.goto("/schedules/new")
    page.get_by_label("Rule").fill("the last Friday of every month at noon")
    expect(page.get_by_role("region", name="Preview").get_by_role("listitem")).to_have_count(10)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 380, f"page is {width}px wide at phone width"
    shot(page, "phone-rule-builder")


def test_invite_accept_and_see_it_in_the_audit_log(page, chromium, live):
    """An invitation accepted on a phone-sized page, then found in the audit log (screenshots at 1280 and 390 px)."""
    sign_in(page)
    page.goto("/members")
    page.get_by_label("Email").fill("newcomer@example.com")
    page.get_by_label("Role", exact=True).select_option("editor")
    page.get_by_role("button", name="Create invitation").click()
    link = page.locator("#invitation-link").inner_text().strip()
    assert link.startswith(live["base"] + "/invite/")

    for width in (1280, 390):
        guest = chromium.new_context(base_url=live["base"], viewport={"width": width, "height": 800})
        other = guest.new_page()
        other.goto(link)
        expect(other.get_by_role("heading", name="Join Acme")).to_be_visible()
        shot(other, f"invitation-{width}")
        if width == 390:  # accept once, on the phone
            other.get_by_label("Password", exact=True).fill("newcomers-own-pw")
            other.get_by_label("Repeat password").fill("newcomers-own-pw")
            other.get_by_role("button", name="Accept invitation").click()
            expect(other.get_by_text("Welcome to Acme.")).to_be_visible()
        guest.close()

    page.get_by_role("link", name="Audit").click()
    expect(page.get_by_role("cell", name="invitation.accept")).to_be_visible()
    expect(page.get_by_role("cell", name="newcomer@example.com").first).to_be_visible()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        shot(page, f"audit-{width}")

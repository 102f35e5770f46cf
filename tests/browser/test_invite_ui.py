"""An invitation end to end in a real browser, and the audit page (screenshots at 1280 and 390 px)."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import shot, sign_in



def test_invite_accept_and_see_it_in_the_audit_log(page: Any, chromium: Any, live: dict[str, Any]) -> None:
    from playwright.sync_api import expect

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

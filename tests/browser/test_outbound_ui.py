"""The egress and secrets pages and a run's fetches in chromium: reached from the navigation, a
secret's value never shown back; screenshots at 1280 and 390 px, light and dark."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in

FETCHER = """export default async function () {
  const token = await almanac.secrets.get("API_TOKEN");
  try {
    await fetch("https://api.example.com/v1/ping?key=" + token, {headers: {Authorization: "Bearer " + token}});
  } catch (e) {
    console.log("refused:", e.message);
  }
  return {token};
}
"""


def test_egress_and_secrets_are_set_from_the_pages_and_the_run_shows_its_fetches(page, live):
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Egress").click()
    page.get_by_label("Hosts").fill("api.example.com\n*.example.org\nbad host")
    page.get_by_role("button", name="Save allowlist").click()
    assert "is not a host name" in page.get_by_role("alert").inner_text()
    page.get_by_label("Hosts").fill("api.example.com\n*.example.org\nreports.example.net:8443")
    page.get_by_role("button", name="Save allowlist").click()
    # expect() waits for the page the save redirects to (ciAQ read the old one, still showing the alert).
    expect(page.locator("main li code")).to_have_text(["api.example.com", "*.example.org", "reports.example.net:8443"])
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Secrets").click()
    page.get_by_label("Name").fill("API_TOKEN")
    page.get_by_label("Value").fill("sk-live-do-not-show")
    page.get_by_role("button", name="Save secret").click()
    expect(page.locator("main table")).to_contain_text("API_TOKEN")
    assert "sk-live-do-not-show" not in page.content()
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}, timeout=60) as api:
        script = api.post("/api/v1/scripts", json={"name": "pinger", "source": FETCHER}).json()["id"]
        run = api.post(f"/api/v1/scripts/{script}/run", json={"payload": {}}).json()
    assert run["output"] == {"token": "[secret API_TOKEN]"}
    page.goto(f"/runs/{run['id']}")
    fetches = page.locator("table", has=page.get_by_role("columnheader", name="Method")).inner_text()
    assert "https://api.example.com/v1/ping?key=[secret API_TOKEN]" in fetches
    assert "sk-live-do-not-show" not in page.content()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots(page, live, scheme):
    page.emulate_media(color_scheme=scheme)
    sign_in(page)
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}, timeout=60) as api:
        api.put("/api/v1/egress", json={"hosts": ["api.example.com", "*.example.org"]})
        api.put("/api/v1/secrets/API_TOKEN", json={"value": "sk-live-do-not-show"})
        api.put("/api/v1/secrets/SMTP_PASSWORD", json={"value": "another-one"})
        script = api.post("/api/v1/scripts", json={"name": f"pinger-{scheme}", "source": FETCHER}).json()["id"]
        run = api.post(f"/api/v1/scripts/{script}/run", json={"payload": {}}).json()
    for width, label in ((1280, "wide"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        for path, name in (("/egress", "egress"), ("/secrets", "secrets"), (f"/runs/{run['id']}", "run-fetches")):
            page.goto(path)
            shot(page, f"outbound-{name}-{label}-{scheme}")
            assert "sk-live-do-not-show" not in page.content()

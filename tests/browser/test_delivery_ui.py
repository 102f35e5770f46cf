"""Delivery pages in a real browser: a webhook target with its secret shown once, a refused URL,
a dead delivery's attempt log and Retry now. Screenshots land in tests/artifacts/."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from almanac.db import Database
from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.sending import Job, Result
from almanac.platform.clock import SystemClock
from tests.browser.conftest import SLUG, shot, sign_in
from tests.integration.delivery.world import World

pytestmark = pytest.mark.browser
HOOK_URL = "https://93.184.216.34/hooks/orders"  # public, as an IP: the guard needs no DNS


class Refusing:
    """The receiver answers 500 (no network: the server under test runs no dispatcher of its own)."""

    def send(self, job: Job) -> Result:
        return Result(ok=False, latency_ms=87, status_code=500, error="HTTP 500: receiver is down")


def _dead_delivery(settings: Any) -> None:
    """An event of tenant acme sent once to its targets and refused: dead (one attempt allowed)."""
    db = Database(settings)
    try:
        clock = SystemClock()
        dispatcher = Dispatcher(db, clock, settings, lambda: [SLUG], sender=Refusing(),
                                config=DeliveryConfig(max_attempts=1), rng=random.Random(1))
        world = World(db, SLUG, clock, dispatcher)
        world.emit("order.created", {"order": 7, "total": "19.90"})
        world.step()
        dispatcher.stop(timeout=1)
    finally:
        db.dispose()


def test_webhook_target_secret_once_and_a_dead_delivery_retried(page, live):
    sign_in(page)
    page.get_by_role("link", name="Delivery", exact=True).click()
    page.get_by_role("link", name="Targets", exact=True).click()
    page.get_by_role("link", name="New webhook").click()
    page.get_by_label("Name").fill("Orders hook")
    page.get_by_label("URL").fill("http://169.254.169.254/latest/meta-data")
    page.get_by_label("Topics").fill("order.*")
    page.get_by_role("button", name="Create target").click()
    expect(page.get_by_role("alert")).to_contain_text("169.254.169.254")
    expect(page.get_by_label("Name")).to_have_value("Orders hook")  # the refused form comes back as typed
    shot(page, "target-refused")
    page.get_by_label("URL").fill(HOOK_URL)
    page.get_by_role("button", name="Create target").click()
    secret = page.locator("#new-secret").inner_text()
    assert secret.startswith("whsec_")
    expect(page.get_by_role("status")).to_contain_text("shown only this once")
    shot(page, "target-created")
    page.get_by_role("link", name="Targets", exact=True).click()
    row = page.get_by_role("row", name=re.compile("Orders hook"))
    expect(row).to_contain_text(HOOK_URL)
    expect(page.get_by_text(secret)).to_have_count(0)

    _dead_delivery(live["settings"])
    page.reload()
    expect(row).to_contain_text("1 dead")
    shot(page, "targets")
    row.get_by_role("link", name="1 dead").click()
    page.get_by_role("link", name=re.compile(r"^Delivery \d+$")).first.click()
    expect(page.locator("#delivery-status")).to_have_text("dead")
    log = page.locator("#attempt-log")
    expect(log).to_contain_text("500")
    expect(log).to_contain_text("87 ms")
    expect(log).to_contain_text("receiver is down")
    shot(page, "delivery")
    page.get_by_role("button", name="Retry now").click()
    expect(page.get_by_role("status")).to_contain_text("sent again now")
    expect(page.locator("#delivery-status")).to_have_text("pending")
    page.get_by_role("link", name="order.created").click()
    expect(page.locator("#event-data")).to_contain_text('"order": 7')
    shot(page, "event")


def test_viewer_has_no_delivery_link(page):
    sign_in(page, email=f"viewer@{SLUG}.test")
    expect(page.get_by_role("link", name="Delivery", exact=True)).to_have_count(0)
    page.goto("/deliveries")
    expect(page.get_by_role("alert")).to_contain_text("admin")

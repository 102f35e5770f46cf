"""Operating pages in chromium (issue 22): light and dark, 1280 and 390 px, tables that scroll in
their own box, times to the second with the millisecond on hover, live rows, charts, chains.
Screenshots land in tests/artifacts/operating-*.png."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import pytest
from playwright.sync_api import expect

from almanac.db import Database
from almanac.platform.models import Run
from tests.browser.conftest import SLUG, shot, sign_in
from tests.support.operating import Seeded, seed

pytestmark = pytest.mark.browser
SIZES = {"wide": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def seeded(live: dict[str, Any]) -> Seeded:
    db = Database(live["settings"])
    try:
        return seed(db, SLUG, live["script_id"], datetime.now(timezone.utc))
    finally:
        db.dispose()


@pytest.fixture(scope="module")
def session_state(chromium: Any, live: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sign in once for the module (argon2 is slow on purpose); every context starts from this cookie."""
    context = chromium.new_context(base_url=live["base"])
    page = context.new_page()
    sign_in(page)
    expect(page.get_by_role("heading", name="Acme")).to_be_visible()
    path = str(tmp_path_factory.mktemp("state") / "state.json")
    context.storage_state(path=path)
    context.close()
    return path


def _context(chromium: Any, live: dict[str, Any], state: str, size: str, scheme: str) -> Any:
    context = chromium.new_context(base_url=live["base"], viewport=SIZES[size], color_scheme=scheme,
                                   timezone_id="Europe/Berlin", locale="en-GB", storage_state=state)
    context.set_default_timeout(10_000)
    return context


def _inside(page: Any, cell: Any, box: Any) -> bool:
    """The cell is wholly visible within its scroll box (not clipped by it)."""
    inner, outer = cell.bounding_box(), box.bounding_box()
    return inner["x"] >= outer["x"] - 1 and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 1


def _no_sideways_page_scroll(page: Any) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .filter(e => !e.closest('.scroll') || e.classList.contains('scroll'))
        .slice(0, 6).map(e => e.tagName + '.' + e.className + '#' + e.id)""")
    assert overflow <= 1, f"the page itself scrolls sideways by {overflow}px: {wide}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["wide", "phone"])
def test_operating_pages_in_both_schemes_and_sizes(chromium, live, session_state, seeded, size, scheme):
    context = _context(chromium, live, session_state, size, scheme)
    page = context.new_page()
    try:
        page.goto("/")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(20, 23, 29)") == (scheme == "dark"), background
        expect(page.get_by_role("img", name="Runs per day, by status")).to_be_visible()
        expect(page.get_by_role("img", name=re.compile("Run duration per day"))).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-dashboard-{size}-{scheme}")

        page.goto("/runs")
        expect(page.locator("tbody tr")).to_have_count(4)
        _no_sideways_page_scroll(page)
        shot(page, f"operating-runs-{size}-{scheme}")

        page.goto(f"/runs/{seeded.retry}")
        expect(page.get_by_role("heading", name="Events it emitted")).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-run-{size}-{scheme}")

        page.goto("/schedules")
        expect(page.get_by_label("Select nightly-report")).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-schedules-{size}-{scheme}")

        page.goto("/deliveries")
        box = page.locator(".scroll").first
        status = page.get_by_role("columnheader", name="Status")
        if size == "phone":
            # the table is wider than the phone: it scrolls inside its own box, reachable by keyboard;
            # scrolling it all the way brings its last column in and the Status column stays reachable
            expect(box).to_have_attribute("tabindex", "0")
            box.focus()
            box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
            assert _inside(page, page.get_by_role("columnheader", name="Created"), box)
            box.evaluate("b => { b.scrollLeft = 0; }")
            assert _inside(page, status, box)
            for _ in range(30):
                if not _inside(page, status, box):
                    break
                page.keyboard.press("ArrowRight")
            assert not _inside(page, status, box), "the box did not scroll"
            while not _inside(page, status, box) and page.evaluate("b => b.scrollLeft", box.element_handle()) > 0:
                page.keyboard.press("ArrowLeft")
            assert _inside(page, status, box)
        else:
            assert _inside(page, status, box) and box.get_attribute("tabindex") is None
        _no_sideways_page_scroll(page)
        shot(page, f"operating-deliveries-{size}-{scheme}")
    finally:
        context.close()


def test_times_show_seconds_and_milliseconds_on_hover(chromium, live, session_state, seeded):
    context = _context(chromium, live, session_state, "wide", "light")
    page = context.new_page()
    try:
        page.goto(f"/runs/{seeded.retry}")
        started = page.locator("dt:text('Started') + dd time")
        expect(started).to_have_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CE[S]?T$"))
        expect(started).to_have_attribute("title", re.compile(r"\d\d:\d\d:\d\d\.\d{3} CE[S]?T · .*UTC"))
        # its other attempt is one click away, and back
        page.get_by_role("link", name="attempt 1").click()
        expect(page.get_by_role("alert")).to_contain_text("Line 3: TypeError: db is down")
        page.get_by_role("link", name="attempt 2").click()
        expect(page.get_by_role("heading", name=re.compile(f"Run #{seeded.retry}"))).to_be_visible()
        # the chain it started
        page.get_by_role("link", name="check-7", exact=True).click()
        page.get_by_role("link", name="chain of check-7").click()
        expect(page.locator("ol.chain > li")).to_have_count(3)
        shot(page, "operating-chain")
    finally:
        context.close()


def test_a_running_row_updates_itself(chromium, live, session_state, seeded):
    context = _context(chromium, live, session_state, "wide", "light")
    page = context.new_page()
    try:
        page.goto("/runs?status=running")
        row = page.locator("tbody tr")
        expect(row).to_have_count(1)
        expect(row.locator(".status")).to_have_text("running")
        db = Database(live["settings"])
        try:
            with db.tenant_session(SLUG) as session:
                run = session.get(Run, seeded.running)
                run.status, run.finished_at, run.duration_ms = "succeeded", datetime.now(timezone.utc), 1234
        finally:
            db.dispose()
        expect(row.locator(".status")).to_have_text("succeeded", timeout=10_000)
        expect(row).to_contain_text("1234 ms")
    finally:
        context.close()


def test_pause_with_a_note_from_the_list_by_keyboard(chromium, live, session_state, seeded):
    context = _context(chromium, live, session_state, "phone", "dark")
    page = context.new_page()
    try:
        page.goto("/schedules")
        page.get_by_label("Select nightly-report").focus()
        page.keyboard.press("Space")
        page.get_by_label("Note (optional, shown on each schedule)").fill("vendor API down")
        page.get_by_role("button", name="Pause", exact=True).focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("status")).to_contain_text("Paused 1 schedule.")
        expect(page.locator("tbody")).to_contain_text("Paused by admin@acme.test: vendor API down")
        page.get_by_role("link", name="nightly-report").click()
        expect(page.locator("#pause-note-shown")).to_contain_text("vendor API down")
        shot(page, "operating-schedule-paused-phone-dark")
        page.get_by_label("Note for resume (optional: why)").fill("vendor is back")
        page.get_by_role("button", name="Resume").click()
        expect(page.locator("#pause-note-shown")).to_contain_text("Resumed by admin@acme.test: vendor is back")
    finally:
        context.close()

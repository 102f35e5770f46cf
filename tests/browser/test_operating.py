"""Operating pages in chromium: light and dark, 1280 and 390 px, tables that scroll in
their own box, times to the second with the millisecond on hover, live rows, charts, chains.
Screenshots land in tests/artifacts/operating-*.png."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import pytest
from playwright.sync_api import expect

from almanac.db import Database
from almanac.platform.store.models import Run
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

        if size == "phone":  # the charts open on their newest days, today's bar in view
            chart = page.locator(".chart .scroll").first
            expect(chart).to_have_attribute("data-scrolled", "")
            assert page.evaluate("b => b.scrollLeft + b.clientWidth >= b.scrollWidth - 1", chart.element_handle())

        page.goto("/runs")
        expect(page.locator("tbody tr")).to_have_count(4)
        box = page.locator(".scroll").first
        for cell in page.locator("tbody tr td:nth-child(2) .status").all():  # status reads without scrolling
            assert _inside(page, cell, box)
        _no_sideways_page_scroll(page)
        shot(page, f"operating-runs-{size}-{scheme}")

        page.goto(f"/runs/{seeded.retry}")
        expect(page.get_by_role("heading", name="Events it emitted")).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-run-{size}-{scheme}")

        page.goto("/quotas")
        expect(page.get_by_role("heading", name="Quotas")).to_be_visible()
        expect(page.get_by_role("meter", name=re.compile("^Schedules: \\d+% used$"))).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-quotas-{size}-{scheme}")

        page.goto("/members")
        expect(page.get_by_role("heading", name="Invitations")).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-members-{size}-{scheme}")

        page.goto("/audit")
        expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
        _no_sideways_page_scroll(page)
        shot(page, f"operating-audit-{size}-{scheme}")

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
        started = page.locator("dt:text-is('Started') + dd time")
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


def test_admin_pages_by_keyboard_from_the_navigation(chromium, live, session_state):
    """Each admin page is a link in the main navigation, reached with Tab and opened with Enter."""
    context = _context(chromium, live, session_state, "wide", "light")
    page = context.new_page()
    try:
        page.goto("/")
        for name, heading in (("Members", "Invitations"), ("Quotas", "Quotas"), ("Audit", "Audit log")):
            link = page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True)
            for _ in range(40):
                page.keyboard.press("Tab")
                if page.evaluate("document.activeElement.textContent.trim()") == name:
                    break
            expect(link).to_be_focused()
            page.keyboard.press("Enter")
            expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
            expect(page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True)
                   ).to_have_attribute("aria-current", "page")
    finally:
        context.close()


def test_run_page_shows_the_stored_event_cpu_and_your_zone(chromium, live, session_state, seeded):
    db = Database(live["settings"])
    try:
        with db.tenant_session(SLUG) as session:
            run = session.get(Run, seeded.retry)
            run.event = '{"payload": {"report": "as given"}, "attempt": 2}'
            run.cpu_ms = 87
    finally:
        db.dispose()
    context = chromium.new_context(base_url=live["base"], viewport=SIZES["phone"], color_scheme="dark",
                                   timezone_id="America/New_York", locale="en-US", storage_state=session_state)
    page = context.new_page()
    try:
        page.goto("/")  # app.js learns the zone into its cookie
        page.goto(f"/runs/{seeded.retry}")
        expect(page.locator("#run-event")).to_contain_text('"report": "as given"')
        expect(page.locator("dt:text('CPU') + dd")).to_have_text("87 ms")
        expect(page.locator("#run-started-yours time")).to_have_text(re.compile(r"\d\d:\d\d:\d\d E[SD]T$"))
        expect(page.locator("#run-fetches-none")).to_have_text("None.")
        _no_sideways_page_scroll(page)
        shot(page, "operating-run-stored-phone-dark")
    finally:
        context.close()

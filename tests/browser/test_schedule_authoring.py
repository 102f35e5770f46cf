"""A schedule authored in chromium: the rule builder filled back from a saved rule and showing
only the fields its frequency uses, a DST move flagged beside its date, Try with payload from the
schedule's page, and the schedule's own calendar; screenshots at 1280 and 390 px, light and dark."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in

EMITTER = """export default async function (event) {
  const seen = (await almanac.kv.get("trial-seen")) ?? 0;
  console.log("hello", event.payload.name);
  await almanac.kv.set("trial-seen", seen + 1);
  await almanac.emit("greeted", {name: event.payload.name});
  if (event.payload.fail) {
    throw new Error("asked to fail");
  }
  return {greeting: "hi " + event.payload.name};
}
"""


def _shots(page, name: str) -> None:
    """The page at 1280 and 390 px, in light and dark."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height in ((1280, 900), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            shot(page, f"{name}-{width}-{scheme}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})


def _api(live):
    return httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}, timeout=60)


def _schedule(live, name, rule, script_id=None, payload=None):
    with _api(live) as api:
        made = api.post("/api/v1/schedules", json={"name": name, "script_id": script_id or live["script_id"],
                                                   "rule": rule, "timezone": "Europe/Berlin",
                                                   "payload": payload or {"name": "Ann"}})
        assert made.status_code == 201, made.text
        return made.json()["id"]


def test_editing_fills_the_fields_and_shows_only_those_of_the_frequency(page, live):
    built = _schedule(live, "fields-built", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;BYHOUR=17;BYMINUTE=30")
    sign_in(page)
    page.goto(f"/schedules/{built}/edit")
    expect(page.get_by_label("Build from fields")).to_be_checked()
    expect(page.locator("#fill-note")).to_have_text("The fields show this schedule's rule.")
    expect(page.get_by_label("Frequency")).to_have_value("WEEKLY")
    expect(page.get_by_label("Every how many")).to_have_value("2")
    expect(page.get_by_label("Time of day")).to_have_value("17:30")
    expect(page.get_by_label("Mon", exact=True)).to_be_checked()
    expect(page.get_by_label("Fri", exact=True)).to_be_checked()
    expect(page.get_by_label("Tue", exact=True)).not_to_be_checked()
    # Weekly: weekdays show, month days and the weekday of the month do not.
    expect(page.get_by_label("Month days")).to_be_hidden()
    expect(page.get_by_label("Weekday of the month")).to_be_hidden()
    # Ends: the date or the count shows only when chosen.
    expect(page.get_by_label("Until")).to_be_hidden()
    expect(page.get_by_label("Count")).to_be_hidden()
    preview = page.get_by_role("region", name="Preview")
    expect(preview).to_contain_text("every 2 weeks")
    _shots(page, "schedule-edit-fields")
    # Monthly: the weekday boxes go, month days and the weekday of the month come.
    page.get_by_label("Frequency").select_option("MONTHLY")
    expect(page.get_by_label("Mon", exact=True)).to_be_hidden()
    expect(page.get_by_label("Month days")).to_be_visible()
    page.get_by_label("Month days").fill("1, -1")
    expect(preview).to_contain_text(re.compile("month", re.I))
    page.get_by_label("On a date").check()
    expect(page.get_by_label("Until")).to_be_visible()
    expect(page.get_by_label("Count")).to_be_hidden()
    # Hourly: no time of day either.
    page.get_by_label("Frequency").select_option("HOURLY")
    expect(page.get_by_label("Time of day")).to_be_hidden()
    expect(page.get_by_label("Month days")).to_be_hidden()
    expect(page.get_by_label("Mon", exact=True)).to_be_visible()


def test_a_rule_the_fields_cannot_say_is_named(page, live):
    two = _schedule(live, "twice-daily", "0 9,17 * * *")
    sign_in(page)
    page.goto(f"/schedules/{two}/edit")
    expect(page.get_by_label("Free text")).to_be_checked()
    expect(page.get_by_label("Rule", exact=True)).to_have_value("0 9,17 * * *")
    expect(page.locator("#fill-note")).to_contain_text("cannot show this rule: it runs at several times of day")
    english = _schedule(live, "weekday-mornings", "every weekday at 9am")
    page.goto(f"/schedules/{english}/edit")
    expect(page.locator("#fill-note")).to_contain_text("Build from fields")
    page.get_by_label("Build from fields").check()
    expect(page.get_by_label("Wed", exact=True)).to_be_checked()
    expect(page.get_by_label("Sun", exact=True)).not_to_be_checked()
    expect(page.get_by_label("Time of day")).to_have_value("09:00")
    _shots(page, "schedule-edit-text-filled")


def test_a_dst_move_is_flagged_beside_its_date(page, live):
    sign_in(page)
    page.goto("/schedules/new")
    page.get_by_label("Build from fields").check()
    page.get_by_label("Frequency").select_option("DAILY")
    page.get_by_label("Time of day").fill("02:30")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Start", exact=True).fill("2027-03-26T02:30")
    moved = page.get_by_role("region", name="Preview").locator("li.dst-moved")
    expect(moved).to_have_count(1)
    expect(moved).to_contain_text("2027-03-28")
    expect(moved).to_contain_text("02:30 does not exist on 28 Mar 2027: runs at 03:30")
    expect(moved.locator(".dst-flag")).to_have_text("DST")
    _shots(page, "rule-builder-dst")


def test_run_with_payload_from_the_schedule_page(page, live):
    with _api(live) as api:
        # A deadline no busy machine reaches: the run is meant to succeed (see tests/integration/test_quotas.py).
        script = api.post("/api/v1/scripts", json={"name": "trial-emitter", "source": EMITTER, "timeout_ms": 20_000})
        assert script.status_code == 201, script.text
    sid = _schedule(live, "trial-run", "every day at 6am", script.json()["id"], {"name": "Ann"})
    sign_in(page)
    page.goto(f"/schedules/{sid}")
    payload = page.get_by_label("Payload")
    expect(payload).to_have_value(re.compile('"name": "Ann"'))
    payload.fill('{"name": "Bo"}')
    page.get_by_role("button", name="Try with payload (no side effects)").click()
    result = page.get_by_role("region", name="Trial result")
    expect(result.locator("#trial-status")).to_have_text("succeeded")
    expect(result).to_contain_text('"greeting": "hi Bo"')
    expect(result).to_contain_text("hello Bo")
    expect(result.locator("#trial-events")).to_contain_text("greeted")
    expect(result.locator("#trial-kv")).to_contain_text("trial-seen")
    _shots(page, "schedule-trial")
    payload.fill('{"name": "Bo", "fail": true}')
    page.get_by_role("button", name="Try with payload (no side effects)").click()
    expect(result.locator("#trial-status")).to_have_text("failed")
    expect(result.get_by_role("alert")).to_contain_text("Line 7")
    expect(result.get_by_role("alert")).to_contain_text("asked to fail")
    _shots(page, "schedule-trial-error")
    with _api(live) as api:  # nothing was saved: no run, and kv untouched
        assert api.get("/api/v1/runs", params={"schedule_id": sid}).json()["items"] == []
        assert api.get("/api/v1/kv/trial-seen").status_code == 404


def _sevens_ahead_in_the_grid() -> int:
    """How many of the grid's 28 days (from this week's Monday in Berlin) have their 07:00 still ahead."""
    zone = ZoneInfo("Europe/Berlin")
    now = datetime.now(zone)
    first = now.date() - timedelta(days=now.weekday())
    return sum(datetime.combine(first + timedelta(days=i), time(7), zone) > now for i in range(28))


def test_the_schedule_page_shows_its_calendar(page, live):
    sid = _schedule(live, "cal-daily", "every day at 7am")
    sign_in(page)
    # The grid starts on Monday: the days already past hold no occurrence. (">= 27" held on Mondays and on
    # Tuesdays before 07:00 only: ciU ran on a Tuesday at 07:05.) Counted before and after the page, in
    # case 07:00 passes meanwhile.
    before = _sevens_ahead_in_the_grid()
    page.goto(f"/schedules/{sid}")
    grid = page.get_by_role("table", name="Calendar of cal-daily")
    expect(grid.locator("td[data-date]")).to_have_count(28)
    shown = grid.locator(".cal-time", has_text="07:00").count()
    assert shown in {before, _sevens_ahead_in_the_grid()} and shown >= 21, shown  # 3 weeks ahead at least
    page.get_by_role("link", name="Open in the calendar").click()
    expect(page.get_by_label("Schedule")).to_have_value(str(sid))
    page.goto(f"/schedules/{sid}")
    _shots(page, "schedule-page-calendar")

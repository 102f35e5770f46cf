"""The calendar's cost does not grow with the tenant: a page computes the same recurrence work for 30 or
120 every-minute schedules, says what it left out (its '+N more' and counts are links to the day's
full list, itself paged) and shows pending one-off jobs on their day. On both databases: the jobs
come from a windowed SQL query."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from html import unescape

import pytest

from almanac.platform.recurrence.engine import Budget
from almanac.web.views import calendar_grid
from tests.conftest import BACKENDS

SCRIPT = "export default async function (event) { return 1; }"
NOW = datetime(2026, 10, 20, 8, 0, tzinfo=timezone.utc)  # a Tuesday, 10:00 in Berlin


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param  # the jobs' per-day query differs between the databases


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the recurrence engine's steps (its own unit of work), each once however many budgets it draws on."""
    counted = [0]
    real = Budget.tick

    def tick(self: Budget) -> None:
        if self.parent is None:
            counted[0] += 1
        real(self)

    monkeypatch.setattr(Budget, "tick", tick)
    return counted


def _cell(page: str, day: str) -> str:
    match = re.search(rf'<td class="[^"]*" data-date="{day}">(.*?)</td>', page, re.S)
    assert match, day
    return match.group(1)


def _schedules(client, script: int, first: int, last: int, rule: str = "every minute") -> None:
    body = [{"name": f"minutely-{i:03d}", "script_id": script, "rule": rule, "timezone": "Europe/Berlin"}
            for i in range(first, last)]
    made = client.post("/api/v1/schedules/batch", json={"schedules": body})
    assert made.status_code == 201, made.text


def _setup(signed_in, api, manual_clock):
    manual_clock.set(NOW)
    b = signed_in("viewer")
    client = api("admin", b.tenant)
    script = client.post("/api/v1/scripts", json={"name": "s", "source": SCRIPT}).json()["id"]
    return b, client, script


def test_a_pages_work_is_bounded_whatever_the_tenant_holds(signed_in, api, manual_clock, steps):
    b, client, script = _setup(signed_in, api, manual_clock)
    _schedules(client, script, 0, 30)
    steps[0] = 0
    first = b.get("/calendar?weeks=6&zone=Europe/Berlin")
    assert first.status_code == 200
    with_30 = steps[0]
    _schedules(client, script, 30, 120)
    steps[0] = 0
    page = b.get("/calendar?weeks=6&zone=Europe/Berlin").text
    assert steps[0] == with_30, "the page's recurrence work grew with the number of schedules"
    assert steps[0] < 40_000
    # The page says which schedules it shows and links to the rest; none of its own is left out.
    assert "Schedules 1–20 of 120 (by name)" in page and "Not shown on this page" not in page
    later = unescape(re.search(r'<a href="([^"]+)" rel="next">Next schedules</a>', page).group(1))
    steps[0] = 0
    second = b.get(later).text
    assert steps[0] == with_30 and "minutely-020</a>" in second and "minutely-019</a>" not in second
    # Every day of every-minute shows its count (not a schedule that vanishes after two days).
    for day in ("2026-10-21", "2026-10-25", "2026-11-29"):
        assert "minutely-000</a> <a class=\"cal-count\"" in _cell(page, day), day
    assert "×1,440<" in _cell(page, "2026-10-21") and "×1,440<" in _cell(page, "2026-10-25")  # wall-clock minutes, the repeated hour once


def test_more_is_a_link_to_the_days_full_list_which_is_paged(signed_in, api, manual_clock, steps):
    b, client, script = _setup(signed_in, api, manual_clock)
    _schedules(client, script, 0, 25)
    page = b.get("/calendar?zone=Europe/Berlin").text
    cell = _cell(page, "2026-10-22")
    more = re.search(r'<a class="cal-more" href="([^"]+)"[^>]*>\+([\d,]+) more</a>', cell)
    assert more, cell
    # The page's 20 schedules are a line each with its count; 4 lines shown, the other 16 are "more".
    assert int(more.group(2).replace(",", "")) == 16 * 1440
    steps[0] = 0
    day = b.get(unescape(more.group(1)))
    assert day.status_code == 200 and "Thursday 22 October 2026" in day.text
    assert steps[0] < 20_000
    rows = re.findall(r'<td class="cal-time">(\d\d:\d\d:\d\d)</td>\s*<td><a href="/schedules/\d+">([\w-]+)</a>',
                      day.text)
    assert len(rows) == 100 and rows[0] == ("00:00:00", "minutely-000") and rows[-1][0] == "00:04:00"
    assert re.search(r"minutely-000</a></td>\s*<td>1,440</td>", day.text)
    later = unescape(re.search(r'<a href="([^"]+)" rel="next">Later times</a>', day.text).group(1))
    rows2 = re.findall(r'<td class="cal-time">(\d\d:\d\d:\d\d)</td>\s*<td><a href="/schedules/\d+">([\w-]+)</a>',
                       b.get(later).text)
    assert rows2[0] == ("00:05:00", "minutely-000") and len(rows2) == 100
    assert not set(rows) & set(rows2)
    # A schedule's own count on a cell links to that schedule's day.
    count = re.search(r'<a class="cal-count" href="([^"]+)"', cell).group(1)
    only = b.get(unescape(count)).text
    assert "minutely-001</a>" not in only and ">1,440<" in only
    # Days outside the calendar's reach, and cursors that make no sense, are not errors.
    assert b.get("/calendar/day/9999-12-31").status_code == 404
    assert b.get("/calendar/day/2026-10-22?after=9999-12-31T23:59:59-01:00&after_key=s1").status_code == 200
    assert b.get("/calendar/day/not-a-day").status_code in (404, 422)
    for path in ("/calendar?page=-1", f"/calendar?page={10**20}", "/calendar?weeks=-3&view=week",
                 "/calendar/day/0001-01-01", "/calendar/day/2026-10-22?after=0001-01-01T00:00:00%2B14:00&after_key=j1",
                 f"/calendar/day/2026-10-22?after=2026-10-22T00:00:00&after_key=s{'9' * 30}",
                 f"/calendar/day/2026-10-22?page={10**20}&schedule={'9' * 40}"):
        assert b.get(path).status_code < 500, path


def test_pending_jobs_appear_on_their_day(signed_in, api, manual_clock):
    b, client, script = _setup(signed_in, api, manual_clock)
    made = client.post("/api/v1/schedules", json={"name": "nine", "script_id": script, "rule": "every day at 9am",
                                                  "timezone": "Europe/Berlin"})
    assert made.status_code == 201, made.text
    for i, at in enumerate(["2026-10-22T10:30:00Z"] * 7 + ["2026-10-23T06:00:00Z"]):
        put = client.put(f"/api/v1/jobs/remind-{i}", json={"script_id": script, "run_at": at})
        assert put.status_code in (200, 201), put.text
    assert client.delete("/api/v1/jobs/remind-6").status_code in (200, 204)  # cancelled: not shown
    page = b.get("/calendar?zone=Europe/Berlin").text
    thursday = _cell(page, "2026-10-22")
    assert "09:00</span> <a class=\"cal-name\" href=\"/schedules/" in thursday
    assert '<a class="cal-name" href="/jobs/remind-0" title="job remind-0"><span class="cal-tag">job</span> remind-0</a>' in thursday
    assert "12:30" in thursday and "+3 more</a> <span class=\"cal-tag\">3 jobs</span>" in thursday  # 3 of 6 jobs shown
    assert "remind-7" in _cell(page, "2026-10-23") and "08:00" in _cell(page, "2026-10-23")
    day = b.get("/calendar/day/2026-10-22?zone=Europe/Berlin").text
    assert "Pending one-off jobs this day: 6" in day
    assert all(f'href="/jobs/remind-{i}"' in day for i in range(6)) and "remind-6" not in day
    # The filter form sends "All schedules" as an empty value; an id that is no id shows nothing.
    everything = b.get("/calendar?schedule=&zone=Europe%2FBerlin&view=month&weeks=4")
    assert everything.status_code == 200 and "remind-0" in everything.text
    assert b.get("/calendar?schedule=abc").status_code == 200 and "nine</a>" not in b.get("/calendar?schedule=x").text


def test_the_dashboards_upcoming_runs_read_the_plan_not_the_rules(signed_in, api, manual_clock, steps):
    """The dashboard lists the next planned occurrences from the database (ten at most): no rule is
    evaluated for it, however many schedules the tenant holds."""
    b, client, script = _setup(signed_in, api, manual_clock)
    _schedules(client, script, 0, 30)
    steps[0] = 0
    page = b.get("/").text
    assert steps[0] == 0
    assert "Upcoming runs" in page and "minutely-000" in page


def test_schedules_past_the_pages_budget_are_named_with_links(signed_in, api, manual_clock, monkeypatch):
    """Dense rules that are not a plain 'every N minutes' are listed a day at a time up to a cap; when a
    page's budget runs out, the schedules it could not afford are named, with links, not dropped unsaid."""
    b, client, script = _setup(signed_in, api, manual_clock)
    _schedules(client, script, 0, 4, rule="FREQ=MINUTELY;BYHOUR=8,9,10,11,12,13,14,15,16,17")
    monkeypatch.setattr(calendar_grid, "PAGE_STEPS", 9_000)  # about two such schedules over six weeks
    page = b.get("/calendar?weeks=6&zone=Europe/Berlin").text
    assert "Not shown on this page" in page
    named = re.findall(r'<li><a href="/schedules/\d+">(minutely-\d+)</a>: too many occurrences', page)
    assert named and named[-1] == "minutely-003" and "minutely-000" not in named
    assert "×44+" in _cell(page, "2026-10-21")  # 600 a day: 4 listed and 40 counted, a lower bound

"""Admin pages reachable from the navigation, the quotas page, and a run's
stored event, CPU and fetches on its page."""

from __future__ import annotations

import html
import json
import re

from fastapi.testclient import TestClient

from almanac.platform.store import quotas
from almanac.platform.store.models import Run, Schedule
from almanac.tenants import auth, registry
from tests.support.operating import add_script, seed

ADMIN_PAGES = {"/members": "Invitations", "/audit": "Audit log", "/quotas": "Quotas"}


def _nav(page: str) -> list[str]:
    nav = page.split('<nav aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    return re.findall(r'<a href="([^"]+)"', nav)


def test_every_admin_page_of_the_round_is_in_the_navigation_and_marks_itself(signed_in):
    b = signed_in("admin")
    links = _nav(b.get("/").text)
    for path, heading in ADMIN_PAGES.items():
        assert path in links, f"{path} is not in the navigation"
        page = b.get(path)
        assert page.status_code == 200 and heading in page.text
        assert f'<a href="{path}" aria-current="page">' in page.text  # the nav says where one is
    assert 'id="invitations"' in b.get("/members").text  # invitations live on the members page


def test_quotas_page_is_for_admins_and_the_nav_hides_it_from_others(signed_in):
    for role in ("editor", "viewer"):
        b = signed_in(role)
        assert b.get("/quotas").status_code == 403
        assert "/quotas" not in _nav(b.get("/").text)


def test_quotas_page_shows_use_limit_share_and_what_happens(signed_in, database, now):
    b = signed_in("admin")
    script_id = add_script(database, b.tenant, now)
    seed(database, b.tenant, script_id, now)  # one schedule
    with database.shared_session() as s:
        quotas.set_quotas(s, b.tenant, {"schedules": 2}, now)
    page = html.unescape(b.get("/quotas").text)
    row = page.split('id="quota-schedules"', 1)[1].split("</tr>", 1)[0]
    assert "<td>1</td>" in row and "<td>2</td>" in row and "50%" in row and 'value="50"' in row
    assert "answers quota_exceeded" in row
    assert f"almanac tenant quota {b.tenant}" in page
    with database.shared_session() as s:
        quotas.set_quotas(s, b.tenant, {"schedules": 0}, now)
    row = b.get("/quotas").text.split('id="quota-schedules"', 1)[1].split("</tr>", 1)[0]
    assert "reached" in row and 'value="100"' in row  # no division by a zero limit


def test_run_page_shows_the_stored_event_cpu_and_fetches(app, signed_in, database, now):
    b = signed_in("admin")
    seeded = seed(database, b.tenant, add_script(database, b.tenant, now), now)
    given = {"payload": {"report": "as it was"}, "attempt": 2, "runId": seeded.retry}
    with database.tenant_session(b.tenant) as s:
        s.get(Run, seeded.retry).event = json.dumps(given)
        s.get(Run, seeded.retry).cpu_ms = 321
        s.get(Schedule, seeded.schedule_id).payload = json.dumps({"report": "changed since"})
    page = html.unescape(b.get(f"/runs/{seeded.retry}").text)
    assert '"report": "as it was"' in page and "changed since" not in page and "Rebuilt" not in page
    assert "<dd>321 ms</dd>" in page
    assert '<h2>Fetches</h2>\n<p class="muted" id="run-fetches-none">None.</p>' in page
    with database.shared_session() as s:
        token = auth.create_token(s, registry.get_tenant(s, b.tenant), "reader", "viewer", now=now)[1]
    api = TestClient(app).get(f"/api/v1/runs/{seeded.retry}", headers={"Authorization": f"Bearer {token}"}).json()
    assert api["event"] == given and api["cpu_ms"] == 321
    older = TestClient(app).get(f"/api/v1/runs/{seeded.first_attempt}",
                                headers={"Authorization": f"Bearer {token}"}).json()
    assert older["event"] is None and older["cpu_ms"] is None  # recorded before t0008: null, not invented


def test_run_page_lists_fetches_from_the_runs_http_value(signed_in, database, now, monkeypatch):
    """`http` is the fetch work's column (its own migration); the page renders it whenever a run has one."""
    from almanac.web.views import run_detail

    b = signed_in("admin")
    seeded = seed(database, b.tenant, add_script(database, b.tenant, now), now)
    fetches = [{"method": "GET", "url": "https://rates.example/eur", "status": 200, "bytes": 512, "duration_ms": 41},
               {"method": "POST", "url": "https://api.example/x", "status": None, "error": "timed out"}]
    real = run_detail._stored
    monkeypatch.setattr(run_detail, "_stored", lambda run, name: fetches if name == "http" else real(run, name))
    page = html.unescape(b.get(f"/runs/{seeded.retry}").text)
    section = page.split("<h2>Fetches</h2>", 1)[1].split("<h2>", 1)[0]
    assert "https://rates.example/eur" in section and "<td>200</td>" in section and "41 ms" in section
    assert "timed out" in section and "None." not in section


def test_run_page_shows_the_start_in_the_viewers_zone_beside_the_rules(signed_in, database, now):
    b = signed_in("admin")
    seeded = seed(database, b.tenant, add_script(database, b.tenant, now), now)  # rule zone Europe/Berlin
    b.client.cookies.set("tz", "America/New_York")
    page = b.get(f"/runs/{seeded.retry}").text
    assert "Started, your zone" in page and re.search(r'id="run-started-yours"><time [^>]+>[^<]+ E[SD]T</time>', page)
    b.client.cookies.set("tz", "Europe/Berlin")
    assert "Started, your zone" not in b.get(f"/runs/{seeded.retry}").text


def test_fetch_rows_take_any_record_shape_without_breaking_the_page():
    from almanac.web.views.run_detail import fetch_rows

    assert fetch_rows(None) == [] and fetch_rows({"url": "x"}) == [] and fetch_rows("[]") == []
    (row,) = fetch_rows([{"url": "https://a.example/", "extra": 1}, "not a fetch", 3])
    assert row == {"method": None, "url": "https://a.example/", "status": None, "error": None, "bytes": None,
                   "duration_ms": None}


def test_run_api_names_the_events_a_run_emitted_and_its_chain_root(app, signed_in, database, now):
    b = signed_in("admin")
    seeded = seed(database, b.tenant, add_script(database, b.tenant, now), now)
    with database.shared_session() as s:
        token = auth.create_token(s, registry.get_tenant(s, b.tenant), "reader", "viewer", now=now)[1]
    client = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    one = client.get(f"/api/v1/runs/{seeded.retry}").json()
    assert one["events"] == [seeded.event_id] and one["root_key"] is None
    items = {r["id"]: r for r in client.get("/api/v1/runs?limit=100").json()["items"]}
    assert items[seeded.retry]["events"] == [seeded.event_id] and items[seeded.first_attempt]["events"] == []
    assert [items[i]["root_key"] for i in seeded.chain_runs] == ["check-7", "check-7"]


def test_a_schedule_paused_by_its_failures_says_so_on_the_dashboard_list_and_its_page(signed_in, database, now):
    b = signed_in("admin")
    seeded = seed(database, b.tenant, add_script(database, b.tenant, now), now)
    reason = "paused itself after 3 failed runs in a row (pause_after_failures)"
    with database.tenant_session(b.tenant) as s:
        sch = s.get(Schedule, seeded.schedule_id)
        sch.enabled, sch.paused_reason, sch.failures_in_row = False, reason, 3
    dashboard = html.unescape(b.get("/").text).split('id="paused-h"', 1)[1].split("</section>", 1)[0]
    assert "nightly-report" in dashboard and "paused by failures" in dashboard and reason in dashboard
    listing = html.unescape(b.get("/schedules").text)
    assert '<span class="status failed">paused by failures</span>' in listing
    page = html.unescape(b.get(f"/schedules/{seeded.schedule_id}").text)
    assert f"It {reason}; resume it once the cause is fixed." in page

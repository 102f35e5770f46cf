"""Papercuts a person meets on the pages: the first dashboard, copying a secret shown once, the
default payload, a paused schedule's dates, the run page's script link, and start lag."""

from __future__ import annotations

import re
from datetime import timedelta

from almanac.platform.store.models import Run, Schedule

SCRIPT = "export default async function (event) {\n  return {got: event.payload};\n}\n"


def _script(b, name="hello"):
    b.get("/scripts/new")
    url = b.post("/scripts/new", {"name": name, "source": SCRIPT, "timeout_ms": "1000",
                                  "memory_mb": "32"}).headers["location"]
    return int(url.rsplit("/", 1)[1])


def _run_row(database, tenant, script_id, now, *, late_ms, schedule_id=None):
    planned = now - timedelta(minutes=5)
    with database.tenant_session(tenant) as session:
        run = Run(script_id=script_id, schedule_id=schedule_id, trigger="schedule", scheduled_for=planned,
                  created_at=planned, started_at=planned + timedelta(milliseconds=late_ms),
                  finished_at=planned + timedelta(milliseconds=late_ms + 20), duration_ms=20,
                  status="succeeded", attempt=1, script_version=1)
        session.add(run)
        session.flush()
        return run.id


def test_a_new_tenants_dashboard_shows_the_first_steps_then_steps_aside(signed_in, database, now):
    b = signed_in("admin")
    page = b.get("/").text
    guide = re.search(r'<section aria-labelledby="start-h".*?</section>', page, re.S)
    assert guide, "no getting-started section"
    steps = guide.group(0)
    assert '<h2 id="start-h">' in steps
    assert 'href="/scripts/new?template=' in steps and 'href="/schedules/new"' in steps
    assert 'href="/runs"' in steps and 'href="/tokens"' in steps
    assert "Last 30 days" not in page  # no empty charts for a tenant with nothing yet
    script_id = _script(b)
    page = b.get("/").text
    assert re.search(r'<li class="done">.*?href="/scripts/new', page, re.S), "a written script is not marked done"
    _run_row(database, b.tenant, script_id, now, late_ms=10)
    page = b.get("/").text
    assert 'aria-labelledby="start-h"' not in page and "Last 30 days" in page


def test_the_first_steps_for_an_editor_leave_out_tokens(signed_in):
    page = signed_in("editor").get("/").text
    assert 'aria-labelledby="start-h"' in page and 'href="/tokens"' not in page


def test_a_new_token_and_an_invitation_link_have_a_copy_button(signed_in):
    b = signed_in("admin")
    b.get("/tokens")
    page = b.post("/tokens", {"name": "ci", "role": "editor"}).text
    assert re.search(r'<button type="button" class="copy secondary" data-copy="new-token"[^>]*>Copy</button>', page)
    b.get("/members")
    page = b.post("/members", {"email": "new@example.com", "role": "viewer"}).text
    assert re.search(r'<button type="button" class="copy secondary" data-copy="invitation-link"[^>]*>Copy</button>',
                     page)


def test_a_new_schedules_payload_defaults_to_an_empty_object_as_a_scripts_does(signed_in, database):
    b = signed_in("admin")
    script_id = _script(b)
    form = b.get("/schedules/new").text
    assert re.search(r'<textarea id="sched-payload" name="payload"[^>]*>\{\}</textarea>', form)
    assert re.search(r'<textarea id="payload" name="payload"[^>]*>\{\}</textarea>', b.get(f"/scripts/{script_id}").text)
    b.get("/schedules/new")
    created = b.post("/schedules/new", {"name": "daily", "script_id": str(script_id), "payload": "",
                                        "rule": "every day at 9am", "timezone": "UTC", "mode": "text",
                                        "enabled": "on", "misfire": "run_once", "overlap": "skip",
                                        "catchup_window_s": "86400", "max_attempts": "3", "retry_backoff_s": "10",
                                        "priority": "0"})
    assert created.status_code == 303, created.text[:3000]
    with database.tenant_session(b.tenant) as session:
        assert [s.payload for s in session.query(Schedule).all()] == ["{}"]


def test_a_paused_schedule_says_it_is_paused_not_next_0_dates(signed_in, api, database):
    b = signed_in("admin")
    script_id = _script(b)
    client = api("admin", tenant=b.tenant)
    sid = client.post("/api/v1/schedules", json={"name": "nightly", "script_id": script_id,
                                                 "rule": "every day at 3am"}).json()["id"]
    assert client.post(f"/api/v1/schedules/{sid}/pause").status_code == 200
    page = b.get(f"/schedules/{sid}").text
    assert "Next 0 dates" not in page
    assert re.search(r"<h2>Next dates</h2>\s*<p[^>]*>Paused: nothing runs until you resume it\.", page)


def test_the_run_page_links_to_its_script_and_shows_start_lag(signed_in, database, now):
    b = signed_in("admin")
    script_id = _script(b, "greeter")
    run_id = _run_row(database, b.tenant, script_id, now, late_ms=2500)
    page = b.get(f"/runs/{run_id}").text
    assert re.search(rf'<dt>Script</dt><dd><a href="/scripts/{script_id}">greeter</a> v1</dd>', page)
    assert re.search(r'<dt>Start lag</dt><dd id="run-lag"[^>]*>2\.5 s</dd>', page)
    listing = b.get("/runs").text
    assert "<th>Start lag</th>" in listing
    assert re.search(rf'href="/runs/{run_id}">#{run_id}</a>.*?<td class="lag"[^>]*>2\.5 s</td>', listing, re.S)

"""Schedules, jobs, runs and the dashboard through the pages."""

from __future__ import annotations

import re

import pytest

SOURCE = "export default async function (event) {\n  console.log('tick');\n  return {ok: true};\n}\n"
THROWS = "export default function () {\n  throw new Error('kaput');\n}\n"


def _script(b, name="ticker", source=SOURCE) -> str:
    b.get("/scripts/new")
    response = b.post("/scripts/new", {"name": name, "source": source, "timeout_ms": "1000", "memory_mb": "32"})
    assert response.status_code == 303, response.text
    return response.headers["location"].rsplit("/", 1)[1]


def _schedule(b, script_id, rule="every weekday at 9am", **extra):
    b.get("/schedules/new")
    form = {"name": "morning", "script_id": script_id, "mode": "text", "rule": rule, "timezone": "Europe/Berlin",
            "payload": '{"a": 1}', "enabled": "on", "misfire": "run_once", "overlap": "skip", "max_attempts": "3",
            "retry_backoff_s": "10", "catchup_window_s": "86400", "priority": "0", **extra}
    return b.post("/schedules/new", form)


@pytest.fixture
def admin(signed_in):
    b = signed_in("admin")
    b.script_id = _script(b)
    return b


def test_create_a_schedule_and_see_it_listed(admin):
    created = _schedule(admin, admin.script_id)
    assert created.status_code == 303
    page = admin.get(created.headers["location"]).text
    assert "every weekday at 9:00 AM" in page and "Edit" in page and "Trigger now" in page
    listing = admin.get("/schedules").text
    assert "morning" in listing and "every weekday at 9:00 AM" in listing and "never ran" in listing
    assert "Mon 2026-11-23 08:00:00 UTC" in listing  # the next run, 09:00 Berlin, shown in the viewer's UTC


def test_a_never_firing_rule_cannot_be_saved(admin):
    refused = _schedule(admin, admin.script_id, rule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")
    assert refused.status_code == 422
    assert 'role="alert"' in refused.text and "February" in refused.text
    assert "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30" in refused.text  # kept for fixing
    assert "morning" not in admin.get("/schedules").text


def test_form_problems_are_refused_with_reasons(admin):
    assert "Payload is not JSON" in _schedule(admin, admin.script_id, payload="{oops").text
    assert 'role="alert"' in _schedule(admin, "").text
    assert _schedule(admin, "9999").status_code == 404


def test_schedule_from_fields(admin):
    created = _schedule(admin, admin.script_id, mode="fields", rule="", freq="WEEKLY", interval="2",
                        byday=["MO", "FR"], at="17:30", end="never")
    assert created.status_code == 303
    assert "every 2 weeks on Monday and Friday at 5:30 PM" in admin.get(created.headers["location"]).text


def test_edit_pause_resume_trigger_delete(admin):
    url = _schedule(admin, admin.script_id).headers["location"]
    admin.get(url + "/edit")
    edited = admin.post(url + "/edit", {"name": "evening", "script_id": admin.script_id, "mode": "text",
                                        "rule": "every day at 18:00", "timezone": "UTC", "payload": "null",
                                        "enabled": "on", "misfire": "run_once", "overlap": "skip",
                                        "max_attempts": "3", "retry_backoff_s": "10",
                                        "catchup_window_s": "86400", "priority": "0"})
    assert edited.status_code == 303
    page = admin.get(url).text
    assert "evening" in page and "every day at 6:00 PM" in page
    assert admin.post(url + "/pause").status_code == 303
    paused = admin.get(url).text
    assert "paused" in paused and "Resume" in paused
    assert "paused" in admin.get("/schedules").text
    assert admin.post(url + "/resume").status_code == 303
    assert "Pause" in admin.get(url).text
    assert admin.post(url + "/trigger").status_code == 303
    assert "Triggered" in admin.get(url).text
    assert "Delete schedule" in admin.get(url + "/delete").text
    assert admin.post(url + "/delete").status_code == 303
    assert admin.get(url).status_code == 404


def test_viewers_see_no_edit_buttons_and_cannot_post(signed_in, admin):
    url = _schedule(admin, admin.script_id).headers["location"]
    viewer = signed_in("viewer", tenant=admin.tenant)
    page = viewer.get(url).text
    assert "morning" in page and "Trigger now" not in page and "/edit" not in page and "Delete" not in page
    assert "New schedule" not in viewer.get("/schedules").text
    assert viewer.get("/schedules/new").status_code == 403
    for action in ("pause", "trigger", "delete", "edit"):
        refused = viewer.post(f"{url}/{action}")
        assert refused.status_code == 403 and 'role="alert"' in refused.text
    assert "paused" not in admin.get(url).text


def test_another_tenants_schedule_is_not_found(signed_in, admin):
    url = _schedule(admin, admin.script_id).headers["location"]
    stranger = signed_in("admin")
    assert stranger.get(url).status_code == 404
    assert stranger.post(url + "/pause").status_code == 404


def test_jobs_create_replace_cancel(admin):
    admin.get("/jobs/new")
    form = {"key": "remind-7", "script_id": admin.script_id, "run_at": "2026-12-01T09:00", "timezone": "UTC",
            "payload": '{"order": 7}', "max_attempts": "3"}
    created = admin.post("/jobs/new", form)
    assert created.status_code == 303 and created.headers["location"] == "/jobs/remind-7"
    page = admin.get("/jobs/remind-7").text
    assert "remind-7" in page and "2026-12-01 09:00" in page and "pending" in page
    listing = admin.get("/jobs").text
    assert "remind-7" in listing and "Tue 2026-12-01 09:00:00 UTC" in listing
    replaced = admin.post("/jobs/new", {**form, "run_at": "2026-12-02T09:00"})
    assert "replaced" in admin.get(replaced.headers["location"]).text
    assert admin.post("/jobs/remind-7/cancel").status_code == 303
    assert "cancelled" in admin.get("/jobs/remind-7").text
    bad = admin.post("/jobs/new", {**form, "key": "x", "run_at": "soon"})
    assert bad.status_code == 422 and "Run at needs a date" in bad.text


def test_runs_history_filters_and_run_page(admin):
    thrower = _script(admin, "thrower", THROWS)
    for script_id in (admin.script_id, thrower):
        admin.get(f"/scripts/{script_id}")
        admin.post(f"/scripts/{script_id}/run", {"payload": "{}"})
    all_runs = admin.get("/runs").text
    assert all_runs.count('href="/runs/') == 2
    failed = admin.get("/runs", params={"status": "failed"}).text
    assert failed.count('href="/runs/') == 1 and "kaput" in failed
    assert admin.get("/runs", params={"status": "bogus"}).status_code == 422
    assert admin.get("/runs", params={"since": "2030-01-01T00:00"}).text.count('href="/runs/') == 0
    run_id = re.search(r'href="/runs/(\d+)"', failed).group(1)
    page = admin.get(f"/runs/{run_id}").text
    assert 'id="run-status">failed' in page and "kaput" in page and "manual" in page
    home = admin.get("/").text
    assert "Recent failures" in home and "kaput" in home and "Upcoming runs" in home


def test_dashboard_lists_upcoming_runs(admin):
    _schedule(admin, admin.script_id)
    home = admin.get("/").text
    assert "morning" in home and "Mon 2026-11-23 08:00:00 UTC" in home


def test_a_paused_schedule_offers_no_trigger_and_refuses_one(admin):
    url = _schedule(admin, admin.script_id).headers["location"]
    admin.post(url + "/pause")
    page = admin.get(url).text
    assert "Trigger now" not in page and "Resume it to trigger a run" in page
    refused = admin.post(url + "/trigger")  # a page left open from before the pause
    assert refused.status_code == 303 and refused.headers["location"] == url
    shown = admin.get(url).text
    assert 'class="flash bad"' in shown and "is paused" in shown and "Triggered" not in shown

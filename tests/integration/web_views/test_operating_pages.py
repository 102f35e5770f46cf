"""Operating pages: a run's whole story, runs folded by occurrence, chains, live rows."""

from __future__ import annotations

import html
import re

import pytest

from tests.support.operating import add_script, seed


@pytest.fixture
def world(signed_in, database, now):
    b = signed_in("admin")
    script_id = add_script(database, b.tenant, now)
    b.seeded = seed(database, b.tenant, script_id, now)
    b.script_id = script_id
    b.app_db = database
    return b


def _row_ids(text: str) -> list[str]:
    return re.findall(r'<tr id="occ-([^"]+)"', text)


def test_run_page_tells_the_whole_story(world):
    s = world.seeded
    page = html.unescape(world.get(f"/runs/{s.retry}").text)
    # what it was given, to the second in the rule's zone, with the millisecond on hover
    assert '"report": "sales"' in page and '"attempt": 2' in page and "Rebuilt from the run" in page
    assert 'title="2026-11-21 09:00:10.007 CET · 2026-11-21 08:00:10.007 UTC">Sat 2026-11-21 09:00:10 CET</time>' in page
    # the events it emitted with each delivery's status, and the follow-up it planned
    assert "report.ready" in page and "Reports hook" in page and "Broken hook" in page
    assert re.search(r'status dead">dead', page) and re.search(r'status succeeded">succeeded', page)
    assert 'href="/jobs/check-7"' in page
    # its other attempt, linked, and this one marked
    assert f'href="/runs/{s.first_attempt}">attempt 1</a>' in page and "attempt 2 (this run)" in page
    assert "Run again" in page and '"rows": 42' in page
    first = world.get(f"/runs/{s.first_attempt}").text
    assert "Line 3: TypeError: db is down" in first and f'href="/runs/{s.retry}">attempt 2</a>' in first


def test_runs_list_folds_retries_into_one_row_per_occurrence(world):
    s = world.seeded
    page = world.get("/runs").text
    rows = _row_ids(page)
    assert len(rows) == len(set(rows)) == 4  # two schedule occurrences, two chain jobs (three runs are five rows unfolded)
    assert f'href="/runs/{s.first_attempt}" title="attempt 1: failed"' in page
    assert f'<a href="/runs/{s.first_attempt}">#{s.first_attempt}</a>' not in page  # not a row of its own
    # the running row polls for itself; finished rows do not
    assert page.count('hx-trigger="every 2s"') == 1 and f'hx-get="/runs/{s.running}/row"' in page


def test_runs_filters_search_and_paging(world):
    s = world.seeded
    assert _row_ids(world.get("/runs", params={"status": "failed"}).text) and \
        f"#{s.chain_runs[0]}<" in world.get("/runs", params={"status": "failed"}).text
    found = world.get("/runs", params={"q": "SHIPPED"}).text  # search is case-insensitive, over errors
    assert len(_row_ids(found)) == 1 and "check-7<" in found
    by_name = world.get("/runs", params={"q": "nightly"}).text
    assert len(_row_ids(by_name)) == 2
    assert len(_row_ids(world.get("/runs", params={"q": "100%_"}).text)) == 0  # LIKE wildcards are literal
    chain = world.get("/runs", params={"root": "check-7"}).text
    assert len(_row_ids(chain)) == 2 and "nightly-report" not in chain.split("<tbody>")[1]
    assert len(_row_ids(world.get("/runs", params={"schedule_id": str(s.schedule_id)}).text)) == 2
    assert len(_row_ids(world.get("/runs", params={"until": "2000-01-01T00:00"}).text)) == 0
    for bad in ({"since": "yesterday"}, {"until": "0001-01-01T00:00:00+14:00"}, {"schedule_id": "9" * 30},
                {"cursor": "!!"}, {"status": "bogus"}):
        refused = world.get("/runs", params=bad)
        assert refused.status_code == 422 and 'role="alert"' in refused.text, bad
    # cursor paging: 60 manual runs make two pages, the second continues where the first stopped
    from almanac.platform.store.models import Run
    with world.app_db.tenant_session(world.tenant) as session:
        base = session.get(Run, s.retry)
        for _ in range(60):
            session.add(Run(script_id=base.script_id, trigger="manual", scheduled_for=base.scheduled_for,
                            created_at=base.scheduled_for, status="succeeded", attempt=1))
    first = world.get("/runs").text
    older = re.search(r'href="(/runs\?cursor=[^"]+)">Older runs', first).group(1).replace("&amp;", "&")
    second = world.get(older).text
    assert len(_row_ids(first)) == 50 and len(_row_ids(second)) == 14
    assert not set(_row_ids(first)) & set(_row_ids(second)) and "Older runs" not in second


def test_live_row_follows_the_occurrence_to_its_newest_attempt(world):
    s = world.seeded
    row = world.get(f"/runs/{s.first_attempt}/row").text
    assert row.lstrip().startswith("<tr") and f"#{s.retry}<" in row and "every 2s" not in row
    assert "every 2s" in world.get(f"/runs/{s.running}/row").text


def test_chain_view_from_root_through_follow_ups(world):
    page = world.get("/jobs/chain/check-7").text
    steps = re.findall(r"step (\d)</span>\s*job <a href=\"/jobs/([^\"]+)\"", page)
    assert steps == [("1", "check-7"), ("2", "check-7-b"), ("3", "check-7-c")]
    assert "failed" in page and "succeeded" in page and "pending" in page and "not shipped yet" in page
    assert world.get("/jobs/chain/nothing-here").status_code == 404
    listing = world.get("/jobs", params={"root": "check-7"}).text
    assert listing.count('<a href="/jobs/check-7') >= 3 and 'href="/jobs/chain/check-7"' in listing


def test_run_again_triggers_the_schedule(world):
    s = world.seeded
    again = world.post(f"/runs/{s.retry}/again")
    assert again.status_code == 303 and again.headers["location"] == f"/schedules/{s.schedule_id}"
    assert "Triggered" in world.get(again.headers["location"]).text


def test_viewer_reads_but_cannot_run_again_and_strangers_get_404(world, signed_in):
    s = world.seeded
    viewer = signed_in("viewer", tenant=world.tenant)
    assert "Run again" not in viewer.get(f"/runs/{s.retry}").text
    assert viewer.post(f"/runs/{s.retry}/again").status_code == 403
    stranger = signed_in("admin")
    for url in (f"/runs/{s.retry}", f"/runs/{s.retry}/row", "/jobs/chain/check-7"):
        assert stranger.get(url).status_code == 404, url


def test_dashboard_charts_failing_paused_and_delivery_failures(world, signed_in):
    s = world.seeded
    world.post(f"/schedules/{s.schedule_id}/pause")
    home = world.get("/").text
    assert home.count('role="img"') == 2 and 'aria-labelledby="runs-chart-h"' in home
    # the table behind the charts counts runs (attempts): today 2 succeeded, 2 failed; durations 40, 80, 330, 893
    today = re.search(r"<th scope=\"row\">Sat 2026-11-21</th>(.*?)</tr>", home).group(1)
    assert re.findall(r"<td>([^<]*)</td>", today) == ["2", "2", "0", "80", "893"]
    assert "Paused schedules" in home and f'<a href="/schedules/{s.schedule_id}">nightly-report</a>' in home
    assert "Broken hook" in home and "HTTP 500" not in home.split("Delivery failures")[0]
    # recent failures: one row per occurrence; the schedule's failed attempt was retried and succeeded
    failures = home.split('id="failures-h"')[1]
    assert len(_row_ids(failures)) == 1 and "not shipped yet" in failures and "db is down" not in failures
    viewer = signed_in("viewer", tenant=world.tenant).get("/").text
    assert "Delivery failures" not in viewer and 'role="img"' in viewer


def test_schedules_list_streak_search_pause_note_and_bulk(world, database, now):
    s = world.seeded
    from almanac.platform.store.models import Run
    with database.tenant_session(world.tenant) as session:  # the running occurrence ends failed: a streak of 1
        run = session.get(Run, s.running)
        run.status, run.error = "timed_out", "took too long"
    world.get("/schedules/new")
    second = world.post("/schedules/new", {"name": "weekly-digest", "script_id": str(world.script_id), "mode": "text", "rule": "every monday at 9am", "timezone": "UTC",
                        "payload": "null", "enabled": "on", "misfire": "run_once", "overlap": "skip",
                        "max_attempts": "3", "retry_backoff_s": "10", "catchup_window_s": "86400", "priority": "0"})
    assert second.status_code == 303, re.findall(r'role="alert"[^>]*>([^<]*)', second.text)
    second_id = int(second.headers["location"].rsplit("/", 1)[1])
    listing = world.get("/schedules").text
    row = re.search(r"nightly-report</a>.*?</tr>", listing, re.S).group(0)
    assert "active" in row and "timed_out" in row and f'href="/runs/{s.running}" title="took too long"><strong>1<' in row
    assert "weekly-digest" not in world.get("/schedules", params={"show": "failing"}).text
    assert "nightly-report" not in world.get("/schedules", params={"q": "WEEKLY"}).text.split("<tbody>")[1]
    # pause one with a note: shown on the schedule and in the list, and searchable
    world.get(f"/schedules/{s.schedule_id}")
    assert world.post(f"/schedules/{s.schedule_id}/pause", {"note": "  vendor API down\n until Monday "}).status_code == 303
    page = world.get(f"/schedules/{s.schedule_id}").text
    assert "Paused by admin@" in page and "vendor API down until Monday" in page and ">Resume<" in page
    assert "nightly-report" in world.get("/schedules", params={"q": "vendor"}).text
    # bulk: resume both (one was active: unchanged), then pause both with one note, then delete after confirming
    ids = [str(s.schedule_id), str(second_id)]
    assert world.post("/schedules/bulk", {"ids": ids, "action": "pause", "note": "freeze"}).status_code == 303
    paused = world.get("/schedules", params={"show": "paused"}).text
    assert paused.count("Paused by admin@") == 2 and "freeze" in paused and "Paused 2 schedules." in paused
    world.post("/schedules/bulk", {"ids": ids, "action": "resume"})
    assert "paused</span>" not in world.get("/schedules").text
    confirm = world.post("/schedules/bulk", {"ids": ids, "action": "delete"})
    assert confirm.status_code == 200 and "Delete 2 schedules?" in confirm.text
    assert "weekly-digest" in world.get("/schedules").text  # asking deleted nothing
    assert world.post("/schedules/bulk", {"ids": ids, "action": "delete", "confirmed": "yes"}).status_code == 303
    assert "No schedules yet." in world.get("/schedules").text
    assert world.post("/schedules/bulk", {"ids": ["x"], "action": "explode"}).status_code == 303  # refused kindly


def test_bulk_with_another_tenants_id_changes_nothing(world, signed_in):
    stranger = signed_in("admin")
    stranger.get("/schedules")
    refused = stranger.post("/schedules/bulk", {"ids": [str(world.seeded.schedule_id)], "action": "pause"})
    assert refused.status_code == 404
    assert "paused</span>" not in world.get("/schedules").text



def test_a_run_of_a_paused_schedule_is_not_run_again(world):
    s = world.seeded
    world.post(f"/schedules/{s.schedule_id}/pause")
    page = world.get(f"/runs/{s.retry}").text
    assert "Run again" not in page and "resume it to run it again" in page
    refused = world.post(f"/runs/{s.retry}/again")  # a page left open from before the pause
    assert refused.status_code == 303 and refused.headers["location"] == f"/runs/{s.retry}"
    assert "is paused" in world.get(refused.headers["location"]).text

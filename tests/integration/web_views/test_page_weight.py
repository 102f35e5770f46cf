"""Plain, fast pages: each main page with its stylesheet and scripts stays under 100 KB."""

from __future__ import annotations

LIMIT = 100 * 1024
PAGES = ["/", "/schedules", "/schedules/new", "/jobs", "/jobs/new", "/runs", "/scripts", "/scripts/new",
         "/tokens", "/members", "/kv", "/audit", "/quotas"]


def test_every_main_page_weighs_under_100_kb(signed_in):
    b = signed_in("admin")
    assets = sum(len(b.get(f"/static/{name}").content) for name in ("style.css", "app.js", "htmx.min.js"))
    for path in PAGES:
        response = b.get(path)
        assert response.status_code == 200, path
        assert len(response.content) + assets < LIMIT, f"{path} weighs {len(response.content) + assets} bytes"


def test_pages_use_one_stylesheet_and_no_inline_script(signed_in):
    html = signed_in("admin").get("/schedules/new").text
    assert html.count('rel="stylesheet"') == 1
    assert "<script>" not in html and "onclick" not in html and " style=" not in html


def test_a_busy_schedules_pages_and_calendar_stay_light(signed_in):
    """Every five minutes: its page (with its calendar), its edit form and the calendar stay under the limit."""
    from tests.integration.web_views.test_schedule_pages import _schedule, _script

    b = signed_in("admin")
    created = _schedule(b, _script(b), rule="every 5 minutes")
    assert created.status_code == 303, created.text
    url = created.headers["location"]
    assets = sum(len(b.get(f"/static/{name}").content) for name in ("style.css", "app.js", "htmx.min.js"))
    for path in (url, url + "?weeks=6", url + "/edit", "/calendar?weeks=6"):
        response = b.get(path)
        assert response.status_code == 200, path
        assert len(response.content) + assets < LIMIT, f"{path} weighs {len(response.content) + assets} bytes"

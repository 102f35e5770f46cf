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

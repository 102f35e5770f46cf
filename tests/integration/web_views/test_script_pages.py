"""Scripts pages: create, syntax error at its line, new versions, run now, delete; admins only."""

from __future__ import annotations

import re

GOOD = "export default async function (event) {\n  console.log('hi', event.payload.n);\n  return {n: event.payload.n + 1};\n}\n"
BROKEN = "export default function (event) {\n  return 1 +;\n}\n"


def _create(b, name="adder", source=GOOD):
    b.get("/scripts/new")
    return b.post("/scripts/new", {"name": name, "source": source, "timeout_ms": "1000", "memory_mb": "32"})


def test_create_edit_and_version(signed_in):
    b = signed_in("admin")
    created = _create(b)
    assert created.status_code == 303
    url = created.headers["location"]
    page = b.get(url).text
    assert "adder" in page and "v1" in page and '<label for="source">Source</label>' in page
    changed = b.post(url, {"name": "adder", "source": GOOD.replace("+ 1", "+ 2"), "timeout_ms": "1000", "memory_mb": "32"})
    assert changed.status_code == 303
    assert "current version is 2" in b.get(url).text
    same = b.post(url, {"name": "adder", "source": GOOD.replace("+ 1", "+ 2"), "timeout_ms": "900", "memory_mb": "32"})
    assert same.status_code == 303 and "current version is 2" in b.get(url).text
    versions = b.get(url + "/versions").text
    assert "v1" in versions and "v2" in versions and "+ 2" in versions
    assert "+ 1" in b.get(url + "/versions?v=1").text
    assert b.get(url + "/versions?v=9").status_code == 404
    assert "adder" in b.get("/scripts").text


def test_syntax_error_is_shown_at_its_line(signed_in):
    b = signed_in("admin")
    response = _create(b, source=BROKEN)
    assert response.status_code == 422
    assert 'role="alert"' in response.text and "Line 2" in response.text
    assert 'data-error-line="2"' in response.text
    assert "return 1 +;" in response.text  # the source is kept for fixing


def test_upload_a_file(signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    response = b.client.post("/scripts/new", data={"csrf_token": b.csrf, "name": "uploaded", "source": "",
                                                   "timeout_ms": "1000", "memory_mb": "32"},
                             files={"source_file": ("up.js", GOOD.encode(), "text/javascript")})
    assert response.status_code == 303
    assert "event.payload.n + 1" in b.get(response.headers["location"]).text


def test_run_now_shows_status_output_logs_and_duration(signed_in):
    b = signed_in("admin")
    url = _create(b).headers["location"]
    b.get(url)
    answer = b.post(url + "/run", {"payload": '{"n": 41}'}, headers={"HX-Request": "true"})
    assert answer.status_code == 200
    html = answer.text
    assert 'id="run-status">succeeded' in html and '"n": 42' in html and "hi 41" in html and " ms" in html
    full = b.post(url + "/run", {"payload": "{nope"})
    assert full.status_code == 422 and "Payload is not JSON" in full.text
    run_id = re.search(r'href="/runs/(\d+)"', html).group(1)
    assert run_id


def test_failed_run_shows_the_error(signed_in):
    b = signed_in("admin")
    url = _create(b, "thrower", "export default function () {\n  throw new Error('boom');\n}\n").headers["location"]
    b.get(url)
    html = b.post(url + "/run", {"payload": "{}"}).text
    assert 'id="run-status">failed' in html and "boom" in html


def test_delete_asks_first(signed_in):
    b = signed_in("admin")
    url = _create(b).headers["location"]
    confirm = b.get(url + "/delete")
    assert confirm.status_code == 200 and "Delete script" in confirm.text
    assert b.post(url + "/delete").status_code == 303
    assert b.get(url).status_code == 404


def test_scripts_are_for_admins(signed_in):
    b = signed_in("editor")
    assert b.get("/scripts").status_code == 403
    assert b.post("/scripts/new", {"name": "x", "source": GOOD}).status_code == 403

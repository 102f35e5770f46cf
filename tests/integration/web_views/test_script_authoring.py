"""The script editor's server side: syntax check as one types, default export enforced,
starter templates, the reference panel from the generated table, editor bundle only where needed."""

from __future__ import annotations

import json
import re

from almanac.web.views import script_extras

GOOD = "export default async function (event) {\n  return {n: event.payload};\n}\n"
NO_DEFAULT = "export async function run(event) {\n  return 1;\n}\n"


def _check(b, source, **headers):
    return b.client.post("/scripts/check", content=json.dumps({"source": source}),
                         headers={"Content-Type": "application/json", "X-CSRF-Token": b.csrf, **headers})


def test_check_answers_with_the_servers_parser(signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    assert _check(b, GOOD).json() == {"ok": True, "message": None, "line": None, "column": None}
    broken = _check(b, "export default function () {\n  return 1 +;\n}\n").json()
    assert broken["ok"] is False and broken["line"] == 2 and "does not parse" in broken["message"]
    missing = _check(b, NO_DEFAULT).json()
    assert missing["ok"] is False and "no default export" in missing["message"] and missing["line"] == 1
    # `export {f as default}` is a default export too: the probe uses the parser, not a regex.
    assert _check(b, "function f() {}\nexport {f as default};\n").json()["ok"] is True
    # Text that only looks like an export does not count.
    assert _check(b, "// export default x\nconst s = 'export default 1';\n").json()["ok"] is False


def test_check_refuses_bad_bodies_and_other_roles(signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    bad = b.client.post("/scripts/check", content=b"{nope", headers={"Content-Type": "application/json",
                                                                    "X-CSRF-Token": b.csrf})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"
    assert _check(b, GOOD, **{"X-CSRF-Token": "forged"}).status_code == 403
    editor = signed_in("editor")
    editor.get("/")
    assert _check(editor, GOOD).status_code == 403


def test_a_script_without_default_export_is_refused_on_save(signed_in, api):
    b = signed_in("admin")
    b.get("/scripts/new")
    page = b.post("/scripts/new", {"name": "nodefault", "source": NO_DEFAULT, "timeout_ms": "1000",
                                   "memory_mb": "32"})
    assert page.status_code == 422 and "no default export" in page.text and 'role="alert"' in page.text
    client = api("admin")
    answer = client.post("/api/v1/scripts", json={"name": "nodefault", "source": NO_DEFAULT})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "script_syntax_error"
    assert answer.json()["error"]["details"] == {"line": 1, "column": 1}
    checked = client.post("/api/v1/scripts/check", json={"source": NO_DEFAULT})
    assert checked.status_code == 200 and checked.json()["ok"] is False


def test_every_starter_template_is_a_valid_script(services):
    for starter in script_extras.STARTERS:
        assert services.runner.check_syntax(starter.source) is None, starter.slug
        from almanac.platform.service.resources import source_problem

        assert source_problem(services.runner, starter.source) is None, starter.slug
        json.loads(starter.payload)


def test_a_template_fills_the_editor_and_the_payload(signed_in):
    b = signed_in("admin")
    page = b.get("/scripts/new?template=check-again-later").text
    assert "MAX_CHECKS" in page and "almanac.schedule.at" in page
    assert '<option value="check-again-later" selected>' in page
    assert b.get("/scripts/new?template=no-such").status_code == 200  # unknown: the plain starter


def test_reference_and_completion_come_from_the_generated_table(signed_in):
    b = signed_in("admin")
    page = b.get("/scripts/new").text
    table = script_extras.api_table()
    reference = page[page.index('aria-label="Reference"'):]
    for capability in table["capabilities"]:
        assert f"<code>{capability['name']}" in reference, capability["name"]
    for field in table["event_fields"]:
        assert f"event.{field['name']}" in reference
    embedded = re.search(r'<script type="application/json" id="almanac-api">(.*?)</script>', page, re.S)
    tree = json.loads(embedded.group(1))["globals"]
    assert set(tree["almanac"]["children"]) >= {"kv", "emit", "schedule", "secrets"}
    assert set(tree["almanac"]["children"]["kv"]["children"]) == {"get", "set", "delete", "list"}
    assert "fetch" in tree and "log" in tree["console"]["children"] and "payload" in tree["event"]["children"]


def test_the_editor_bundle_loads_only_on_script_pages(signed_in):
    b = signed_in("admin")
    script_url = b.post("/scripts/new", {"name": "plain", "source": GOOD, "timeout_ms": "1000",
                                         "memory_mb": "32"}).headers["location"]
    for path in ("/scripts/new", script_url):
        assert '<script src="/static/editor/editor.js" defer></script>' in b.get(path).text, path
    for path in ("/", "/schedules", "/schedules/new", "/jobs", "/runs", "/scripts", script_url + "/versions"):
        assert "editor.js" not in b.get(path).text, path
    bundle = b.get("/static/editor/editor.js")
    assert bundle.status_code == 200 and "EditorView" not in bundle.text[:10]  # minified, present


def test_versions_show_author_diff_side_by_side_and_restore(signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    url = b.post("/scripts/new", {"name": "versioned", "source": GOOD, "timeout_ms": "1000",
                                  "memory_mb": "32"}).headers["location"]
    b.get(url)
    changed = GOOD.replace("return {n: event.payload};", "const twice = 2;\n  return {n: event.payload * twice};")
    assert b.post(url, {"name": "versioned", "source": changed, "timeout_ms": "1000", "memory_mb": "32"}).status_code == 303
    page = b.get(url + "/versions").text
    assert f"admin@{b.tenant}.test" in page and "Restore v1" in page and "Restore v2" not in page
    diff = b.get(url + "/versions?a=1&b=2").text
    assert 'aria-label="Differences"' in diff
    assert re.search(r'<tr class="changed">.*?<del>  return \{n: event.payload\};</del>.*?'
                     r'<ins>  const twice = 2;</ins>', diff, re.S)
    assert re.search(r'<tr class="added">.*?<ins>  return \{n: event.payload \* twice\};</ins>', diff, re.S)
    assert b.get(url + "/versions?a=1&b=9").status_code == 404
    restored = b.post(url + "/versions/1/restore")
    assert restored.status_code == 303
    assert "Version 1 restored as version 3" in b.get(url).text
    assert "return {n: event.payload};" in b.get(url + "/versions?v=3").text
    assert b.post(url + "/versions/3/restore").status_code == 303  # current: refused with a notice
    assert "current version already" in b.get(url + "/versions").text
    assert b.post(url + "/versions/99/restore").status_code == 404


def test_versions_api_lists_source_author_and_time(api):
    client = api("admin")
    created = client.post("/api/v1/scripts", json={"name": "v-api", "source": GOOD}).json()
    client.put(f"/api/v1/scripts/{created['id']}", json={"source": GOOD.replace("payload", "attempt")})
    versions = client.get(f"/api/v1/scripts/{created['id']}/versions").json()
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[0]["author"].startswith("token ") and "attempt" in versions[0]["source"]
    one = client.get(f"/api/v1/scripts/{created['id']}/versions/1")
    assert one.status_code == 200 and one.json()["source"] == GOOD and one.json()["created_at"]
    missing = client.get(f"/api/v1/scripts/{created['id']}/versions/7")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_docs_and_redoc_load_only_local_assets(app):
    from fastapi.testclient import TestClient

    client = TestClient(app)
    for path in ("/docs", "/redoc"):
        html = client.get(path).text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets and all(a.startswith("/docs-assets/") for a in assets), (path, assets)
        assert "cdn" not in html.lower() and "fonts.googleapis" not in html
        for asset in assets:
            answer = client.get(asset)
            assert answer.status_code == 200 and len(answer.content) > 1000, asset


def test_every_operation_has_a_summary_and_a_description(app):
    missing = [f"{method.upper()} {path}" for path, operations in app.openapi()["paths"].items()
               for method, operation in operations.items()
               if not operation.get("summary") or not operation.get("description")]
    assert missing == []


def test_run_with_payload_shows_the_events_it_emitted(signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    cart = script_extras.starter("abandoned-cart")
    url = b.post("/scripts/new", {"name": "cart", "source": cart.source, "timeout_ms": "5000",
                                  "memory_mb": "32"}).headers["location"]
    b.get(url)
    html = b.post(url + "/run", {"payload": cart.payload}, headers={"HX-Request": "true"}).text
    assert 'id="run-status">succeeded' in html and '"reminded": true' in html
    assert re.search(r'<ul id="run-events"><li><a href="/events/\d+">cart.reminder</a>', html)
    assert "ann@example.com" in html
    full = b.post(url + "/run", {"payload": '{"cart": "c-9"}'}).text  # no email: the script throws
    assert 'id="run-status">failed' in full and "the payload needs cart and email" in full
    assert "Emitted events" in full and "None." in full


def test_check_with_a_form_body_is_refused_not_a_server_error(app, signed_in):
    b = signed_in("admin")
    b.get("/scripts/new")
    b.client.raise_server_exceptions = False
    form = b.post("/scripts/check", {"source": GOOD})  # the CSRF token as a form field, as a plain form sends it
    assert form.status_code == 422 and form.json()["error"]["code"] == "validation_error", form.text
    assert _check(b, GOOD).json()["ok"] is True

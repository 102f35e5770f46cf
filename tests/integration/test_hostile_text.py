"""U+0000 is refused as text on both backends alike (jsonsafe's rule; SPEC section 4: no input gets a 5xx).

PostgreSQL's text cannot hold U+0000 and SQLite's can, so the same input used to be stored on one
backend and a server error on the other. Now API input holding it, in the body (JSON strings and
keys included), the path or the query, is `422 validation_error` and changes nothing; a script
handing it to the host (kv keys and values, emit, schedule.at, its output) gets an `Error` it can
catch; and diagnostics (an error message, console lines) are kept with U+FFFD in its place.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.support.inprocess import sandbox_cache, services  # noqa: F401  (fixtures: scripts run in-process)

NUL = "\u0000"


def _is_error(answer: Any, status: int, code: str, what: Any) -> None:
    assert answer.status_code == status, (what, answer.status_code, answer.text)
    assert answer.json()["error"]["code"] == code, (what, answer.text)


def _script(client: Any, source: str, name: str = "s") -> int:
    answer = client.post("/api/v1/scripts", json={"name": name, "source": source, "timeout_ms": 20_000})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_api_refuses_nul_in_bodies(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin, "export default () => 1;")
    at = "2030-01-01T00:00:00Z"
    bodies = [
        ("PUT", "/api/v1/kv/k", {"value": "a" + NUL}),
        ("PUT", "/api/v1/kv/k", {"value": {"a" + NUL: 1}}),
        ("POST", "/api/v1/scripts", {"name": "n" + NUL, "source": "export default () => 1;"}),
        ("POST", "/api/v1/scripts", {"name": "n", "source": "export default () => 1;//" + NUL}),
        ("PUT", f"/api/v1/scripts/{sid}", {"name": "n" + NUL}),
        ("POST", "/api/v1/schedules", {"name": "n" + NUL, "script_id": sid, "rule": "@daily"}),
        ("POST", "/api/v1/schedules/batch", {"schedules": [{"name": "n" + NUL, "script_id": sid, "rule": "@daily"}]}),
        ("PUT", "/api/v1/jobs/j", {"script_id": sid, "run_at": at, "payload": NUL}),
        ("POST", "/api/v1/jobs/batch", {"jobs": [{"key": "j" + NUL, "script_id": sid, "run_at": at}]}),
        ("POST", "/api/v1/targets", {"kind": "webhook", "name": "t" + NUL, "topics": ["x"],
                                     "url": "https://example.com/hook"}),
        ("POST", "/api/v1/recurrence/preview", {"rule": "@daily" + NUL}),
    ]
    for method, url, body in bodies:
        _is_error(admin.request(method, url, json=body), 422, "validation_error", (method, url, body))
    assert admin.get("/api/v1/kv").json()["items"] == []
    assert [s["name"] for s in admin.get("/api/v1/scripts").json()] == ["s"]
    assert admin.get("/api/v1/schedules").json() == [] and admin.get("/api/v1/targets").json() == []


def test_api_refuses_nul_in_paths_and_queries(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin, "export default () => 1;")
    job = {"script_id": sid, "run_at": "2030-01-01T00:00:00Z"}
    forged = base64.urlsafe_b64encode(("k" + NUL).encode()).decode().rstrip("=")
    for method, url, body in [("PUT", "/api/v1/kv/a%00b", {"value": 1}), ("GET", "/api/v1/kv/a%00b", None),
                              ("DELETE", "/api/v1/kv/a%00b", None), ("PUT", "/api/v1/jobs/a%00b", job),
                              ("GET", "/api/v1/jobs/a%00b", None), ("DELETE", "/api/v1/jobs/a%00b", None),
                              ("GET", "/api/v1/kv?prefix=%00", None), ("GET", f"/api/v1/kv?cursor={forged}", None),
                              ("GET", "/api/v1/runs?job_key=a%00", None), ("GET", "/api/v1/audit?actor=%00", None),
                              ("PUT", "/api/v1/secrets/A%00", {"value": "v"}),
                              ("GET", "/api/v1/runs?a%00=1", None)]:
        _is_error(admin.request(method, url, json=body), 422, "validation_error", (method, url))
    assert admin.get("/api/v1/kv").json()["items"] == []


BAD_EFFECTS = {
    "kv-set-key": 'await almanac.kv.set("a\\0b", 1);',
    "kv-set-value": 'await almanac.kv.set("k", {v: "a\\0b"});',
    "kv-get-key": 'await almanac.kv.get("a\\0b");',
    "kv-delete-key": 'await almanac.kv.delete("a\\0b");',
    "kv-list-prefix": 'await almanac.kv.list("a\\0");',
    "emit-topic": 'await almanac.emit("t\\0", 1);',
    "emit-data": 'await almanac.emit("t", ["\\0"]);',
    "job-key": 'await almanac.schedule.at("2026-12-01T00:00:00Z", 1, {key: "chained\\0"});',
    "job-payload": 'await almanac.schedule.at("2026-12-01T00:00:00Z", "\\0", {key: "chained"});',
    "secret-name": 'await almanac.secrets.get("A\\0");',
}


def test_scripts_get_an_error_for_nul_they_hand_the_host(api: Any) -> None:
    admin = api("admin")
    for number, (name, call) in enumerate(BAD_EFFECTS.items()):
        source = ("export default async function () {\n  try {\n    " + call + "\n  } catch (e) { "
                  "await almanac.kv.set('caught-" + name + "', String(e)); return 'caught'; }\n  return 'passed'; }")
        run = admin.post(f"/api/v1/scripts/{_script(admin, source, f's{number}')}/run", json={}).json()
        assert run["status"] == "succeeded" and run["output"] == "caught", (name, run)
    caught = {row["key"]: row["value"] for row in admin.get("/api/v1/kv").json()["items"]}
    assert sorted(caught) == sorted(f"caught-{name}" for name in BAD_EFFECTS)
    assert all(value.startswith("Error: ") and "U+0000" in value for value in caught.values()), caught
    assert admin.get("/api/v1/jobs/chained").status_code == 404


def test_nul_in_output_fails_the_run_and_diagnostics_keep_a_replacement(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin, "export default async function () { await almanac.kv.set('k', 1); return {s: 'a\\0'}; }")
    run = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert run["status"] == "failed" and run["output"] is None and "U+0000" in run["error"], run
    sid = _script(admin, 'export default () => { console.log("a\\0b"); throw new Error("bad \\0 here"); };', "t")
    run = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert run["status"] == "failed" and run["error"] == "Error: bad \ufffd here", run
    assert run["logs"] == ["a\ufffdb"], run
    assert admin.get("/api/v1/kv").json()["items"] == []  # the failed run applied nothing
    for item in admin.get("/api/v1/runs").json()["items"]:
        assert admin.get(f"/api/v1/runs/{item['id']}").status_code == 200


def test_pages_refuse_nul_in_forms_and_queries(app: Any, make_tenant: Any) -> None:
    from tests.integration.web_views.conftest import Browser

    tenant = make_tenant()
    b = Browser(app)
    assert b.login(f"admin@{tenant}.test").status_code == 303
    b.client.raise_server_exceptions = False
    b.get("/scripts/new")
    made = b.post("/scripts/new", {"name": "n" + NUL, "source": "export default () => 1;"})
    assert made.status_code == 422, made.text
    for path in ("/kv?prefix=%00", "/runs?job_key=%00", "/audit?actor=%00", "/jobs/a%00"):
        assert b.get(path).status_code == 422, path
    assert "n\ufffd" not in b.get("/scripts").text
